"""Patches against git itself: real history replayed, and the line-ending cases.

The replay takes every commit of ``tests/data/git/pywinauto-eol.bundle`` (real
pywinauto history with CRLF, LF and mixed-ending files; see its README), asks git
for the commit's diff, applies each file's part with ``apply_file_patch`` and
compares the result with the bytes git has for the file after the commit.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from _needs import require
from _paths import TESTS

from ctxnb.errors import PatchConflict, PatchError
from ctxnb.tools.patching import (
    apply_file_patch,
    apply_unified_diff,
    parse_patch,
    unified_diff,
)

BUNDLE = TESTS / "data" / "git" / "pywinauto-eol.bundle"


def _git(cwd: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-c", "core.autocrlf=false", *args],
        cwd=cwd,
        input=data,
        check=True,
        capture_output=True,
    ).stdout


def _text(data: bytes) -> str:
    # surrogateescape keeps every byte, so comparing re-encoded text compares bytes.
    return data.decode("utf-8", "surrogateescape")


def _ending(data: bytes | None) -> str:
    if data is None:
        return "none"
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    return "crlf" if crlf and not lf else ("mixed" if crlf else "lf")


class _Blobs:
    """``git cat-file --batch`` over ``rev:path`` names."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def get(self, name: str) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        assert header[-1] != b"missing", name
        data = self.proc.stdout.read(int(header[2]))
        self.proc.stdout.read(1)
        return data

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def test_replay_real_history_gives_gits_bytes(tmp_path: Path) -> None:
    require(shutil.which("git") is not None, "git")
    repo = tmp_path / "repo.git"
    _git(tmp_path, "clone", "-q", "--bare", str(BUNDLE), str(repo))
    log = _git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "-p",
        "-M",
        "--text",
        "--format=%x00%x01commit %H %P",
        "main",
    )
    blobs = _Blobs(repo)
    kinds: Counter[str] = Counter()
    endings: Counter[str] = Counter()
    commits = 0
    try:
        for chunk in _text(log).split("\x00\x01commit ")[1:]:
            head, _, diff = chunk.partition("\n")
            shas = head.split()
            if len(shas) < 2 or not diff.strip():
                continue  # the root commit has no parent to patch
            commit, parent = shas[0], shas[1]
            patches = parse_patch(diff)
            assert len(patches) == diff.count("\ndiff --git ") + diff.startswith("diff --git ")
            commits += 1
            for fp in patches:
                old = None if fp.created else blobs.get(f"{parent}:{fp.old_path}")
                new = None if fp.deleted else blobs.get(f"{commit}:{fp.new_path}")
                result = apply_file_patch(None if old is None else _text(old), fp)
                got = None if result is None else result.encode("utf-8", "surrogateescape")
                assert got == new, f"{commit[:10]} {fp.kind} {fp.path}"
                kinds[fp.kind] += 1
                endings[f"{_ending(old)}->{_ending(new)}"] += 1
    finally:
        blobs.close()
    assert commits >= 100
    assert min(kinds[k] for k in ("modify", "create", "delete", "rename")) >= 1, kinds
    for case in ("crlf->crlf", "mixed->mixed", "crlf->lf", "lf->crlf", "mixed->crlf"):
        assert endings[case] >= 1, (case, endings)


# ---------------------------------------------------------------- the line-ending cases


def _git_apply(tmp_path: Path, old: bytes, diff: str) -> bytes:
    """What ``git apply`` makes of ``diff`` on a file holding ``old``."""
    work = tmp_path / "apply"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "f").write_bytes(old)
    _git(work, "apply", "--unsafe-paths", "-", data=diff.encode())
    return (work / "f").read_bytes()


def _git_diff(tmp_path: Path, old: bytes, new: bytes) -> str:
    """The diff ``git diff --no-index`` writes from ``old`` to ``new``."""
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "a" / "f").write_bytes(old)
    (tmp_path / "b" / "f").write_bytes(new)
    out = subprocess.run(
        ["git", "diff", "--no-index", "--no-prefix", "a/f", "b/f"],
        cwd=tmp_path,
        capture_output=True,
    )
    assert out.returncode == 1, out.stderr  # 1: the files differ
    return _text(out.stdout).replace("--- a/f", "--- f").replace("+++ b/f", "+++ f")


