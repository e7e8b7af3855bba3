"""Load any supported trajectory file into the neutral format, by its content.

:func:`load` sniffs the content (never the file name) and picks the converter:

=========================  ==========================================================
``ctxnb-trajectory``       JSONL whose first line is ``{"format": "ctxnb-trajectory"}``
``mini-swe-agent-1``       a JSON object with ``trajectory_format: mini-swe-agent-1``
                           (or ``messages`` plus ``info.mini_version``)
``swe-agent``              a JSON object with ``trajectory`` or ``history`` entries
``claude-code``            JSONL records with ``type`` and ``uuid``/``sessionId``
``atif``                   a JSON object with ``schema_version: ATIF-v1.x`` and
                           ``steps`` (Harbor's Agent Trajectory Interchange Format)
``codex``                  JSONL lines ``{"timestamp", "type", "payload"}`` with
                           ``type`` ``session_meta``, ``response_item`` … (a Codex CLI
                           rollout)
=========================  ==========================================================

A JSONL file whose last line was cut by a crash mid-append loads without that line and
counts it in ``metadata["skipped_lines"]``. In a Codex rollout a damaged line anywhere
else is an error naming the line: Codex writes whole lines, so damage there means the
file was edited or corrupted, and a replay of what is left would not be the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .._util.jsonl import SkippedLine, iter_jsonl
from .atif import from_atif, is_atif
from .claude_code import from_claude_code
from .codex import check_codex_lines, from_codex, is_codex_record
from .mini_swe_agent import from_mini_swe_agent
from .model import FORMAT_NAME, Trajectory, TrajectoryFormatError
from .swe_agent import from_swe_agent

__all__ = ["KNOWN_FORMATS", "load", "sniff_format"]

KNOWN_FORMATS: tuple[str, ...] = (
    "ctxnb-trajectory (JSONL)",
    "mini-swe-agent-1 (JSON)",
    "swe-agent .traj (JSON)",
    "claude-code transcript (JSONL)",
    "Harbor ATIF trajectory (JSON)",
    "Codex CLI rollout (JSONL)",
)
_CLAUDE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
    }
)


def _known() -> str:
    return ", ".join(KNOWN_FORMATS)


def _sniff_object(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if is_atif(data):
        return "atif"
    fmt = data.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return "mini-swe-agent-1"
    info = data.get("info")
    if isinstance(data.get("messages"), list) and isinstance(info, dict) and "mini_version" in info:
        return "mini-swe-agent-1"
    if isinstance(data.get("trajectory"), list) or (
        isinstance(data.get("history"), list)
        and all(isinstance(h, dict) and "role" in h for h in data["history"][:5])
    ):
        return "swe-agent"
    return None


def _sniff_record(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return None
    if rec.get("format") == FORMAT_NAME:
        return "ctxnb-trajectory"
    if is_codex_record(rec):
        return "codex"
    kind = rec.get("type")
    if (
        isinstance(kind, str)
        and kind in _CLAUDE_TYPES
        and ("uuid" in rec or "sessionId" in rec or "messageId" in rec)
    ):
        return "claude-code"
    return None


def sniff_format(path: str | Path) -> str:
    """Name the format of a trajectory file from its content.

    Returns:
        ``"ctxnb-trajectory"``, ``"mini-swe-agent-1"``, ``"swe-agent"``, ``"claude-code"``,
        ``"atif"`` or ``"codex"``.

    Raises:
        TrajectoryFormatError: the content is damaged or in none of the known formats.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.json"
        >>> _ = p.write_text('{"trajectory_format": "mini-swe-agent-1", "messages": []}')
        >>> sniff_format(p)
        'mini-swe-agent-1'
    """
    return _read(Path(path))[0]


def _read(path: Path) -> tuple[str, Any, int]:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrajectoryFormatError(f"{where}: no such file.", path=where) from None
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(
            f"{where}: not UTF-8 text (byte {exc.start}); ctxnb reads {_known()}.", path=where
        ) from None
    stripped = text.strip()
    if not stripped:
        raise TrajectoryFormatError(
            f"{where}: the file is empty; ctxnb reads {_known()}.", path=where
        )
    whole_error: json.JSONDecodeError | None = None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        whole_error = exc
    except RecursionError:
        raise TrajectoryFormatError(
            f"{where}: the JSON is nested too deeply to read; no trajectory format "
            f"nests like this (ctxnb reads {_known()}).",
            path=where,
        ) from None
    else:
        fmt = _sniff_object(data)
        if fmt:
            return fmt, data, 0
        if _sniff_record(data) is None:
            raise TrajectoryFormatError(
                f"{where}: valid JSON, but not a trajectory format ctxnb knows; "
                f"ctxnb reads {_known()}.",
                path=where,
            )
    # JSONL: one record per line.
    skipped: list[SkippedLine] = []
    numbered = list(iter_jsonl(text, skipped=skipped, objects=False))
    records = [rec for _, rec in numbered]
    bad = [s.lineno for s in skipped]
    fmt = next((f for f in (_sniff_record(r) for r in records[:20]) if f), None)
    if fmt is None or (records and len(bad) > len(records)):
        if whole_error is not None and stripped[0] in "{[":
            raise TrajectoryFormatError(
                f"{where}: not valid JSON ({whole_error.msg} at line {whole_error.lineno} "
                f"column {whole_error.colno}); the file looks truncated or corrupted. "
                f"ctxnb reads {_known()}.",
                path=where,
            )
        raise TrajectoryFormatError(
            f"{where}: not a trajectory format ctxnb knows; ctxnb reads {_known()}.", path=where
        )
    if fmt == "ctxnb-trajectory":
        return fmt, text, 0
    if fmt == "codex":
        check_codex_lines(where, skipped, [n for n, r in numbered if not isinstance(r, dict)])
        return fmt, [(n, r) for n, r in numbered if isinstance(r, dict)], len(bad)
    return fmt, [r for r in records if isinstance(r, dict)], len(bad)


def load(path: str | os.PathLike[str]) -> Trajectory:
    """Load a trajectory file in any supported format (sniffed from its content).

    A converter keeps going past a step it cannot interpret (the step is marked
    ``parsed=False`` with a note); a Claude Code transcript with a damaged line skips
    that line and counts it in ``metadata["skipped_lines"]``.

    Args:
        path: a mini-swe-agent ``.traj.json``, a SWE-agent ``.traj``, a Claude Code
            transcript ``.jsonl``, a Harbor ATIF ``trajectory.json``, a Codex
            ``rollout-*.jsonl`` or a ctxnb-trajectory ``.jsonl``.

    Raises:
        TrajectoryFormatError: the file is missing, damaged or in no known format; the
            message names the file and the formats ctxnb reads.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.json"
        >>> _ = p.write_text('{"trajectory_format": "mini-swe-agent-1", "messages": []}')
        >>> load(p).source_format
        'mini-swe-agent-1'
    """
    path = Path(path)
    fmt, data, bad = _read(path)
    where = str(path)
    if fmt == "ctxnb-trajectory":
        return Trajectory._from_lines(data, where)
    if fmt == "mini-swe-agent-1":
        return from_mini_swe_agent(data, source_path=where)
    if fmt == "swe-agent":
        return from_swe_agent(data, source_path=where)
    if fmt == "atif":
        return from_atif(data, source_path=where)
    if fmt == "codex":
        return from_codex(data, source_path=where, skipped_lines=bad)
    return from_claude_code(data, source_path=where, skipped_lines=bad)
