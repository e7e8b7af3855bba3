"""Tests for ctxnb.tools.search: both backends must give identical results."""

from __future__ import annotations

import doctest
import os
import sys
from pathlib import Path

import pytest
from _needs import needs, require

from ctxnb.errors import CtxnbError, NotFoundError
from ctxnb.tools import search as search_module
from ctxnb.tools.search import (
    InvalidPatternError,
    Match,
    find_ripgrep,
    glob_files,
    ripgrep_available,
    search,
)

needs_rg = needs(ripgrep_available(), "ripgrep (rg)")

FILES: dict[str, str | bytes] = {
    "README.md": "# Project\nTODO: write docs\nSee a+b (c) [d] for details.\n",
    "a.txt": "alpha\nfoo bar\nFoo Bar\nFOO\n",
    "a/b.py": "import os\n\ndef foo():\n    return os.sep  # TODO\n",
    "a/c.py": "x = 'a+b'\ny = \"(c)\"\n",
    "a/deep/d.py": "def bar(x: int) -> int:\n    return x  # todo lower\n",
    "a.b/e.txt": "foo in a.b\n",
    "uni/ünï.txt": "café crème\nnaïve CAFÉ\nπ = 3.14159\n日本語のテキスト foo\n",
    "crlf.txt": "foo line one\r\nsecond foo\r\nlast\r\n",
    "noeol.txt": "first\nfoo at end",
    "empty.txt": "",
    ".hidden/h.txt": "hidden foo\n",
    ".env": "SECRET=foo\n",
    ".git/config": "foo in git\n",
    ".ctxnb/store.txt": "foo in store\n",
    "build/out.txt": "foo in ignored build\n",
    "logs/app.log": "foo in log\n",
    "logs/keep.log": "foo kept by negation\n",
    "sub/.gitignore": "*.tmp\n!important.tmp\n",
    "sub/x.tmp": "foo tmp\n",
    "sub/important.tmp": "foo important\n",
    "sub/y.txt": "foo sub\n",
    "bin/blob.bin": b"foo\x00binary\nfoo again\n",
    "bin/late.bin": b"foo early\n" + b"x" * 200_000 + b"\x00\n",
    "latin1.txt": "caf\xe9 foo\n".encode("latin-1"),
    "win1252.txt": b"price \x80 5, caf\xe9\nodd \x81 byte\n",
    "turkish.txt": "\u0130stanbul\n\u0131spanak\nIRMAK\nplain i\nKelvin \u212a\nlong \u017f\n",
    "ctrl.txt": b"a\x1cb\nplain ab\n",
    "long.txt": "".join(f"row {i} {'foo' if i % 7 == 0 else 'bar'}\n" for i in range(1, 500)),
    "weird name with spaces.txt": "foo spaces\n",
    ".gitignore": "build/\n*.log\n!keep.log\n",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("searchtree")
    for rel, content in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
    outside = tmp_path_factory.mktemp("outside")
    (outside / "o.txt").write_text("foo outside\n")
    os.symlink(outside, root / "linked_dir")
    os.symlink(root / "a.txt", root / "linked_file.txt")
    return root


CASES: list[tuple[str, dict[str, object]]] = [
    ("foo", {}),
    ("foo", {"case_sensitive": False}),
    (r"^def \w+\(", {}),
    (r"\bTODO\b", {"case_sensitive": False}),
    ("a+b", {"regex": False}),
    ("(c)", {"regex": False}),
    ("[d]", {"regex": False}),
    (r"a\+b", {}),
    ("café", {}),
    ("CAFÉ", {"case_sensitive": False}),
    ("日本語", {}),
    (r"π\s*=\s*\d+\.\d+", {}),
    ("foo$", {}),
    (r"end$", {}),
    ("", {"globs": ["*.md"]}),
    ("foo", {"globs": ["*.py"]}),
    ("foo", {"globs": ["a/**"]}),
    ("foo", {"globs": ["**/*.txt", "!uni/**"]}),
    ("foo", {"globs": ["!*.txt"]}),
    ("foo", {"globs": ["!a"]}),
    ("foo", {"globs": ["*.{md,py}"]}),
    ("foo", {"globs": ["[ab].txt"]}),
    ("foo", {"globs": ["*.log"]}),
    ("foo", {"globs": ["**"]}),
    ("foo", {"globs": ["*.tmp"]}),
    ("row [0-9]+ foo", {}),
    ("foo", {"max_results": 5}),
    ("foo", {"exclude": lambda p: p.startswith("uni/")}),
    ("caf", {}),
    # decoding: a file that is not UTF-8 is windows-1252
    ("caf.", {}),
    ("café", {}),
    ("CAFÉ", {"case_sensitive": False}),
    ("€", {}),
    ("odd . byte", {}),
    (r"\x81", {}),
    # case folding: Python's, the same with either backend
    ("i", {"case_sensitive": False}),
    ("^i", {"case_sensitive": False}),
    ("\u0131", {"case_sensitive": False}),
    ("\u0130stanbul", {"case_sensitive": False}),
    ("irmak", {"case_sensitive": False}),
    ("k", {"case_sensitive": False}),
    ("LONG S", {"case_sensitive": False}),
    ("\u212a", {"case_sensitive": False}),
    # controls where the engines' \s differ
    (r"a\sb", {}),
    (r"\S\s\S", {}),
    ("(?i:i)stanbul", {}),
    ("(?i)\u0131rmak", {}),
    ("plain", {}),  # ASCII-only: ripgrep proposes only its own matches
    (r"\bcaf", {}),
]


def _case_id(pattern: str, options: dict[str, object]) -> str:
    # A function's repr holds its address, which differs between processes; test ids
    # must not (the workers of `make test` each collect the suite and must agree).
    shown = {k: getattr(v, "__name__", v) if callable(v) else v for k, v in options.items()}
    return f"{pattern!r}-{shown}"


@needs_rg
@pytest.mark.parametrize(("pattern", "options"), CASES, ids=[_case_id(p, o) for p, o in CASES])
def test_backends_agree(tree: Path, pattern: str, options: dict[str, object]) -> None:
    via_rg = search(tree, pattern, backend="ripgrep", **options)  # type: ignore[arg-type]
    via_py = search(tree, pattern, backend="python", **options)  # type: ignore[arg-type]
    assert via_rg == via_py
    if pattern and options.get("globs") != ["*.tmp"]:
        assert via_rg, "each case should find something, so agreement means something"


def paths(matches: list[Match]) -> list[str]:
    return sorted({m.path for m in matches})


@pytest.mark.parametrize("backend", ["python", pytest.param("ripgrep", marks=needs_rg)])
def test_file_selection_rules(tree: Path, backend: str) -> None:
    found = paths(search(tree, "foo", backend=backend))  # type: ignore[arg-type]
    assert ".hidden/h.txt" in found and ".env" in found  # hidden files are searched
    assert not any(p.startswith((".git/", ".ctxnb/")) for p in found)
    assert "build/out.txt" not in found  # ignored directory
    assert "logs/app.log" not in found and "logs/keep.log" in found  # negation
    assert "sub/x.tmp" not in found and "sub/important.tmp" in found  # nested .gitignore
    assert not any(p.startswith("bin/") for p in found)  # binary, even late NUL
    assert not any(p.startswith("linked") for p in found)  # symlinks not followed
    assert "weird name with spaces.txt" in found
    assert "latin1.txt" in found


@pytest.mark.parametrize("backend", ["python", pytest.param("ripgrep", marks=needs_rg)])
def test_match_fields_and_order(tree: Path, backend: str) -> None:
    matches = search(tree, "foo", backend=backend)  # type: ignore[arg-type]
    keys = [(tuple(m.path.split("/")), m.line_number) for m in matches]
    assert keys == sorted(keys)
    # Component-wise order: a/… before a.b/… before a.txt.
    order = [p for p in dict.fromkeys(m.path for m in matches) if p.startswith("a")]
    assert order == ["a/b.py", "a.b/e.txt", "a.txt"]
    crlf = [m for m in matches if m.path == "crlf.txt"]
    assert [(m.line_number, m.line) for m in crlf] == [(1, "foo line one"), (2, "second foo")]
    assert crlf[1].column == 8
    noeol = [m for m in matches if m.path == "noeol.txt"]
    assert [(m.line_number, m.line) for m in noeol] == [(2, "foo at end")]
    latin = next(m for m in matches if m.path == "latin1.txt")
    assert latin.line == "caf\xe9 foo"  # not UTF-8: read as windows-1252
    uni = next(m for m in matches if m.path == "uni/ünï.txt")
    assert uni.line == "日本語のテキスト foo" and uni.column == 10


def test_python_backend_alone(tree: Path) -> None:
    matches = search(tree, r"def \w+", backend="python")
    assert [(m.path, m.line_number, m.line) for m in matches] == [
        ("a/b.py", 3, "def foo():"),
        ("a/deep/d.py", 1, "def bar(x: int) -> int:"),
    ]
    assert matches[0].column == 1


def test_auto_without_ripgrep_uses_python(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXNB_RG", "")  # "no ripgrep", whatever is installed
    assert not ripgrep_available()
    assert search(tree, "TODO", backend="auto") == search(tree, "TODO", backend="python")
    with pytest.raises(CtxnbError, match="backend='python'"):
        search(tree, "TODO", backend="ripgrep")


def test_max_results_keeps_first_in_order(tree: Path) -> None:
    everything = search(tree, "foo", backend="python")
    assert search(tree, "foo", backend="python", max_results=3) == everything[:3]
    assert search(tree, "foo", backend="python", max_results=0) == []
    with pytest.raises(ValueError, match="max_results"):
        search(tree, "foo", max_results=-1)


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        ("foo(", "invalid regular expression"),
        ("(?=foo)", "lookahead"),
        ("(?<!x)foo", "lookahead"),
        (r"(a)\1", "backreferences"),
        (r"(?P<n>a)(?P=n)", "backreferences"),
        (r"foo\Z", r"'\A' and '\Z'"),
        (r"\p{L}", "invalid regular expression"),
        ("[[:alpha:]]", "POSIX classes"),
        ("a{,3}", "'{,n}'"),
        ("(?#note)x", "comments"),
        ("(?a)x", "'a' and 'L' flags"),
        ("(?>ab)", "atomic"),
        ("a++", "possessive"),
        (r"a\nb", "line break"),
        ("a\nb", "line break"),
        (r"[\n]", "line break"),
    ],
)
def test_invalid_patterns_are_refused_before_searching(
    tree: Path, pattern: str, needle: str
) -> None:
    for backend in ("python", "ripgrep"):
        with pytest.raises(InvalidPatternError) as info:
            search(tree, pattern, backend=backend)  # type: ignore[arg-type]
        assert needle in str(info.value)
        assert isinstance(info.value, ValueError) and isinstance(info.value, CtxnbError)


