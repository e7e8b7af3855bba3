"""pandas frames and ready plots over ctxnb's traces, audit log, store and contexts.

The Agent Trace ledger (``.orchestration/agent_trace.jsonl``) nests records → files →
conversations → ranges. :func:`load_trace` flattens it to one row per range, the shape
pandas is good at::

    record_id  timestamp  vcs_type  revision  file  conversation_index
    contributor_type  model_id  intent_id  session_id  start_line  end_line  lines
    content_hash  tool  mutation_class

Reading is done by Arrow's multi-threaded JSON reader with an explicit schema, and the
flattening by Arrow list kernels, so a ledger of a million records loads in seconds
(``pandas.read_json(lines=True)`` takes many times longer and does not flatten).
:func:`trace_to_parquet` writes the flattened table to Parquet, which loads in well
under a second.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl"
    >>> ledger = TraceLedger(path)
    >>> ledger.append(build_trace_record(
    ...     file_path="app.py", ranges=[(1, 2)], new_text="a = 1\\nb = 2\\n",
    ...     intent_id="INT-1", session_id="s1", model_id="anthropic/claude-sonnet-4",
    ...     repo_root=None, tool="write_file"))
    >>> df = load_trace(path)
    >>> df[["file", "intent_id", "session_id", "lines", "tool"]].values.tolist()
    [['app.py', 'INT-1', 's1', 2, 'write_file']]
"""

from ..context import context_diff
from ._plots import (
    contexts_frame,
    plot_context_composition,
    plot_mutations_per_intent,
    plot_tokens_per_turn,
)
from ._trace import TRACE_COLUMNS, audit, load_trace, scan, trace_to_parquet

__all__ = [
    "TRACE_COLUMNS",
    "audit",
    "context_diff",
    "contexts_frame",
    "load_trace",
    "plot_context_composition",
    "plot_mutations_per_intent",
    "plot_tokens_per_turn",
    "scan",
    "trace_to_parquet",
]
