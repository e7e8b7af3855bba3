"""Governance: intents, command risk, mutation classes, the trace ledger.

The command-risk verdict itself is read in :mod:`ctxnb.shell.risk`, below every wing
(the rules tracker and replays read commands too); governance decides what to do with it.

Commands run confined by :mod:`ctxnb.sandbox` (``ctxnb.sandbox.run_command`` is the
process runner; :mod:`ctxnb.sandbox.commit` commits what a command changed, and
:mod:`ctxnb.govern.record` records it).

Importing this package is cheap (a hook process imports it on every tool call): each
name below is loaded from its module on first use.

Example:
    >>> from ctxnb.govern import classify_command
    >>> classify_command("git status").level
    'SAFE'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

if TYPE_CHECKING:
    from ..shell.risk import RiskAssessment, classify_command
    from .intents import Intent, IntentFile, init_governance, intent_context, load_intents
    from .ledger import TraceLedger, build_trace_record, validate_record
    from .mutation import classify_mutation, touched_symbols
    from .record import FileChange, Origin, PendingRecord, Recorded, Recorder

_EXPORTS = {
    "FileChange": "record",
    "Intent": "intents",
    "IntentFile": "intents",
    "Origin": "record",
    "PendingRecord": "record",
    "Recorded": "record",
    "Recorder": "record",
    "RiskAssessment": "ctxnb.shell.risk",
    "TraceLedger": "ledger",
    "build_trace_record": "ledger",
    "classify_command": "ctxnb.shell.risk",
    "classify_mutation": "mutation",
    "init_governance": "intents",
    "intent_context": "intents",
    "load_intents": "intents",
    "touched_symbols": "mutation",
    "validate_record": "ledger",
}

__all__ = [
    "FileChange",
    "Intent",
    "IntentFile",
    "Origin",
    "PendingRecord",
    "Recorded",
    "Recorder",
    "RiskAssessment",
    "TraceLedger",
    "build_trace_record",
    "classify_command",
    "classify_mutation",
    "init_governance",
    "intent_context",
    "load_intents",
    "touched_symbols",
    "validate_record",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