def test_fixed_string_with_metacharacters_is_literal(tree: Path) -> None:
    assert [m.path for m in search(tree, "(c)", regex=False, backend="python")] == [
        "README.md",
        "a/c.py",
    ]


def test_bad_root_and_glob(tree: Path) -> None:
    with pytest.raises(NotFoundError, match="not a directory"):
        search(tree / "a.txt", "foo")
    with pytest.raises(InvalidPatternError, match="closing"):
        search(tree, "foo", globs=["[abc"], backend="python")
    with pytest.raises(InvalidPatternError, match="closing"):
        glob_files(tree, "*.{py")


def test_glob_files(tree: Path) -> None:
    assert glob_files(tree, "*.py") == ["a/b.py", "a/c.py", "a/deep/d.py"]
    assert glob_files(tree, "a/*.py") == ["a/b.py", "a/c.py"]
    assert glob_files(tree, "**/d.py") == ["a/deep/d.py"]
    assert glob_files(tree, "*.bin") == ["bin/blob.bin", "bin/late.bin"]  # binaries listed
    assert glob_files(tree, "*.log") == ["logs/keep.log"]  # ignored ones are not
    assert glob_files(tree, "*.tmp") == ["sub/important.tmp"]
    assert glob_files(tree, "config") == []  # .git is never listed
    assert glob_files(tree, "*.txt")[:4] == [".hidden/h.txt", "a.b/e.txt", "a.txt", "crlf.txt"]


