"""The group commit of a command's changes (ctxnb/sandbox/_commitsteps.py, _GroupCommit).

Each writer thread, its new bytes durable under a temporary name, asks for its store
commit; whoever finds no commit running commits every change waiting. Attacked here with
more writers than threads (a barrier would deadlock), a commit that fails (every writer
it carried must see the error, none may rename), and writers arriving while a commit runs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ctxnb.errors import StoreError
from ctxnb.sandbox._commitsteps import _GroupCommit, _Planned


def _planned(n: int) -> list[_Planned]:
    return [_Planned(f"f{i}.py", "modify", b"a", b"b") for i in range(n)]


def test_more_writers_than_threads_all_commit_in_shared_batches() -> None:
    batches: list[list[str]] = []

    def commit(batch: list[_Planned]) -> None:
        time.sleep(0.01)  # an fsync: writers arriving meanwhile wait for the next one
        batches.append([p.rel for p in batch])

    group = _GroupCommit(commit)
    items = _planned(64)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(group, p) for p in items]
        for f in futures:
            f.result(timeout=30)  # no writer waits for one that has not arrived
    committed = [rel for b in batches for rel in b]
    assert sorted(committed) == sorted(p.rel for p in items)  # each exactly once
    assert len(batches) < len(items)  # the fsyncs were shared


def test_a_failed_commit_fails_every_writer_it_carried_and_only_those() -> None:
    calls: list[list[str]] = []
    first_running = threading.Event()
    release = threading.Event()

    def commit(batch: list[_Planned]) -> None:
        calls.append([p.rel for p in batch])
        if len(calls) == 1:
            first_running.set()
            release.wait(10)
            raise StoreError("no space left on device")
        if len(calls) == 2:
            raise StoreError("still full")

    group = _GroupCommit(commit)
    a, b, c, d = _planned(4)
    out: dict[str, BaseException | None] = {}

    def run(p: _Planned) -> None:
        try:
            group(p)
            out[p.rel] = None
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            out[p.rel] = exc

    ta = threading.Thread(target=run, args=(a,))
    ta.start()
    assert first_running.wait(10)
    others = [threading.Thread(target=run, args=(p,)) for p in (b, c)]
    for t in others:
        t.start()
    time.sleep(0.1)  # b and c wait for the commit running: they form the next batch
    release.set()
    for t in [ta, *others]:
        t.join(10)
    # The failed first commit carried a alone; b and c, waiting for it, shared the next.
    assert calls[0] == ["f0.py"] and sorted(calls[1]) == ["f1.py", "f2.py"]
    assert all(isinstance(out[p.rel], StoreError) for p in (a, b, c))
    run(d)  # a later commit is not poisoned by the failed ones
    assert out["f3.py"] is None


def test_a_writer_that_drops_out_leaves_no_outcome_behind() -> None:
    group = _GroupCommit(lambda batch: None)
    (p,) = _planned(1)
    group(p)
    group.drop(p)
    assert group._outcome == {}
    with pytest.raises(ValueError):
        _GroupCommit(lambda batch: (_ for _ in ()).throw(ValueError("x")))(p)
