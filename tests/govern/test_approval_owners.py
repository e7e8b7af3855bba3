"""A queue of approvals shared by several askers: each sees, reads and answers only its
own; the workspace's own UI (the queue itself) sees them all. Tried as the other asker
would: list, guess the id, answer it, read its decision and the history.
"""

from __future__ import annotations

import threading

import pytest

from ctxnb.govern.approval import ApprovalRequest, QueueApprover


def _removal(path: str) -> ApprovalRequest:
    return ApprovalRequest.new("delete_file", {"path": path}, f"deletes {path}")


def test_another_owner_can_neither_list_nor_answer_nor_read_an_approval() -> None:
    queue = QueueApprover(timeout=30)
    a, b = queue.for_owner("mcp-session-a"), queue.for_owner("mcp-session-b")
    req = _removal("report.py")
    decided: list[bool] = []
    waiting = threading.Thread(target=lambda: decided.append(a.request(req).approved))
    waiting.start()
    try:
        for _ in range(500):  # the request is queued by the thread: wait for it
            if queue.pending():
                break
            threading.Event().wait(0.01)
        assert [r.id for r in queue.pending()] == [req.id]  # the workspace's UI sees it
        assert [r.id for r in a.pending()] == [req.id]
        assert b.pending() == []  # B lists nothing
        with pytest.raises(KeyError, match="no pending approval request"):
            b.decide(req.id, True, by="b")  # B knows the id: still not found
        assert waiting.is_alive() and decided == []
        a.decide(req.id, False, by="a's user")
    finally:
        waiting.join(10)
    assert decided == [False]
    assert b.result(req.id) is None and b.history == []  # nor can B read how it went
    assert a.result(req.id) is not None and [r.id for r, _ in a.history] == [req.id]
    assert [r.id for r, _ in queue.history] == [req.id]


def test_the_workspace_ui_answers_any_owner_and_an_owner_is_named() -> None:
    queue = QueueApprover(timeout=30)
    a = queue.for_owner("acp-session-1")
    ev = a.submit(_removal("a.txt"))
    (pending,) = queue.pending()
    queue.decide(pending.id, True, by="ana")
    assert ev.is_set() and a.result(pending.id) is not None
    assert a.result(pending.id).approved  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="non-empty"):
        queue.for_owner("")