@needs_rg
def test_backends_agree_on_a_real_source_tree() -> None:
    root = Path(search_module.__file__).parent.parent  # the ctxnb package itself
    for pattern in (r"def \w+\(", "import", "Error"):
        assert search(root, pattern, backend="ripgrep") == search(root, pattern, backend="python")


def test_docstring_examples_run() -> None:
    result = doctest.testmod(search_module)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_ripgrep_wheel_is_found_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh install has rg from the 'ripgrep' wheel beside Python, not on PATH.
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CTXNB_RG", raising=False)
    found = find_ripgrep()
    assert found is not None and Path(found).parent == Path(sys.executable).parent


def test_decoding_and_folding_are_defined(tree: Path) -> None:
    for backend in ("python", "ripgrep"):
        hits = search(tree, "caf.", backend=backend)  # type: ignore[arg-type]
        assert ("latin1.txt", "caf\xe9 foo") in {(m.path, m.line) for m in hits}
        euro = search(tree, "\u20ac", backend=backend)  # type: ignore[arg-type]
        assert [(m.path, m.line) for m in euro] == [("win1252.txt", "price \u20ac 5, caf\xe9")]
        dotted = search(tree, "i", case_sensitive=False, globs=["turkish.txt"], backend=backend)  # type: ignore[arg-type]
        assert [m.line_number for m in dotted] == [1, 2, 3, 4, 5]  # İ, ı, I, i, Kelvin


