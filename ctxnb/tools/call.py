"""The runner of a tool call: the one hallway every call walks, whatever the tool.

:class:`ToolRunner` validates a call's arguments (:meth:`ToolRunner.dispatch`), runs the
hooks of a governed workspace around it (pre policies, the tool, post policies), and
writes its records: the audit line in ``.ctxnb/audit.jsonl`` and the tool call in the
session. :class:`~ctxnb.tools.filetools.FileTools` is a runner with the file tools;
governance adds its own tools with :meth:`ToolRunner.register_tool` and works through
the public hooks (:class:`ToolHooks`), never through a tool's private parts.

A path argument is resolved once: the path policy of a governed workspace resolves it
(``call.resolved``) and the tool uses that, instead of checking the path again.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> ws = Workspace.open(root)
    >>> tools = ws.tools(ws.session("demo"), caller="docs")
    >>> tools.dispatch("read_file", {"path": 1})["error_code"]
    'INVALID_ARGUMENTS'
    >>> tools.audit()["error_code"].tolist()
    ['INVALID_ARGUMENTS']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from ..errors import CtxnbError, NotFoundError, PatchConflict, PatchError, PolicyError
from ..redaction.redactor import redact_data, redact_text
from .audit import AuditLog, audit_args, audit_record
from .budget import BUDGET_EXCEEDED
from .results import DiffResult, PatchResult, ReadResult, SearchHits
from .schemas import TOOL_INFO, ToolInfo, tool_schemas

if TYPE_CHECKING:
    from ..access.pathrules import SafePath
    from ..config import BudgetConfig
    from ..session.core import Session
    from .budget import SessionBudget

__all__ = ["CallView", "ToolCall", "ToolHooks", "ToolRunner", "command_text"]

#: What the model is shown of a call: ``view(tool, args)`` gives the call's name and
#: arguments in the terms of the tool the model was offered (``("bash", {"command":
#: ...})`` for a ``run_command``), or None for a call the model did not make (the
#: harness's own), which the model is not shown at all. The audit line, the trace and the
#: session's record keep ctxnb's own name and arguments either way.
CallView = Callable[[str, dict[str, Any]], "tuple[str, dict[str, Any]] | None"]


@dataclass
class ToolCall:
    """One tool call as the hook engine sees it, before and after it runs."""

    tool: str
    args: dict[str, Any]
    caller: str
    session_id: str
    info: ToolInfo | None = None
    paths: list[str] = field(default_factory=list)
    before_sha256: str | None = None
    after_sha256: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    started: float = field(default_factory=time.perf_counter)
    context: dict[str, Any] = field(default_factory=dict)
    # Each path argument as the path policy resolved it (by argument name): resolved
    # once, by the first that needs it, and handed on.
    resolved: dict[str, SafePath] = field(default_factory=dict)
    # Functions that return once a record of this call is durable (the trace line, fsynced
    # in the background while the call is recorded); called before the call returns.
    durable_waits: list[Callable[[], None]] = field(default_factory=list)
    # Set by the hook engine for a write it records: given the object id of the version
    # the call is about to store, the trace record to commit in the same transaction
    # (one fsync for both, see ctxnb.govern.tracewal), or None. The tool sets
    # ``logged_tx`` to the transaction that committed it.
    attach: Callable[[str], bytes | None] | None = None
    logged_tx: int | None = None

    @property
    def mutating(self) -> bool:
        return bool(self.info and self.info.mutating)

    def wait_durable(self) -> None:
        """Run the :attr:`durable_waits` so far, in order, and forget them; every one
        runs (each may close a descriptor) and the first error is raised after."""
        from .._util.fsync import wait_all

        wait_all(self.durable_waits)


class ToolHooks(Protocol):
    """What the hook engine provides to the tools (see :mod:`ctxnb.govern.engine`)."""

    def before(self, call: ToolCall) -> None: ...

    def after(self, call: ToolCall, result: Any) -> list[dict[str, Any]]: ...

    def refused(self, call: ToolCall, error: PolicyError) -> None:
        """A refusal the runner itself made (``BUDGET_EXCEEDED``), for the breaker."""
        ...


class ToolRunner:
    """Runs tool calls: arguments, hooks, audit line, session record (see the module).

    Subclasses set the attributes below in ``__init__`` and define the tools as methods
    that pass their work to :meth:`run_call`.
    """

    session: Session
    caller: str
    hooks: ToolHooks | None
    audit_log: AuditLog
    clock: Callable[[], datetime]
    _extra_tools: dict[str, tuple[ToolInfo, Callable[..., Any]]]
    #: How the session shows this runner's calls to the model (see :data:`CallView`);
    #: None shows them as ctxnb names them. A live run's agent sets it to its own tool.
    call_view: CallView | None = None
    #: The ``[budget]`` limits of every session these tools serve (None: no limits).
    budget_limits: BudgetConfig | None = None
    _budget: SessionBudget | None = None

    def object_id(self, rel: str) -> str:
        """The object id of a workspace file (the session's ``file_refs``)."""
        raise NotImplementedError

    def path_as_given(self, given: str, rel: str) -> str:
        """A result's ``path`` in the form the caller named the file (``given``): the
        agent's path when it came through a mount; here, ``rel`` unchanged."""
        return rel

    def run_call(
        self,
        tool: str,
        args: dict[str, Any],
        fn: Callable[[ToolCall], Any],
        *,
        targets: Sequence[str] = (),
    ) -> Any:
        """Run one call of ``tool``: ``fn(call)`` does the work, inside the hooks.

        Args:
            tool: the tool's name.
            args: its arguments, as the audit and the session record them.
            fn: the work, given the :class:`ToolCall` (``call.resolved`` holds the
                paths the path policy resolved already).
            targets: more paths the call writes (a rename's destination): governed too.
        """
        info = TOOL_INFO.get(tool) or (self._extra_tools.get(tool, (None, None))[0])
        call = ToolCall(tool, dict(args), self.caller, self.session.session_id, info=info)
        if targets:  # more paths the call writes (a rename's destination): governed too
            call.context["targets"] = list(targets)
        error: BaseException | None = None
        result: Any = None
        try:
            budget = self._session_budget()
            if budget is not None and call.mutating:
                # Before the policies: a write past the budget asks no human and locks nothing.
                budget.check_write(tool)
            if self.hooks is not None:
                self.hooks.before(call)
            result = fn(call)
            if self.hooks is not None:
                feedback = self.hooks.after(call, result)
                if feedback and isinstance(result, PatchResult):
                    result.feedback = feedback
                elif feedback and isinstance(result, dict):
                    result["feedback"] = feedback
                elif call.context.get("post_errors"):
                    # Nothing to carry the error back with: the call reports it as its
                    # failure (such a call changed no file).
                    first = call.context["post_errors"][0]
                    raise PolicyError(first["error_code"], first["message"])
            return result
        except BaseException as e:
            error = e
            if (
                self.hooks is not None
                and isinstance(e, PolicyError)
                and e.error_code == BUDGET_EXCEEDED
            ):
                # The runner's own refusal, before the policies or inside a read: the
                # engine counts it toward the breaker as it counts the policies' refusals.
                self.hooks.refused(call, e)
            raise
        finally:
            try:
                self._record(call, result, error)
            finally:
                call.wait_durable()

    def _record(self, call: ToolCall, result: Any, error: BaseException | None) -> None:
        duration = (time.perf_counter() - call.started) * 1000
        code = _error_code(error) if error else None
        if isinstance(result, PatchResult) and not result.success:
            code = code or ("PATCH_CONFLICT" if result.conflict else "WRITE_FAILED")
        success = error is None and not (isinstance(result, PatchResult) and not result.success)
        if success and call.context.get("post_errors"):
            # It ran (and wrote), then a post policy failed: the agent was told both.
            code = call.context["post_errors"][0]["error_code"]
        # A patch's arguments quote lines of its file: redacted as that file is (see _patch).
        args = call.context.get("scrub", redact_data)(call.args)
        read_bytes = read_tokens = None
        if isinstance(result, ReadResult) and error is None:
            # What reached the model, as the per-session stats and budgets count it.
            text = result.content or ""
            read_bytes = len(text.encode("utf-8"))
            read_tokens = call.context.get("read_tokens")
            if read_tokens is None:
                read_tokens = self.session.token_counter.count(text) if text else 0
        self._audit(
            call.tool,
            args,
            duration_ms=duration,
            success=success,
            error_code=code,
            before=call.before_sha256,
            after=call.after_sha256,
            intent_id=call.context.get("intent_id"),
            network=call.context.get("network"),
            mutating=call.mutating,
            read_bytes=read_bytes,
            read_tokens=read_tokens,
        )
        file_refs = [self.object_id(p) for p in call.paths]
        content = _toolcall_content(result, error)
        # A whole-file read shows the file object itself; a partial read (a line range, an
        # excerpt, a capped read) shows only what was read, as this call's output.
        reads = ("read_file", "read_lines", "get_excerpt")
        view = self.call_view
        shown = view(call.tool, dict(args)) if view is not None else None
        self.session.record_toolcall(
            call.tool,
            audit_args(args),
            content,
            status="ok" if success else "fail",
            file_refs=[f for f in file_refs if self.session.in_index(f)],
            activate=call.tool not in reads or _partial(result),
            # No view: shown as ctxnb names it; a view's None: the model never sees it.
            shown_as=shown,
            hidden=view is not None and shown is None,
        )

    def audit(self) -> Any:
        """The audit log as a DataFrame (a cut last line is skipped; see ``attrs``)."""
        return self.audit_log.frame()

    def _session_budget(self) -> SessionBudget | None:
        """The budget of the current session, or None when ``[budget]`` sets no limit."""
        limits = self.budget_limits
        if limits is None or not limits.any():
            return None
        budget = self._budget
        if budget is None or budget.session_id != self.session.session_id:
            from .budget import SessionBudget

            budget = self._budget = SessionBudget(
                limits, self.audit_log.path, self.session.session_id
            )
        return budget

    def budget_remaining(self) -> dict[str, int] | None:
        """What is left of the session's ``[budget]`` (None when no limit is set).

        ``dispatch`` adds the same as ``budget_remaining`` to every answer.
        """
        budget = self._session_budget()
        return budget.remaining() if budget is not None else None

    def check_read_budget(self, call: ToolCall, path: str, shown: str) -> None:
        """Refuse a read whose content would cross the session's budget; called by a
        read tool after shaping what it returns and before anything else sees it.

        Raises:
            PolicyError: ``BUDGET_EXCEEDED``.
        """
        budget = self._session_budget()
        if budget is None:
            return
        tokens = self.session.token_counter.count(shown) if shown else 0
        call.context["read_tokens"] = tokens  # counted once: the audit line reuses it
        budget.check_read(call.tool, path, len(shown.encode("utf-8")), tokens)

    def register_tool(
        self, info: ToolInfo, fn: Callable[..., Any], *, governed: bool = False
    ) -> None:
        """Add a tool to :meth:`dispatch` and :meth:`tool_schemas` (e.g. governance tools).

        With ``governed=True`` each call of ``fn`` runs inside the hooks like a file tool's
        (policies before, trace after, audit line and tool call either way); otherwise
        ``fn`` is expected to do that itself.
        """
        if governed:
            inner = fn

            def fn(**kwargs: Any) -> Any:
                return self.run_call(info.name, kwargs, lambda call: inner(**kwargs))

        self._extra_tools[info.name] = (info, fn)

    def tool_info(self, name: str) -> ToolInfo | None:
        """What tool ``name`` is (mutating, external …), or None for an unknown name."""
        extra = self._extra_tools.get(name)
        return TOOL_INFO.get(name) or (extra[0] if extra else None)

    def tool_names(self) -> list[str]:
        return [*TOOL_INFO, *self._extra_tools]

    def tool_schemas(
        self, format: Literal["openai", "anthropic", "mcp"] = "openai"
    ) -> list[dict[str, Any]]:
        """JSON tool definitions of every tool, for ``openai``, ``anthropic`` or ``mcp``."""
        tools = {**TOOL_INFO, **{k: v[0] for k, v in self._extra_tools.items()}}
        return tool_schemas(format, tools=tools)

    def answer_in_agent_terms(self, name: str, answer: dict[str, Any]) -> dict[str, Any]:
        """What :meth:`dispatch` returns for tool ``name``, in the paths the agent sees
        (a runner behind mounts rewrites the host directory); here, ``answer``."""
        return answer

    def dispatch(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Validate and run one tool call; return its result or a structured error.

        Returns:
            ``{"ok": True, "result": …}``, or ``{"ok": False, "error_code", "message",
            "recoverable", "required_action"}`` (never a traceback). When ``[budget]``
            sets a limit, every answer also has ``budget_remaining``: what is left of
            each limit after the call.
        """
        out = self.answer_in_agent_terms(name, self._dispatch(name, args))
        remaining = self.budget_remaining()
        if remaining is not None:
            out["budget_remaining"] = remaining
        return out

    def _dispatch(self, name: str, args: dict[str, Any] | None) -> dict[str, Any]:
        args = dict(args or {})
        extra = self._extra_tools.get(name)
        info = TOOL_INFO.get(name) or (extra[0] if extra else None)
        if info is None:
            return self._refuse_early(
                name,
                args,
                _error(
                    "UNKNOWN_TOOL",
                    f"no tool named {name!r}",
                    required_action=f"Use one of: {', '.join(self.tool_names())}.",
                ),
            )
        where = _not_unicode(args)
        if where is not None:
            # A lone surrogate ("\udcff", which JSON can spell) is no text: no file name,
            # content or log line can hold it. Refused here, and audited escaped.
            return self._refuse_early(
                name,
                args,
                _error(
                    "INVALID_ARGUMENTS",
                    f"{name}: {where or '(arguments)'}: holds a lone surrogate, which is not "
                    "valid Unicode text",
                    required_action="Send the arguments as valid Unicode (UTF-8) text.",
                ),
            )
        try:
            parsed = info.args.model_validate(args)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in e.errors()
            )
            return self._refuse_early(
                name,
                args,
                _error(
                    "INVALID_ARGUMENTS",
                    f"{name}: {problems}",
                    required_action="Fix the arguments to match the tool's JSON schema.",
                ),
            )
        except CtxnbError as e:  # the schema itself failed (an outside server's tool)
            return self._refuse_early(name, args, _error(type(e).__name__.upper(), str(e)))
        kwargs = (
            parsed.model_dump()
            if name != "write_patch"
            else {
                "doc_path": parsed.doc_path,  # type: ignore[attr-defined]
                "original_sha256": parsed.original_sha256,  # type: ignore[attr-defined]
                "edits": parsed.edits,  # type: ignore[attr-defined]
            }
        )
        fn = extra[1] if extra else getattr(self, name)
        try:
            result = fn(**kwargs)
        except PatchConflict as e:
            return _error("PATCH_CONFLICT", str(e), details={"failed_hunks": e.failed_hunks})
        except PatchError as e:
            action = (
                "Merge overlapping edits or give each its own line range; line numbers refer "
                "to the file as you read it."
                if name == "write_patch"
                else "Send a well-formed unified diff (hunks with @@ -a,b +c,d @@ headers)."
            )
            return _error("INVALID_PATCH", str(e), required_action=action)
        except PolicyError as e:
            return {"ok": False, **e.to_dict()}
        except NotFoundError as e:
            return _error(
                "NOT_FOUND", str(e), required_action="Check the path with list_files or glob."
            )
        except CtxnbError as e:
            return _error(type(e).__name__.upper(), str(e))
        except Exception as e:  # never a traceback to the agent
            return _error(
                "INTERNAL_ERROR", f"{type(e).__name__}: {e}", recoverable=False,
                required_action="Report this to the ctxnb maintainers of this workspace.",
            )  # fmt: skip
        out = _jsonable(result)
        if isinstance(out, dict) and isinstance(out.get("path"), str):
            # Answer in the caller's terms: /workspace/src/a.py in, /workspace/src/a.py out.
            given = args.get("path", args.get("doc_path"))
            if isinstance(given, str):
                out["path"] = self.path_as_given(given, out["path"])
        if isinstance(result, SearchHits):
            return {"ok": True, "result": out, "truncated": result.truncated,
                    "cursor": result.cursor}  # fmt: skip
        if isinstance(result, PatchResult) and not result.success:
            return _error(
                "PATCH_CONFLICT" if result.conflict else "WRITE_FAILED",
                result.message,
                required_action="Read the file again and recompute the patch.",
                details={"failed_hunks": result.failed_hunks},
            )
        return {"ok": True, "result": out}

    def _refuse_early(self, name: str, args: dict[str, Any], err: dict[str, Any]) -> dict[str, Any]:
        """Audit a call refused before it could run (unknown tool, bad arguments)."""
        # Escaped: the arguments of a refused call may be anything, lone surrogates too.
        self._audit(
            _escaped(name),
            _escaped(args),
            duration_ms=0.0,
            success=False,
            error_code=err["error_code"],
        )
        return err

    def _audit(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        duration_ms: float,
        success: bool,
        error_code: str | None,
        before: str | None = None,
        after: str | None = None,
        intent_id: str | None = None,
        network: list[dict[str, Any]] | None = None,
        mutating: bool = False,
        read_bytes: int | None = None,
        read_tokens: int | None = None,
    ) -> None:
        """The one audit line of a call (see :mod:`ctxnb.tools.audit` for the fields)."""
        self.audit_log.append(
            audit_record(
                ts=self.clock(),
                caller=self.caller,
                session_id=self.session.session_id,
                tool=tool,
                args=args,
                duration_ms=duration_ms,
                success=success,
                error_code=error_code,
                before=before,
                after=after,
                intent_id=intent_id,
                network=network,
                mutating=mutating,
                read_bytes=read_bytes,
                read_tokens=read_tokens,
            )
        )


def _error(
    code: str,
    message: str,
    *,
    recoverable: bool = True,
    required_action: str = "",
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    # Messages and details quote the file (a conflict's expected and found lines).
    out: dict[str, Any] = {
        "ok": False,
        "error_code": code,
        "message": redact_text(message),
        "recoverable": recoverable,
        "required_action": required_action,
    }
    if details:
        out["details"] = redact_data(details)
    return out


def _error_code(e: BaseException) -> str:
    if not isinstance(e, CtxnbError):
        return "INTERNAL_ERROR"  # what dispatch tells the agent of it
    if isinstance(e, PolicyError):
        return e.error_code
    if isinstance(e, PatchConflict):
        return "PATCH_CONFLICT"
    if isinstance(e, PatchError):
        return "INVALID_PATCH"
    if isinstance(e, NotFoundError):
        return "NOT_FOUND"
    return type(e).__name__.upper()


def _jsonable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="json")
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, tuple) and hasattr(v, "_asdict"):
        return dict(v._asdict())
    to_dict = getattr(v, "to_dict", None)
    if callable(to_dict):  # a result that says how an agent sees it (a merge proposal)
        return to_dict()
    return v


def _partial(result: Any) -> bool:
    """A read that showed less than the whole file."""
    if not isinstance(result, ReadResult) or result.binary or result.content is None:
        return False
    return (
        result.truncated
        or (result.start_line or 1) > 1
        or (result.end_line or 0) < (result.total_lines or 0)
    )


def command_text(result: dict[str, Any]) -> str:
    """A command's result as a model reads a terminal: its output as plain text, then
    what is not visible in it (exit status, a timeout, what ctxnb committed, and what
    it dropped and why)."""
    text = str(result.get("stdout") or "") + str(result.get("stderr") or "")
    notes = []
    if result.get("timed_out"):
        notes.append("[timed out]")
    elif result.get("returncode") not in (0, None):
        notes.append(f"[exit status {result.get('returncode')}]")
    effects = result.get("effects") or {}
    changed = [str(e.get("path")) for e in effects.get("changed") or () if isinstance(e, dict)]
    if changed:
        notes.append(f"[changed: {', '.join(changed)}]")
    dropped = [
        f"{e.get('path')} ({e.get('reason')})"
        for e in effects.get("dropped") or ()
        if isinstance(e, dict)
    ]
    if dropped:
        notes.append(f"[not committed: {'; '.join(dropped)}]")
    if notes:
        text = (text if not text or text.endswith("\n") else text + "\n") + "\n".join(notes)
    return text


def _toolcall_content(result: Any, error: BaseException | None) -> str:
    if error is not None:
        code = _error_code(error)
        return f"error {code}: {error}"
    if isinstance(result, ReadResult):
        head = (
            f"read {result.path} lines {result.start_line}-{result.end_line} of "
            f"{result.total_lines} (sha256 {result.sha256[:12]}, {result.version_id})"
        )
        # A whole file is shown by its file object; a partial read shows what was read.
        return f"{head}\n{result.content}" if _partial(result) else head
    if isinstance(result, PatchResult):
        return result.message if not result.diff else f"{result.message}\n{result.diff}"
    if isinstance(result, DiffResult):
        return result.diff
    if isinstance(result, dict) and "returncode" in result and "stdout" in result:
        return command_text(result)
    if isinstance(result, list):
        lines = []
        for item in result[:200]:
            if isinstance(item, dict) and "line_number" in item:
                lines.append(f"{item['path']}:{item['line_number']}: {item['line']}")
            elif isinstance(item, BaseModel):
                lines.append(str(item.model_dump(mode="json")))
            else:
                lines.append(str(item))
        more = f"\n… {len(result) - 200} more" if len(result) > 200 else ""
        if isinstance(result, SearchHits) and result.truncated:
            more += f"\n[truncated: more hits; search again with cursor={result.cursor!r}]"
        return "\n".join(lines) + more
    return str(result)


def _not_unicode(value: Any, where: str = "") -> str | None:
    """Where in JSON-like ``value`` a string holds a lone surrogate (``""``: the value
    itself), or None when every string is valid Unicode."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _not_unicode(key, where) if isinstance(key, str) else None
        if found is None:
            found = _not_unicode(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _escaped(value: Any) -> Any:
    """``value`` with each lone surrogate written as its escape (for the audit line)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value
