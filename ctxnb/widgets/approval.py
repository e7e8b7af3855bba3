"""ApprovalPanel: a human approves or rejects an agent's destructive acts.

The agent's tool call runs in a background thread and blocks in
:meth:`QueueApprover.request <ctxnb.govern.approval.QueueApprover.request>`; the
kernel's main thread stays free, so the panel's buttons answer it. Start the call with
:func:`run_in_background` so the notebook cell returns at once.

The panel shows what a human decides on: the act and why, its risk in colour, the diff of
a command's changes as a coloured unified diff (exactly the diff that is committed), or
side by side (old lines left, new right) with a toggle for long files, the other
arguments one per line, and a countdown to the approver's timeout, after which the
act is refused on its own. A ticker thread redraws the countdown once a second while a
request is pending, and stops with the panel.

A click decides the request the human is looking at, never one put in its place. The
first request to reach a panel is selected for the human; once a request they were shown
leaves the list (decided here or elsewhere, or timed out), the panel selects nothing on
its own: the next is decided only after the human picks it in the list (and sees its
diff). Otherwise a click aimed at a request that timed out a moment before, or a second
click of a double click, would approve the next request unseen.
"""

from __future__ import annotations

import getpass
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any, TypeVar

from .._util.text import visible
from ..govern.approval import (
    ApprovalRequest,
    Decision,
    QueueApprover,
    approval_question,
    args_summary,
)
from ..redaction.redactor import redact_data, redact_text
from ._ipw import widgets
from .static import MONO, diff_html, diff_side_by_side_html, esc, html_table

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


#: Risk badges: a destructive act in red, anything else that still asks a human in amber.
RISK_COLORS = {"DESTRUCTIVE": "#cf222e"}
OTHER_RISK_COLOR = "#9a6700"


def _now() -> datetime:
    return datetime.now(UTC)


def _act(req: ApprovalRequest) -> str:
    """One line for the list: the tool and its arguments without the diff (shown below);
    control, bidi and invisible characters (a file name in the reason is the agent's) as
    escapes, as in the question."""
    shown = {k: v for k, v in req.args.items() if k != "diff"}
    return visible(redact_text(f"{req.tool}({args_summary(shown)}): {req.reason}"))