@pytest.mark.parametrize(
    "lines",
    [
        ["foo\\", "!", "[z-a]", "[", "*.log"],
        ["*", "!*/", "!*.py"],
        ["logs/**", "!logs/**/", "!logs/**/.gitkeep"],
        ["d/**/"],
        ["[a-c]*", "!a"],
    ],
    ids=["odd-lines", "keep-only-py", "keep-gitkeep", "dirs-below", "class-negation"],
)
@pytest.mark.parametrize("backend", ["python", pytest.param("ripgrep", marks=needs_rg)])
def test_ignores_are_gits(tmp_path: Path, lines: list[str], backend: str) -> None:
    import shutil
    import subprocess

    for rel in ["top.py", "src/a.py", "src/sub/b.py", "x.log", "logs/.gitkeep", "logs/a/.gitkeep",
                "logs/a/b.log", "d/f.txt", "d/e/f.txt", "a/b/f.txt", "b.txt"]:  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("needle\n")
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    found = {m.path for m in search(tmp_path, "needle", backend=backend)}  # type: ignore[arg-type]
    require(shutil.which("git") is not None, "git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    out = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert found == {p for p in out if p != ".gitignore"}


@needs_rg
def test_directories_named_like_options_or_stdin_are_searched(tmp_path: Path) -> None:
    """Old hole: a directory named ``-`` went to rg as its own argument, which rg reads
    as standard input, so its files were never searched by the ripgrep backend."""
    for d in ("-", "--files", "-e", "-x-"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "a.py").write_text("needle = 1\n")
    (tmp_path / "top.py").write_text("needle = 2\n")
    via_rg = search(tmp_path, "needle", backend="ripgrep")
    assert via_rg == search(tmp_path, "needle", backend="python")
    assert paths(via_rg) == ["--files/a.py", "-/a.py", "-e/a.py", "-x-/a.py", "top.py"]
