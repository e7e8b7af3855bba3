"""The exceptions ctxnb raises.

Every error ctxnb raises on purpose derives from one root, so callers can catch
``CtxnbError`` and know the message says what went wrong and how to fix it::

    CtxnbError
    ├── ConfigError          a bad ctxnb.toml / [tool.ctxnb] key or value
    ├── StoreError           the object store cannot do what was asked
    │   ├── CorruptStoreError    a file in .ctxnb/ is damaged or foreign
    │   └── TamperedTraceError   the trace ledger was changed outside ctxnb
    ├── NotFoundError        no object, version or file by that name
    ├── ResolverError        a path cannot be resolved or is malformed
    ├── PolicyError          a governed tool call was refused (structured)
    │   ├── StaleFileError       the caller's hash is not the file's hash now
    │   └── SandboxError         a command cannot be confined (no bwrap, a bad scope)
    ├── PatchError           a patch is malformed
    │   └── PatchConflict        a patch no longer applies to the file
    ├── MissingDependencyError   an optional extra is not installed
    ├── RegistryError        an outside MCP server could not be reached or failed a call
    ├── SelectionError       a context strategy returned an inconsistent Selection
    ├── CycleError           a new edge would close a cycle in a relation graph
    └── TaskError            a benchmark task cannot be loaded, set up or mined
        ├── TaskFormatError      an instance file lacks a key or holds a bad value
        └── TaskRepoError        the checkout lacks a commit, or a task's patch does not apply

``PolicyError`` carries the machine-readable refusal that agents receive:
``{error_code, message, recoverable, required_action}``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "CorruptStoreError",
    "CtxnbError",
    "CycleError",
    "MissingDependencyError",
    "NotFoundError",
    "PatchConflict",
    "PatchError",
    "PolicyError",
    "RegistryError",
    "ResolverError",
    "SandboxError",
    "SelectionError",
    "StaleFileError",
    "StoreError",
    "TamperedTraceError",
    "TaskError",
    "TaskFormatError",
    "TaskRepoError",
]


class CtxnbError(Exception):
    """Root of every error ctxnb raises on purpose."""


class ConfigError(CtxnbError):
    """A configuration file or option has an unknown key or a bad value."""


class StoreError(CtxnbError):
    """The object store cannot carry out an operation."""


class CorruptStoreError(StoreError):
    """A file in the store directory is damaged, truncated or not ctxnb's.

    Attributes:
        path: the offending file.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class TamperedTraceError(StoreError):
    """The Agent Trace ledger was changed outside ctxnb: a line breaks the hash chain,
    differs from its copy in the store's log, or a record the log holds is missing.

    Attributes:
        path: the ledger.
        lines: the line numbers found tampered.
    """

    def __init__(self, message: str, *, path: str, lines: list[int] | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.lines = lines or []


class NotFoundError(CtxnbError, KeyError):
    """No object, version or file matches what was asked for."""

    def __str__(self) -> str:  # KeyError quotes its message; we do not want that
        return str(self.args[0]) if self.args else ""


class SelectionError(CtxnbError, ValueError):
    """A context strategy's :class:`~ctxnb.strategies.Selection` contradicts itself or its input.

    Attributes:
        strategy: the strategy's name, when known.
    """

    def __init__(self, message: str, *, strategy: str | None = None) -> None:
        super().__init__(message)
        self.strategy = strategy


class ResolverError(CtxnbError, ValueError):
    """A path cannot be resolved (malformed, NUL byte, not absolute where required)."""


class PolicyError(CtxnbError):
    """A tool call was refused by a policy.

    The structured form (``to_dict()``) is what agents receive instead of a traceback.

    Attributes:
        error_code: a stable upper-case code such as ``PATH_DENIED`` or ``STALE_FILE``.
        recoverable: whether the agent can fix the call and retry.
        required_action: what the agent (or a human) must do next.
    """

    def __init__(
        self,
        error_code: str,
        message: str,
        *,
        recoverable: bool = True,
        required_action: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.recoverable = recoverable
        self.required_action = required_action
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """The refusal as the machine-readable object agents receive, redacted."""
        out: dict[str, Any] = {
            "error_code": self.error_code,
            "message": self.message,
            "recoverable": self.recoverable,
            "required_action": self.required_action,
        }
        if self.details:
            out["details"] = self.details
        # Messages name files and quote what was refused (a file's name can hold a
        # secret): what an agent receives is redacted, whichever caller hands it on.
        from .redaction.redactor import redact_data  # errors stays importable with nothing else

        redacted: dict[str, Any] = redact_data(out)
        return redacted


class StaleFileError(PolicyError):
    """The hash the caller computed its edit from is not the file's current hash."""

    def __init__(self, message: str, *, expected: str | None = None, actual: str | None = None):
        super().__init__(
            "STALE_FILE",
            message,
            recoverable=True,
            required_action="Read the file again and recompute the edit from its current content, "
            "or merge it with the change made since: propose_merge(path, content).",
            details={"expected_sha256": expected, "actual_sha256": actual},
        )
        # The bytes another program saved while a governed write was in progress (see
        # ctxnb.access.fdio), so that the caller keeps them as a version.
        self.outside: bytes | None = None


class PatchError(CtxnbError, ValueError):
    """A patch or edit list is malformed (bad hunk header, overlapping ranges, ...)."""


class PatchConflict(PatchError):
    """A patch no longer applies: its context does not match the file.

    Attributes:
        failed_hunks: the hunks that failed, each a dict with its header and reason.
    """

    def __init__(self, message: str, *, failed_hunks: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.failed_hunks = failed_hunks or []


class MissingDependencyError(CtxnbError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    @classmethod
    def for_extra(cls, module: str, extra: str) -> MissingDependencyError:
        return cls(
            f"{module!r} is not installed; it is needed for this feature. "
            f"Install it with: pip install 'ctxnb[{extra}]'"
        )


class RegistryError(CtxnbError):
    """An outside MCP server could not be reached, or a call through it failed."""


class SandboxError(PolicyError):
    """A command cannot be run confined: bubblewrap is missing or the scope cannot be bound.

    Its ``error_code`` is ``SANDBOX_UNAVAILABLE``; the message names the fix.
    """

    def __init__(self, message: str, *, required_action: str = "") -> None:
        super().__init__(
            "SANDBOX_UNAVAILABLE",
            message,
            recoverable=False,
            required_action=required_action
            or "A human must fix the sandbox set-up as the message says; commands cannot run "
            "until then.",
        )


class CycleError(CtxnbError, ValueError):
    """Adding an edge would close a cycle in a graph that must stay acyclic.

    Attributes:
        cycle: the node ids along the cycle, first and last equal
            (``["a", "b", "c", "a"]`` for ``a → b → c → a``).
    """

    def __init__(self, message: str, *, cycle: list[str] | None = None) -> None:
        super().__init__(message)
        self.cycle = cycle or []


class TaskError(CtxnbError):
    """A benchmark task (a SWE-bench-format instance, a mined commit) cannot be used."""


class TaskFormatError(TaskError, ValueError):
    """An instance file is not what SWE-bench's format says: a key is missing, a value has
    the wrong type, or a line is not JSON. The message names the file, the instance and the
    key."""


class TaskRepoError(TaskError):
    """The repository cannot give what a task needs: its base commit is not in the checkout,
    or its test patch does not apply there. The message names the commit or the patch and
    what to run."""