def _risk_badge(risk: str) -> str:
    color = RISK_COLORS.get(risk.upper(), OTHER_RISK_COLOR)
    return (
        f'<span class="ctxnb-risk" data-risk="{esc(risk)}" style="background:{color};'
        f'color:white;border-radius:3px;padding:0 6px;font-weight:600">{esc(risk)}</span>'
    )


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
        clock: the current time, for the countdown (default: the system clock).

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
        self,
        source: Any,
        *,
        by: str | None = None,
        max_history: int = 10,
        clock: Callable[[], datetime] | None = None,
        **kwargs: Any,
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
        self._clock = clock or _now
        self._ticker: threading.Thread | None = None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        # Set once a request the human was shown has left the list: the panel then
        # selects nothing on its own until the human picks a request.
        self._lost = False
        self._setting = False  # the panel itself is changing the selection
        self.header = widgets.HTML()
        self.requests = widgets.Select(options=[], rows=5, layout=widgets.Layout(width="100%"))
        self.requests.add_class("ctxnb-approval-requests")
        self.detail = widgets.HTML()
        self.detail.add_class("ctxnb-approval-detail")
        self.countdown = widgets.HTML()
        self.countdown.add_class("ctxnb-approval-countdown")
        # How the diff is drawn; shown only while the selected request has a diff.
        self.diff_layout = widgets.ToggleButtons(
            options=[("unified", "unified"), ("side by side", "side-by-side")],
            value="unified",
            description="Diff",
            tooltips=["one column, - and + lines", "old lines left, new lines right"],
            style={"button_width": "auto"},
        )
        self.diff_layout.add_class("ctxnb-diff-layout")
        self.diff_layout.observe(lambda _: self._render_detail(), names="value")
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
        self.requests.observe(lambda _: self._picked(), names="value")
        super().__init__(
            [
                self.header,
                self.requests,
                self.countdown,
                self.diff_layout,
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
        """Block until the panel shows at least ``n`` pending requests (for scripts and
        tests). What it shows, not the approver's list: a request that arrived a moment
        ago may not be drawn yet."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.requests.options) >= n, timeout)

    def refresh(self) -> None:
        """Redraw from the approver's pending list (safe to call from any thread)."""
        with self._lock:
            pending = self.pending()
            ids = [r.id for r in pending]
            current = self.requests.value
            if current is not None and current not in ids:
                self._lost = True  # the request in view left: no other takes its place
            if current in ids:
                chosen = current
            else:
                chosen = None if self._lost or not ids else ids[0]
            self._setting = True
            try:
                self.requests.options = [(_act(r), r.id) for r in pending]
                self.requests.value = chosen
            finally:
                self._setting = False
            if not pending:
                self.header.value = "<b>Approvals</b>: nothing pending"
            elif chosen is None:
                self.header.value = (
                    f"<b>Approvals</b>: {len(pending)} pending destructive act(s); "
                    "select one to see it before you decide"
                )
            else:
                self.header.value = f"<b>Approvals</b>: {len(pending)} pending destructive act(s)"
            # What the buttons decide is drawn before they are enabled.
            self._render_detail()
            self._enable()
            self._render_countdown()
            self._render_history()
            if pending:
                self._start_ticker()
            self._changed.notify_all()

    def _start_ticker(self) -> None:
        if self.approver.timeout is None or (self._ticker and self._ticker.is_alive()):
            return
        ref = weakref.ref(self)
        stop = threading.Event()

        def tick() -> None:
            # Holds the panel only weakly between ticks: a dropped panel stops its ticker.
            while not stop.wait(1.0):
                panel = ref()
                if panel is None or not panel.pending():
                    return
                panel._render_countdown()
                del panel

        self._ticker = threading.Thread(target=tick, name="ctxnb-approval-countdown", daemon=True)
        self._ticker.start()

    def _picked(self) -> None:
        """The selection changed: the human's pick (not the panel's own) is what they
        now look at."""
        with self._lock:
            if not self._setting and self.requests.value is not None:
                self._lost = False
            self._render_detail()
            self._enable()
            self._render_countdown()

    def _enable(self) -> None:
        # A button decides the selected request: with none selected there is nothing to
        # decide.
        disabled = self.requests.value is None
        self.approve_button.disabled = disabled
        self.reject_button.disabled = disabled

    # -- actions ---------------------------------------------------------------------------
    def _decide(self, approved: bool, request_id: str | None, note: str | None) -> Decision | None:
        rid = request_id or self.requests.value
        if rid is None:
            self.status.value = (
                "select a request in the list to see it before you decide"
                if self.pending()
                else "nothing pending"
            )
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
    def _selected(self) -> ApprovalRequest | None:
        rid = self.requests.value
        return next((r for r in self.pending() if r.id == rid), None)

    def remaining(self, req: ApprovalRequest) -> float | None:
        """Seconds until ``req`` is refused for want of a decision (``None``: never)."""
        if self.approver.timeout is None:
            return None
        waited = (self._clock() - req.created_at).total_seconds()
        return max(0.0, self.approver.timeout - waited)

    def _render_countdown(self) -> None:
        req = self._selected()
        left = self.remaining(req) if req is not None else None
        if req is None or left is None:
            self.countdown.value = ""
            return
        color = "#cf222e" if left <= 10 else "#57606a"
        self.countdown.value = (
            f'<span style="color:{color}" data-seconds="{int(left)}">⏱ {int(left)} s left to '
            "decide; then it is refused on its own</span>"
        )

    def _render_detail(self) -> None:
        req = self._selected()
        diff = req.args.get("diff") if req is not None else None
        self.diff_layout.layout.display = None if isinstance(diff, str) and diff else "none"
        if req is None:
            self.detail.value = ""
            return
        args = {k: v for k, v in req.args.items() if k != "diff" and v is not None}
        head = approval_question(req).split("\n\n", 1)[0]  # the act and why, without the diff
        rows = [
            ("risk", _risk_badge(req.risk)),
            ("tool", esc(req.tool)),
            (
                "args",
                "<br>".join(
                    f"<code>{esc(k)}</code> = {esc(repr(v))}" for k, v in redact_data(args).items()
                ),
            ),
            ("intent", esc(req.intent_id) if req.intent_id else None),
            ("caller", esc(req.caller) if req.caller else None),
            ("session", esc(req.session_id) if req.session_id else None),
            ("requested at", f"{req.created_at:%Y-%m-%d %H:%M:%S} UTC"),
        ]
        # The diff is the one committed, redacted once where it was made; a second pass
        # could swallow part of it (see ctxnb.govern.approval.question). Control and bidi
        # characters are shown as escapes, as in the question.
        draw = diff_side_by_side_html if self.diff_layout.value == "side-by-side" else diff_html
        shown = draw(visible(diff), redact=False) if isinstance(diff, str) else ""
        self.detail.value = (
            f'<pre class="ctxnb-code" style="{MONO};white-space:pre-wrap;margin:0 0 4px 0">'
            f"{esc(head)}</pre>"
            + shown
            + "<table class='ctxnb-table'>"
            + "".join(
                f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows if v
            )
            + "</table>"
        )

    def _history_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "decision": "approved" if d.approved else "rejected",
                "by": d.by,
                "at": f"{d.at:%H:%M:%S}",
                "act": _act(r),
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
        pending = [{"id": r.id, "act": _act(r), "intent": r.intent_id} for r in self.pending()]
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
