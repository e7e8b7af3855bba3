"""Search pages continue where the last one stopped (issue #46): compared with ripgrep's
whole output of the same tree, page after page, while files change between pages.

A cursor names the last hit's path and line, so the next page searches only from there:
a file changed, added or removed before that position moves nothing after it (an offset
would repeat or skip hits), and a path that redaction changes is never written into it.
"""

from __future__ import annotations

import secrets
import string
import subprocess
from pathlib import Path

import pytest
from _needs import require

from ctxnb import Workspace
from ctxnb.tools.search import find_ripgrep, ripgrep_available

Hit = tuple[str, int]


def _rg_all(root: Path) -> list[Hit]:
    """Every hit of ``self`` below ``root`` by ripgrep itself, in the tools' order (path
    component by component, then line)."""
    rg = find_ripgrep()
    require(rg is not None, "ripgrep (rg)")
    assert rg is not None
    out = subprocess.run(
        [rg, "--no-heading", "-n", "--no-messages", "-g", "!.ctxnb", "self", "."],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    hits = []
    for line in out.splitlines():
        path, number, _ = line.split(":", 2)
        hits.append((path.removeprefix("./"), int(number)))
    return sorted(hits, key=lambda h: (h[0].split("/"), h[1]))


def _after(hits: list[Hit], pos: Hit) -> list[Hit]:
    key = (pos[0].split("/"), pos[1])
    return [h for h in hits if (h[0].split("/"), h[1]) > key]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for d in ("a", "b", "b-c", "c"):
        (tmp_path / d).mkdir()
        for f in range(4):
            body = "".join(f"self.x{n} = {n}\n" if n % 3 else f"pass  # {n}\n" for n in range(40))
            (tmp_path / d / f"m{f}.py").write_text(body)
    return tmp_path


def _tools(root: Path, backend: str):  # type: ignore[no-untyped-def]
    if backend == "ripgrep":
        require(ripgrep_available(), "ripgrep (rg)")
    ws = Workspace.open(root)
    return ws.tools(ws.session("s", rules=False), search_backend=backend)


def _page(tools, cursor: str | None, limit: int) -> tuple[list[Hit], str | None]:  # type: ignore[no-untyped-def]
    ans = tools.search("self", limit=limit, cursor=cursor)
    assert ans.truncated == (ans.cursor is not None)
    return [(h["path"], h["line_number"]) for h in ans], ans.cursor


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_every_page_is_the_next_slice_of_ripgreps_output(root: Path, backend: str) -> None:
    tools = _tools(root, backend)
    expected = _rg_all(root)
    assert len(expected) == 4 * 4 * 26
    seen: list[Hit] = []
    cursor = None
    while True:
        page, cursor = _page(tools, cursor, 37)
        assert page == expected[len(seen) : len(seen) + 37]  # same order, no gap
        seen += page
        if cursor is None:
            break
        assert cursor == f"{page[-1][0]}:{page[-1][1]}"
    assert seen == expected


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_files_changed_between_pages_move_no_hit_after_the_cursor(root: Path, backend: str) -> None:
    tools = _tools(root, backend)
    first, cursor = _page(tools, None, 150)  # stops in b/
    assert cursor is not None and cursor.startswith("b/")
    pos = first[-1]
    # Before the position: a new file, hits added at the top of a paged file, a paged
    # file removed. After it: hits added to a file not reached yet, a file removed.
    (root / "a" / "m0-new.py").write_text("self.new = 1\n" * 5)
    paged = root / "b" / "m0.py"
    paged.write_text("self.top = 0\n" * 7 + paged.read_text())
    (root / "a" / "m3.py").unlink()
    (root / "c" / "m1.py").write_text((root / "c" / "m1.py").read_text() + "self.end = 1\n")
    (root / "c" / "m2.py").unlink()
    rest: list[Hit] = []
    while cursor is not None:
        page, cursor = _page(tools, cursor, 150)
        rest += page
    assert rest == _after(_rg_all(root), pos)  # no gap, nothing twice
    assert not set(rest) & set(first)


def _token() -> str:
    # A generated GitHub token shape: redaction replaces it wherever it appears.
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_a_path_redaction_changes_is_never_written_into_a_cursor(root: Path, backend: str) -> None:
    secret_dir = root / "b" / _token()
    secret_dir.mkdir()
    (secret_dir / "k.py").write_text("self.k = 1\n" * 30)
    tools = _tools(root, backend)
    expected = _rg_all(root)
    seen: list[Hit] = []
    cursor = None
    pages = 0
    while True:
        ans = tools.search("self", limit=11, cursor=cursor)
        pages += 1
        seen += [(h["path"], h["line_number"]) for h in ans]
        cursor = ans.cursor
        if cursor is None:
            break
        assert secret_dir.name not in cursor
    # The hits in the secret's folder come back redacted; every other one as rg gave it.
    plain = [h for h in expected if secret_dir.name not in h[0]]
    assert [h for h in seen if "REDACTED" not in h[0]] == plain
    assert len(seen) == len(expected) and pages == -(-len(expected) // 11)


def test_an_offset_cursor_from_before_still_pages(root: Path) -> None:
    tools = _tools(root, "python")
    expected = _rg_all(root)
    page, _ = _page(tools, "40", 10)
    assert page == expected[40:50]


def test_the_first_page_stops_ripgrep_before_the_end_of_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 60 directories full of hits: a page of 5 is final after the first few, so rg is
    # never handed the last ones; the whole answer (no cap) hands it every one.
    require(ripgrep_available(), "ripgrep (rg)")
    import subprocess as sp

    from ctxnb.tools import _ripgrep

    for d in range(60):
        (tmp_path / f"d{d:02}").mkdir()
        (tmp_path / f"d{d:02}" / "m.py").write_text("self.x = 1\n" * 20)
    runs: list[list[str]] = []
    real = sp.Popen

    def spy(args, *a, **kw):  # type: ignore[no-untyped-def]
        runs.append([str(x) for x in args])
        return real(args, *a, **kw)

    monkeypatch.setattr(_ripgrep.subprocess, "Popen", spy)
    tools = _tools(tmp_path, "ripgrep")
    page, cursor = _page(tools, None, 5)
    assert page == [("d00/m.py", n) for n in range(1, 6)] and cursor == "d00/m.py:5"
    named = {x for run in runs for x in run if x.startswith("./d")}
    assert "./d00" in named and "./d59" not in named
    # The next page from a cursor deep in the tree does not hand rg what lies before it.
    runs.clear()
    page, _ = _page(tools, "d40/m.py:20", 3)
    assert page == [("d41/m.py", 1), ("d41/m.py", 2), ("d41/m.py", 3)]
    named = {x for run in runs for x in run if x.startswith("./d")}
    assert "./d39" not in named and "./d41" in named
    # Uncapped, every directory is searched.
    runs.clear()
    ws = Workspace.open(tmp_path)
    from ctxnb.tools.search import search

    assert len(search(tmp_path, "self", backend="ripgrep", policy=ws.policy)) == 60 * 20
    named = {x for run in runs for x in run if x.startswith("./d")}
    assert {f"./d{d:02}" for d in range(60)} <= named
