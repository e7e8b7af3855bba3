"""Replay recorded agent trajectories through ctxnb under context strategies.

This package holds the neutral trajectory format (:mod:`ctxnb.replay.model`) and the
converters from real agents' logs into it (mini-swe-agent, SWE-agent, Claude Code,
Harbor's ATIF, Codex CLI rollouts), and a writer of ATIF (:func:`write_atif`).

Example:
    >>> from ctxnb.replay import load
    >>> traj = load("data/trajectories/django__django-13670.traj.json")  # doctest: +SKIP
    >>> traj.stats()  # doctest: +SKIP
    {'steps': 22, 'reads': 5, ...}
"""

from __future__ import annotations

from .._util.lazy import lazy_exports
from .atif import atif_fidelity, from_atif, to_atif, write_atif
from .claude_code import from_claude_code
from .codex import codex_fidelity, from_codex
from .converters import KNOWN_FORMATS, load, sniff_format
from .mini_swe_agent import from_mini_swe_agent
from .model import (
    FORMAT_NAME,
    FORMAT_VERSION,
    Action,
    FileTouch,
    Step,
    Trajectory,
    TrajectoryFormatError,
    Usage,
)
from .swe_agent import from_swe_agent

# The replay machinery (sessions, pandas) loads on first use, so that reading a
# trajectory stays cheap.
_LAZY = {
    "DuplicateRunWarning": "experiment",
    "ExperimentError": "experiment",
    "FidelityReport": "fidelity",
    "FidelityWarning": "fidelity",
    "bill_check": "billing",
    "check_fidelity": "fidelity",
    "compaction_changes": "runner",
    "compare_at": "analysis",
    "default_strategies": "runner",
    "parse_strategy": "experiment",
    "plot_cost_vs_loss": "analysis",
    "plot_dollars_per_step": "analysis",
    "plot_tokens_per_step": "analysis",
    "replay": "runner",
    "replay_contexts": "runner",
    "run_experiment": "experiment",
    "summarize": "analysis",
}


__all__ = sorted(
    [
        "FORMAT_NAME",
        "FORMAT_VERSION",
        "KNOWN_FORMATS",
        "Action",
        "FileTouch",
        "Step",
        "Trajectory",
        "TrajectoryFormatError",
        "Usage",
        "atif_fidelity",
        "codex_fidelity",
        "from_atif",
        "from_claude_code",
        "from_codex",
        "from_mini_swe_agent",
        "from_swe_agent",
        "load",
        "sniff_format",
        "to_atif",
        "write_atif",
        *_LAZY,
    ]
)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