EOL_CASES = {
    # the diff of a CRLF file carries its CRs; every line keeps CRLF
    "crlf-edit": (b"a\r\nb\r\nc\r\n", b"a\r\nB\r\nc\r\n"),
    # an added line takes the ending the diff gives it, not the file's majority
    "mixed-edit": (b"a\r\nb\r\nc\n", b"a\r\nb\r\nC\n"),
    # conversions are diffs like any other
    "crlf-to-lf": (b"a\r\nb\r\n", b"a\nb\n"),
    "lf-to-crlf": (b"a\nb\nc\n", b"a\r\nb\r\nc\r\n"),
    # "\ No newline at end of file" on the new side, then on the old side
    "drop-final-newline": (b"a\r\nb\r\n", b"a\r\nb"),
    "add-final-newline": (b"a\nb", b"a\nb\r\n"),
}


@pytest.mark.parametrize("case", sorted(EOL_CASES))
def test_line_ending_cases_match_git_apply(tmp_path: Path, case: str) -> None:
    require(shutil.which("git") is not None, "git")
    old, new = EOL_CASES[case]
    diff = _git_diff(tmp_path, old, new)
    assert _git_apply(tmp_path, old, diff) == new  # the reference agrees with itself
    assert apply_unified_diff(_text(old), diff).encode() == new
    # Our own diff carries the same endings and gives the same bytes.
    ours = unified_diff(_text(old), _text(new), fromfile="f", tofile="f")
    assert apply_unified_diff(_text(old), ours).encode() == new
    assert _git_apply(tmp_path, old, ours) == new


def test_diff_without_crs_still_applies_to_a_crlf_file() -> None:
    # A diff written from a view that hides CRs: git refuses it; ctxnb matches it
    # ignoring terminators and gives added lines the file's dominant ending.
    diff = "@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n+d\n"
    assert apply_unified_diff("a\r\nb\r\nc\r\n", diff) == "a\r\nB\r\nc\r\nd\r\n"


def test_diff_sent_through_a_crlf_channel_is_read_as_lf() -> None:
    diff = "--- a/f\r\n+++ b/f\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+B\r\n"
    assert apply_unified_diff("a\nb\n", diff) == "a\nB\n"


def test_deletion_diff_deletes_or_is_refused_never_empties() -> None:
    (fp,) = parse_patch("--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n")
    assert fp.kind == "delete" and fp.old_path == "f"
    assert apply_file_patch("a\nb\n", fp) is None
    with pytest.raises(PatchConflict, match="leave 1 line"):
        apply_file_patch("a\nb\nc\n", fp)
    with pytest.raises(PatchError, match="deletes f"):
        apply_unified_diff("a\nb\n", "--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n")


def test_git_headers_new_deleted_renamed_and_quoted() -> None:
    diff = (
        "diff --git a/new.txt b/new.txt\n"
        "new file mode 100644\n"
        "index 0000000..e69de29\n"
        'diff --git "a/caf\\303\\251 x" "b/caf\\303\\251 y"\n'
        "similarity index 100%\n"
        'rename from "caf\\303\\251 x"\n'
        'rename to "caf\\303\\251 y"\n'
        "diff --git a/old.txt b/old.txt\n"
        "deleted file mode 100644\n"
        "index e69de29..0000000\n"
    )
    made, moved, gone = parse_patch(diff)
    assert (made.kind, made.new_path, made.hunks) == ("create", "new.txt", ())
    assert (moved.kind, moved.old_path, moved.new_path) == ("rename", "café x", "café y")
    assert (gone.kind, gone.old_path) == ("delete", "old.txt")
    assert apply_file_patch(None, made) == ""
    assert apply_file_patch("", gone) is None
    with pytest.raises(PatchConflict, match="already exists"):
        apply_file_patch("x\n", made)


def test_binary_and_copy_diffs_are_refused_clearly() -> None:
    with pytest.raises(PatchError, match="binary patches are not supported"):
        parse_patch("diff --git a/x b/x\nindex 1..2 100644\nBinary files a/x and b/x differ\n")
    with pytest.raises(PatchError, match="copy diffs are not supported"):
        parse_patch("diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n")
