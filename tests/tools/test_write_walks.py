"""A governed write walks to its file three times (resolve, read, write); every other
"is it there" of the call is answered from the path policy's look, within that call only.

Each answer taken from the look is tried against a file that another program creates,
removes or renames after it: the write must act as if the answer had been taken again
(the optimistic lock, the docPath variant, the tool's own check under the file's lock).
Also here: the lock directory, made again when someone removed it; the last check before
a rename refuses a FIFO swapped in instead of reading it as the file's content (the store
would keep that as a version).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _intents import PATCH_INTENTS as INTENTS  # the one intent these write tests own

from ctxnb import Workspace
from ctxnb.access import PathPolicy
from ctxnb.access._fdwalk import FdWalk
from ctxnb.errors import PolicyError
from ctxnb.govern import init_governance

TARGET = "inventory/report.py"


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


def _tools(root: Path) -> Any:
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("walks"), caller="test")
    tools.dispatch("select_active_intent", {"intent_id": "INT-001"})
    return tools


class _Meanwhile:
    """A pre policy that lets another program act right before the optimistic lock."""

    name = "meanwhile"

    def __init__(self, act: Any) -> None:
        self.act = act

    def check(self, call: Any, engine: Any) -> None:
        if call.tool == "write_file":
            self.act()


def _before_the_lock(tools: Any, act: Any) -> None:
    pre = tools.engine.pre
    at = next(i for i, p in enumerate(pre) if p.name == "optimistic-lock")
    pre.insert(at, _Meanwhile(act))


def test_a_governed_write_of_an_existing_file_walks_to_it_three_times(
    gov: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = _tools(gov)
    read = tools.read_file(TARGET)
    opened: list[int] = []
    real = FdWalk.open_root

    def counting(self: FdWalk, p: Any) -> int:
        opened.append(1)
        return real(self, p)

    monkeypatch.setattr(FdWalk, "open_root", counting)
    assert tools.write_file(TARGET, read.content + "# more\n").success
    # The path policy's look, the read under the lock, the write: the find of the
    # document, the optimistic lock and the store's observe take the look's answer.
    assert len(opened) == 3


def test_the_optimistic_lock_looks_again_before_refusing_a_file_gone_since(gov: Path) -> None:
    tools = _tools(gov)
    # Never read: had the file stayed, READ_BEFORE_WRITE. It is removed after the path
    # policy saw it, so the write makes a new file.
    _before_the_lock(tools, lambda: (gov / TARGET).unlink())
    out = tools.dispatch("write_file", {"path": TARGET, "content": "new\n"})
    assert out["ok"], out
    assert (gov / TARGET).read_text() == "new\n"


def test_a_file_created_after_the_look_is_never_overwritten_unread(gov: Path) -> None:
    tools = _tools(gov)
    path = "inventory/fresh.py"
    _before_the_lock(tools, lambda: (gov / path).write_text("outside\n"))
    out = tools.dispatch("write_file", {"path": path, "content": "agent\n"})
    assert out["error_code"] == "READ_BEFORE_WRITE"
    assert (gov / path).read_text() == "outside\n"


def test_no_look_is_kept_for_the_next_call(gov: Path) -> None:
    tools = _tools(gov)
    first = tools.read_file(TARGET)  # its look: a file, under that exact name
    # Another program renames it to a case variant: the same document.
    os.rename(gov / TARGET, gov / "inventory" / "Report.py")
    again = tools.read_file(TARGET)
    assert again.path == "inventory/Report.py"
    assert again.sha256 == first.sha256


@pytest.mark.parametrize(
    "path", [".env", "a/../b", ".git/config", "x/.ctxnb-tmp-1", "docs\\a.md", ".ctxnb/x"]
)
def test_check_name_refuses_by_name_as_check_does(tmp_path: Path, path: str) -> None:
    policy = PathPolicy([tmp_path], allow=["**/*.md", "*.md"])
    with pytest.raises(PolicyError) as by_look:
        policy.check(path)
    with pytest.raises(PolicyError) as by_name:
        policy.check_name(path)
    assert by_name.value.details["rule"] == by_look.value.details["rule"]
    assert policy.check_name("docs/a.md") == policy.check("docs/a.md")


def test_an_observe_of_walked_bytes_still_refuses_a_denied_name(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path)
    with pytest.raises(PolicyError):
        ws.observe([".env"], data=[b"TOKEN=1\n"], walked=True)
    assert ws.observe(["a.py"], data=[b"x = 1\n"], walked=True)[0].action == "created"


def test_writes_go_on_when_the_lock_directory_is_removed(gov: Path) -> None:
    tools = _tools(gov)
    read = tools.read_file(TARGET)
    assert tools.write_file(TARGET, "one\n", expected_sha256=read.sha256).success
    locks = gov / ".ctxnb" / "locks"
    shutil.rmtree(locks)
    assert tools.write_file(TARGET, "two\n").success
    assert (locks / "all-files.lock").is_file()
    assert (gov / TARGET).read_text() == "two\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("existing", [True, False])
def test_a_fifo_swapped_in_during_a_checked_write_is_refused_not_read(
    tmp_path: Path, existing: bool
) -> None:
    policy = PathPolicy([tmp_path])
    target = tmp_path / "a.txt"
    if existing:
        target.write_bytes(b"old\n")

    def swap() -> None:
        target.unlink(missing_ok=True)
        os.mkfifo(target)

    with pytest.raises(PolicyError) as exc:
        policy.write_bytes_atomic(
            "a.txt",
            b"new\n",
            check_replaced=True,
            expected_sha256=_sha(b"old\n") if existing else None,
            while_syncing=swap,
        )
    assert exc.value.details["rule"] == "special-file"
    assert os.path.exists(target) and not target.is_file()  # the FIFO, kept
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".ctxnb-tmp")]
