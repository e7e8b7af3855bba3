"""ApprovalPanel: a human approves or rejects an agent's destructive acts.

The agent's tool call runs in a background thread and blocks in
:meth:`QueueApprover.request <ctxnb.govern.approval.QueueApprover.request>`; the
kernel's main thread stays free, so the panel's buttons answer it. Start the call with
:func:`run_in_background` so the notebook cell returns at once.
"""

from __future__ import annotations

import getpass
import json
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from ..govern.approval import ApprovalRequest, Decision, QueueApprover, approval_question
from ..redaction.redactor import redact_data, redact_text
from ._ipw import widgets
from .static import esc, html_table

__all__ = ["ApprovalPanel", "run_in_background"]

T = TypeVar("T")


def run_in_background(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run ``fn(*args, **kwargs)`` in a daemon thread; return its Future at once.

    A destructive tool call that waits for approval blocks its thread until a human
    decides; run it this way so the cell returns and the ApprovalPanel's buttons stay
    live. The thread is a daemon: a call still waiting never keeps the kernel from
    shutting down.

    Example:
        >>> fut = run_in_background(sum, [1, 2, 3])
        >>> fut.result(timeout=5)
        6
    """
    fut: Future[T] = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller sees it from fut.result()
            fut.set_exception(exc)

    threading.Thread(target=run, name="ctxnb-background", daemon=True).start()
    return fut


def _who() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return "notebook user"


class ApprovalPanel(widgets.VBox):
    """Pending destructive acts, with Approve and Reject buttons.

    Args:
        source: a :class:`~ctxnb.govern.approval.QueueApprover`, or an object with an
            ``approver`` attribute holding one (the hook engine).
        by: the name recorded as the decider (default: the user name); editable in
            the panel.

    Raises:
        TypeError: when ``source`` has no queue approver.

    Example:
        >>> from ctxnb.govern.approval import ApprovalRequest, QueueApprover
        >>> q = QueueApprover(timeout=10)
        >>> panel = ApprovalPanel(q, by="ana")
        >>> fut = run_in_background(q.request, ApprovalRequest.new(
        ...     "run_command", {"cmd": "rm -rf build"}, "deletes files"))
        >>> panel.wait_for_pending(timeout=5)
        True
        >>> panel.approve_button.click()
        >>> fut.result(timeout=5).by, panel.status.value
        ('ana', 'approved by ana')
    """

    def __init__(
        self, source: Any, *, by: str | None = None, max_history: int = 10, **kwargs: Any
    ) -> None:
        approver = getattr(source, "approver", source)
        if not all(hasattr(approver, a) for a in ("pending", "decide", "on_change")):
            raise TypeError(
                f"ApprovalPanel needs a QueueApprover (or an engine whose .approver is one), "
                f"got {type(approver).__name__}; create the engine with "
                "approver=QueueApprover()"
            )
        self.approver: QueueApprover = approver
        self.max_history = max_history
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.header = widgets.HTML()
        self.requests = widgets.Select(options=[], rows=5, layout=widgets.Layout(width="100%"))
        self.requests.add_class("ctxnb-approval-requests")
        self.detail = widgets.HTML()
        self.by = widgets.Text(value=by or _who(), description="Decided by")
        self.note = widgets.Text(placeholder="optional note", description="Note")
        self.approve_button = widgets.Button(description="Approve", button_style="success")
        self.approve_button.add_class("ctxnb-approve")
        self.reject_button = widgets.Button(description="Reject", button_style="danger")
        self.reject_button.add_class("ctxnb-reject")
        self.approve_button.on_click(lambda _: self.approve())
        self.reject_button.on_click(lambda _: self.reject())
        self.status = widgets.HTML()
        self.status.add_class("ctxnb-approval-status")
        self.history_html = widgets.HTML()
        self.requests.observe(lambda _: self._render_detail(), names="value")
        super().__init__(
            [
                self.header,
                self.requests,
                self.detail,
                widgets.HBox([self.by, self.note]),
                widgets.HBox([self.approve_button, self.reject_button]),
                self.status,
                self.history_html,
            ],
            **kwargs,
        )
        ref = weakref.ref(self)

        def listener() -> None:
            panel = ref()
            if panel is not None:
                panel.refresh()

        # Called from the agent's thread when a request arrives; only widget values
        # change there (no widget is created), which ipywidgets syncs from any thread.
        self.approver.on_change(listener)
        self.refresh()

    # -- state -----------------------------------------------------------------------------
    def pending(self) -> list[ApprovalRequest]:
        return self.approver.pending()

    def wait_for_pending(self, n: int = 1, *, timeout: float = 10.0) -> bool:
        """Block until at least ``n`` requests are pending (for scripts and tests)."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.pending()) >= n, timeout)

    def refresh(self) -> None:
        """Redraw from the approver's pending list (safe to call from any thread)."""
        with self._lock:
            pending = self.pending()
            ids = [r.id for r in pending]
            current = self.requests.value
            self.requests.options = [(r.summary(), r.id) for r in pending]
            self.requests.value = current if current in ids else (ids[0] if ids else None)
            self.header.value = (
                f"<b>Approvals</b>: {len(pending)} pending destructive act(s)"
                if pending
                else "<b>Approvals</b>: nothing pending"
            )
            disabled = not pending
            self.approve_button.disabled = disabled
            self.reject_button.disabled = disabled
            self._render_detail()
            self._render_history()
            self._changed.notify_all()

    # -- actions ---------------------------------------------------------------------------
    def _decide(self, approved: bool, request_id: str | None, note: str | None) -> Decision | None:
        rid = request_id or self.requests.value
        if rid is None:
            self.status.value = "nothing pending"
            return None
        try:
            d = self.approver.decide(
                rid,
                approved,
                by=self.by.value or _who(),
                note=self.note.value if note is None else note,
            )
        except KeyError:
            self.status.value = "that request is no longer pending (decided or timed out)"
            self.refresh()
            return None
        self.note.value = ""
        self.status.value = f"{'approved' if d.approved else 'rejected'} by {d.by}"
        self.refresh()
        return d

    def approve(self, request_id: str | None = None, *, note: str | None = None) -> Decision | None:
        """Approve a request (default: the selected one); the waiting call proceeds."""
        return self._decide(True, request_id, note)

    def reject(self, request_id: str | None = None, *, note: str | None = None) -> Decision | None:
        """Reject a request (default: the selected one); the waiting call is refused."""
        return self._decide(False, request_id, note)

    # -- drawing ---------------------------------------------------------------------------
    def _render_detail(self) -> None:
        rid = self.requests.value
        req = next((r for r in self.pending() if r.id == rid), None)
        if req is None:
            self.detail.value = ""
            return
        # The question every door asks, whole (a command's diff is what is committed);
        # the arguments beside it, without that diff.
        args = {k: v for k, v in req.args.items() if k != "diff"}
        rows = [
            ("question", approval_question(req)),
            ("tool", req.tool),
            ("args", json.dumps(redact_data(args), indent=1, default=str)[:2000]),
            ("reason", redact_text(req.reason)),
            ("risk", req.risk),
            ("intent", req.intent_id),
            ("caller", req.caller),
            ("session", req.session_id),
            ("requested at", f"{req.created_at:%Y-%m-%d %H:%M:%S} UTC"),
        ]
        self.detail.value = (
            "<table class='ctxnb-table'>"
            + "".join(
                f"<tr><th style='text-align:left'>{k}</th><td><pre style='margin:0'>{esc(v)}</pre>"
                "</td></tr>"
                for k, v in rows
                if v is not None
            )
            + "</table>"
        )

    def _history_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "decision": "approved" if d.approved else "rejected",
                "by": d.by,
                "at": f"{d.at:%H:%M:%S}",
                "act": r.summary(),
                "note": d.note,
            }
            for r, d in reversed(self.approver.history[-self.max_history :])
        ]

    def _render_history(self) -> None:
        rows = self._history_rows()
        self.history_html.value = (
            "<b>Recent decisions</b>" + html_table(rows, ["decision", "by", "at", "act", "note"])
            if rows
            else ""
        )

    def _repr_html_(self) -> str:
        pending = [{"id": r.id, "act": r.summary(), "intent": r.intent_id} for r in self.pending()]
        body = (
            html_table(pending, ["id", "act", "intent"], max_rows=20)
            if pending
            else "<p><i>nothing pending</i></p>"
        )
        rows = self._history_rows()
        hist = html_table(rows, ["decision", "by", "at", "act", "note"]) if rows else ""
        return f"<div><b>Approvals</b>{body}{hist}</div>"

    def __repr__(self) -> str:
        return f"<ApprovalPanel pending={len(self.pending())}>"
