"""The git a task needs, run as the ``git`` program: trees out of a checkout, patches in,
the agent's change out as a diff.

Nothing here writes to the user's checkout: a tree is written out through a temporary
index file of ours (``GIT_INDEX_FILE``), never the checkout's own index or work tree.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import TaskRepoError

# Commits made here are ours, not the user's: a fixed identity and date keep them (and
# their ids) the same on every machine.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "ctxnb",
    "GIT_AUTHOR_EMAIL": "ctxnb@localhost",
    "GIT_COMMITTER_NAME": "ctxnb",
    "GIT_COMMITTER_EMAIL": "ctxnb@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
# Pathspecs for what ctxnb itself adds to a workspace: never part of the agent's change.
OWN_FILES = (":(exclude).ctxnb", ":(exclude).orchestration")


def git(
    repo: str | os.PathLike[str],
    *args: str,
    data: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run git in ``repo``; a failure raises :class:`TaskRepoError` with git's message."""
    proc = subprocess.run(
        ["git", "-C", os.fspath(repo), *args],
        input=data,
        capture_output=True,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
    )
    if check and proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip()
        raise TaskRepoError(f"git {' '.join(args[:2])} in {repo} failed: {msg}")
    return proc


def commit_of(repo: str | os.PathLike[str], rev: str) -> str:
    """The full id of ``rev``'s commit.

    Raises:
        TaskRepoError: ``repo`` is not a git repository, or has no such commit.
    """
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if proc.returncode != 0:
        if git(repo, "rev-parse", "--git-dir", check=False).returncode != 0:
            raise TaskRepoError(
                f"{repo} is not a git repository; give a checkout of the task's repo"
            )
        raise TaskRepoError(
            f"commit {rev} is not in {repo}; fetch it (git -C {repo} fetch origin {rev}) "
            "or give a checkout that has it"
        )
    return proc.stdout.decode().strip()


def export_tree(repo: str | os.PathLike[str], rev: str, dest: str | os.PathLike[str]) -> Path:
    """Write the tree of ``rev`` into ``dest`` (made if missing), as git checks it out."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    fd, index = tempfile.mkstemp(prefix="ctxnb-index-")
    os.close(fd)
    os.unlink(index)  # git wants to make it itself
    try:
        env = {"GIT_INDEX_FILE": index}
        git(repo, "read-tree", rev, env=env)
        git(repo, "checkout-index", "--all", f"--prefix={dest.resolve()}/", env=env)
    finally:
        if os.path.exists(index):
            os.unlink(index)
    return dest


def init_snapshot(root: str | os.PathLike[str], message: str) -> str:
    """Make ``root`` a repository of its own whose one commit holds its files; return the
    commit (the agent's ``git diff`` and the prediction are against it)."""
    git(root, "init", "--quiet")
    git(root, "add", "--all", "--force", "--", ".")
    git(root, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", message, env=_IDENTITY)
    return git(root, "rev-parse", "HEAD").stdout.decode().strip()


def diff_against(root: str | os.PathLike[str], commit: str) -> str:
    """Everything changed in ``root`` since ``commit`` (new files too, ctxnb's own left
    out), as a diff that ``git apply`` / ``patch -p1`` applies at that commit."""
    index = Path(root) / ".git" / "ctxnb-diff-index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(root, "read-tree", commit, env=env)
        # Ignored files stay out, as from `git add -A`: build output is not a change.
        git(root, "add", "--all", "--", ".", *OWN_FILES, env=env)
        out = git(root, "diff", "--cached", "--binary", "--no-color", commit, env=env).stdout
    finally:
        index.unlink(missing_ok=True)
    return out.decode("utf-8", errors="surrogateescape")


def apply_patch(root: str | os.PathLike[str], patch: str, *, what: str) -> str | None:
    """Apply a diff in ``root``; None when it applied, else why not (git's words)."""
    if not patch.strip():
        return None
    data = patch.encode("utf-8", errors="surrogateescape")
    if not data.endswith(b"\n"):
        data += b"\n"
    proc = git(root, "apply", "--whitespace=nowarn", "-", data=data, check=False)
    if proc.returncode == 0:
        return None
    return f"the {what} does not apply: {proc.stderr.decode(errors='replace').strip()}"


def patch_paths(patch: str) -> tuple[list[str], list[str]]:
    """``(written, deleted)``: the paths a diff leaves with content, and those it deletes."""
    written: list[str] = []
    deleted: list[str] = []
    old: str | None = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            old = _side(line[4:])
        elif line.startswith("+++ "):
            new = _side(line[4:])
            if new is None and old is not None:
                deleted.append(old)
            elif new is not None and new not in written:
                written.append(new)
    return written, deleted


def _side(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith('"'):
        name = name.strip('"').encode().decode("unicode_escape")
    return name.split("/", 1)[1] if "/" in name else name


def changed_files(repo: str | os.PathLike[str], parent: str, commit: str) -> list[tuple[str, str]]:
    """``(status, path)`` of each file ``commit`` changed against ``parent`` (renames as a
    deletion and an addition)."""
    out = git(repo, "diff", "--name-status", "--no-renames", "-z", parent, commit).stdout
    parts = out.decode("utf-8", errors="surrogateescape").split("\0")
    return [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]


def diff_paths(repo: str | os.PathLike[str], parent: str, commit: str, paths: Sequence[str]) -> str:
    """The diff of ``commit`` against ``parent``, limited to ``paths``."""
    if not paths:
        return ""
    out = git(repo, "diff", "--binary", "--no-color", "--no-renames", parent, commit, "--", *paths)
    return out.stdout.decode("utf-8", errors="surrogateescape")
