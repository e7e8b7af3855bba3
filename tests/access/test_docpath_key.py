"""docPath is the key of every file tool: a case or Unicode variant of a file's name is
that file, or is refused as ambiguous; never a second file (issue #28, point 3).

Run on the machine's own (case-sensitive) filesystem: each test first checks that two
names differing only in case really are two files here.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import NotFoundError, PolicyError


def _case_sensitive(tmp_path: Path) -> None:
    probe = tmp_path / "case-probe"
    probe.mkdir()
    (probe / "A").write_text("")
    if (probe / "a").exists():  # pragma: no cover - macOS and Windows defaults
        pytest.skip("case-insensitive filesystem: a variant is the same file here anyway")
    (probe / "A").unlink()
    probe.rmdir()


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    _case_sensitive(tmp_path)
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "App.py").write_text("x = 1\n")
    return Workspace.open(root)


def _files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".ctxnb" not in p.parts
    )


def test_a_case_variant_reads_the_file_the_tools_report(ws: Workspace) -> None:
    tools = ws.tools(ws.session("s"))
    first = tools.read_file("src/App.py")
    assert first.doc_path == "src/app.py"
    again = tools.read_file(first.doc_path)  # the key the tool itself reported
    assert again.path == "src/App.py" and again.content == "x = 1\n"
    assert tools.read_file("SRC/APP.PY").sha256 == first.sha256
    assert [v.action for v in tools.get_file_history("src/app.py")] == ["created"]
    assert tools.summarize_file("src/app.py").startswith("src/App.py")


def test_write_file_with_a_case_variant_leaves_one_file(ws: Workspace) -> None:
    tools = ws.tools(ws.session("s"))
    # Not read yet: the variant names the existing file, so the write is checked against it.
    with pytest.raises(PolicyError) as e:
        tools.write_file("src/app.py", "y = 2\n")
    assert e.value.error_code == "READ_BEFORE_WRITE" and "src/App.py" in str(e.value)
    assert _files(ws.root) == ["src/App.py"]
    tools.read_file("src/App.py")
    result = tools.write_file("src/app.py", "y = 2\n")
    assert result.success and result.path == "src/App.py"
    assert _files(ws.root) == ["src/App.py"]
    assert (ws.root / "src" / "App.py").read_text() == "y = 2\n"
    # mode="create" with a variant of an existing name is "exists", not a second file
    with pytest.raises(PolicyError) as e:
        tools.write_file("SRC/APP.py", "z = 3\n", mode="create")
    assert e.value.error_code == "FILE_EXISTS"
    assert _files(ws.root) == ["src/App.py"]


def test_apply_patch_creating_a_variant_is_a_conflict(ws: Workspace) -> None:
    tools = ws.tools(ws.session("s"))
    diff = "--- /dev/null\n+++ b/src/app.py\n@@ -0,0 +1 @@\n+new = 1\n"
    result = tools.apply_patch("src/app.py", diff)
    assert not result.success and result.conflict
    assert _files(ws.root) == ["src/App.py"]


def test_unicode_normalization_variants_are_one_document(tmp_path: Path) -> None:
    _case_sensitive(tmp_path)
    root = tmp_path / "ws"
    root.mkdir()
    nfd = unicodedata.normalize("NFD", "café.md")
    nfc = unicodedata.normalize("NFC", "café.md")
    assert nfd != nfc
    (root / nfd).write_text("décomposé\n")
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("s"))
    assert tools.read_file(nfc).content == "décomposé\n"
    tools.read_file(nfd)
    assert tools.write_file(nfc, "composé\n").path == nfd
    assert _files(root) == [nfd]


def test_two_files_sharing_a_key_are_refused_as_ambiguous(ws: Workspace) -> None:
    (ws.root / "src" / "app.py").write_text("y = 2\n")
    tools = ws.tools(ws.session("s"))
    # exact names still reach their own file
    assert tools.read_file("src/app.py").content == "y = 2\n"
    assert tools.read_file("src/App.py").content == "x = 1\n"
    for call in (
        lambda: tools.read_file("SRC/APP.PY"),
        lambda: tools.write_file("src/APP.py", "z\n"),
        lambda: tools.get_file_history("Src/App.PY"),
    ):
        with pytest.raises(PolicyError) as e:
            call()
        assert e.value.error_code == "AMBIGUOUS_DOC_PATH"
        assert "src/App.py" in str(e.value) and "src/app.py" in str(e.value)
    assert _files(ws.root) == ["src/App.py", "src/app.py"]


def test_a_variant_of_a_denied_file_is_refused_not_created(tmp_path: Path) -> None:
    _case_sensitive(tmp_path)
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".env").write_text("TOKEN=generated-not-real\n")
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("s"))
    for name in (".ENV", ".Env"):
        with pytest.raises(PolicyError) as e:
            tools.write_file(name, "TOKEN=other\n")
        assert e.value.error_code == "PATH_DENIED"
        with pytest.raises(PolicyError):
            tools.read_file(name)
    assert sorted(p.name for p in root.iterdir() if p.name != ".ctxnb") == [".env"]


def test_a_new_name_is_still_a_new_file(ws: Workspace) -> None:
    tools = ws.tools(ws.session("s"))
    assert tools.write_file("src/other.py", "o = 1\n", mode="create").success
    assert _files(ws.root) == ["src/App.py", "src/other.py"]
    with pytest.raises(NotFoundError):
        tools.read_file("src/missing.py")
