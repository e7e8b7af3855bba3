"""Search returns at most ``limit`` hits, says when it cut, and continues from a cursor
(issue #28, point 5); compared with ``grep -rn`` on the same tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _needs import require

from ctxnb import Workspace
from ctxnb.errors import PolicyError
from ctxnb.tools.search import ripgrep_available


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    for d in range(5):
        (tmp_path / f"d{d}").mkdir()
        for f in range(7):
            body = "".join(f"self.x{n} = {n}\n" for n in range(30))
            (tmp_path / f"d{d}" / f"m{f}.py").write_text(body)
    return Workspace.open(tmp_path)


def _grep(root: Path) -> set[tuple[str, int]]:
    require(shutil.which("grep") is not None, "grep")
    out = subprocess.run(
        ["grep", "-rn", "--include=*.py", "self", "."], cwd=root, capture_output=True, text=True
    ).stdout
    hits = set()
    for line in out.splitlines():
        path, number, _ = line.split(":", 2)
        hits.add((path.removeprefix("./"), int(number)))
    return hits


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_pages_of_at_most_limit_cover_what_grep_finds(ws: Workspace, backend: str) -> None:
    if backend == "ripgrep":
        require(ripgrep_available(), "ripgrep (rg)")
    tools = ws.tools(ws.session("s", rules=False), search_backend=backend)
    first = tools.search("self")
    assert len(first) == 200 and first.truncated and first.cursor is not None
    seen = [(h["path"], h["line_number"]) for h in first]
    cursor = first.cursor
    while cursor is not None:
        page = tools.search("self", limit=333, cursor=cursor)
        assert len(page) <= 333
        seen += [(h["path"], h["line_number"]) for h in page]
        cursor = page.cursor
        assert page.truncated == (cursor is not None)
    assert len(seen) == len(set(seen)) == 5 * 7 * 30
    assert set(seen) == _grep(ws.root)


def test_dispatch_and_the_context_say_the_answer_was_cut(ws: Workspace) -> None:
    session = ws.session("s", rules=False)
    tools = ws.tools(session)
    out = tools.dispatch("search", {"pattern": "self", "limit": 10})
    assert out["ok"] and len(out["result"]) == 10 and out["truncated"] is True
    # The cursor names the last hit: the next page starts after it.
    assert out["cursor"] == "d0/m0.py:10"
    assert "search again with cursor='d0/m0.py:10'" in session.assemble().to_text()
    last = tools.dispatch("search", {"pattern": "x29 = 29", "limit": 50})
    assert len(last["result"]) == 35 and last["truncated"] is False and last["cursor"] is None


def test_a_bad_limit_or_cursor_is_one_clear_error(ws: Workspace) -> None:
    tools = ws.tools(ws.session("s", rules=False))
    with pytest.raises(PolicyError, match="cursor"):
        tools.search("self", cursor="../etc")
    with pytest.raises(PolicyError, match="limit"):
        tools.search("self", limit=0)
    assert tools.dispatch("search", {"pattern": "self", "limit": 0})["error_code"] == (
        "INVALID_ARGUMENTS"
    )
