"""Does a replay measure what the model really read? The fidelity check.

A replay's token figures are only worth comparing if, with nothing dropped, the
context ctxnb assembles is as large as the prompt the agent actually sent. Runs that
record the provider's ``prompt_tokens`` per step (mini-swe-agent does) let us check:
replay them under :class:`~ctxnb.strategies.builtin.KeepAll` and compare, step by step.

mini-swe-agent's prompt is its whole message history: the system prompt, the task,
then each response and each observation. The fidelity replay uses ``files="pool"``:
tool outputs carry the observations and the chat carries the responses, while file
objects are listed in the metadata pool but not shown again in full (the agent never
saw them twice). What still differs is small and steady: the instructions around the
task in the first user message (not kept by the converter), ctxnb's item delimiters and
metadata lines, and the tokenizer (a calibrated heuristic, not Gemini's own).

A run whose context is compacted (Claude Code's ``compact_boundary``) is replayed in
segments: the context restarts from the summary, as the agent's did. Each segment's
median ratio is compared with the whole check's; a segment off by more than
``drift_tolerance`` (25% by default) is listed in ``FidelityReport.drifting`` and
raises a :class:`FidelityWarning`, so a replay that has lost track of what the agent
saw (a missed compaction, a prompt the run does not record) cannot pass unnoticed.

The report gives the Pearson correlation of the two series, the median of
``ctxnb / recorded`` as measured (raw), and the same after calibrating: a least-squares
fit ``recorded ≈ scale × ctxnb + intercept`` on the data (the intercept absorbs the
missing instructions), and a scale-only fit through the origin.

Example:
    >>> from ctxnb.replay.fidelity import check_fidelity
    >>> report = check_fidelity(["data/trajectories/django__django-13670.traj.json"])
    >>> report.pearson > 0.95
    True
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..llm.tokens import TokenCounter
from ..strategies.builtin import KeepAll
from .model import Trajectory
from .runner import HiddenPrompt

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FidelityReport", "FidelityWarning", "check_fidelity", "fidelity_from_frame"]


class FidelityWarning(UserWarning):
    """A segment of a replayed run does not track its recorded prompt sizes."""


@dataclass(frozen=True)
class FidelityReport:
    """How closely replayed context sizes track the recorded prompt sizes.

    Attributes:
        trajectories: runs with recorded prompt tokens.
        steps: steps compared.
        pearson: correlation of ctxnb's total tokens and the recorded prompt tokens,
            over every step of every run (calibration does not change it).
        pearson_per_run_median: the median of the per-run correlations.
        median_ratio_raw: median of ``ctxnb / recorded`` before calibration.
        scale: slope of the fit ``recorded ≈ scale × ctxnb + intercept``.
        intercept: its constant, in tokens.
        median_ratio_calibrated: median of ``(scale × ctxnb + intercept) / recorded``.
        median_abs_error_calibrated: median of ``|calibrated / recorded - 1|``.
        scale_only: slope of the fit through the origin, ``recorded ≈ scale_only × ctxnb``.
        median_ratio_scale_only: median of ``scale_only × ctxnb / recorded``.
        points: one row per step: ``trajectory``, ``segment``, ``step``,
            ``ctxnb_tokens``, ``prompt_tokens``.
        segments: one row per (``trajectory``, ``segment``): ``steps`` and
            ``median_ratio`` (ctxnb / recorded).
        drifting: ``(trajectory, segment, median_ratio)`` of the segments whose median
            ratio is off the overall median by more than the tolerance.
    """

    trajectories: int
    steps: int
    pearson: float
    pearson_per_run_median: float
    median_ratio_raw: float
    scale: float
    intercept: float
    median_ratio_calibrated: float
    median_abs_error_calibrated: float
    scale_only: float
    median_ratio_scale_only: float
    points: Any = field(repr=False, compare=False)
    segments: Any = field(default=None, repr=False, compare=False)
    drifting: tuple[tuple[str, int, float], ...] = ()

    def as_dict(self) -> dict[str, float | int]:
        """The figures, without the points, segments and drifting segments."""
        return {k: v for k, v in vars(self).items() if k not in ("points", "segments", "drifting")}

    def __str__(self) -> str:
        return (
            f"fidelity over {self.trajectories} runs, {self.steps} steps: "
            f"pearson {self.pearson:.4f} (per-run median {self.pearson_per_run_median:.4f}); "
            f"median ctxnb/recorded {self.median_ratio_raw:.3f} raw, "
            f"{self.median_ratio_calibrated:.3f} calibrated "
            f"(recorded ≈ {self.scale:.3f} × ctxnb + {self.intercept:.0f}; "
            f"median abs error {100 * self.median_abs_error_calibrated:.1f}%), "
            f"{self.median_ratio_scale_only:.3f} with scale only ({self.scale_only:.3f})"
            + (
                f"; {len(self.drifting)} segment(s) DRIFT: {_drift_text(self)}"
                if self.drifting
                else ""
            )
        )


def _drift_text(report: FidelityReport) -> str:
    return ", ".join(f"{t} segment {s} at {r:.2f}" for t, s, r in report.drifting[:5]) + (
        ", ..." if len(report.drifting) > 5 else ""
    )


def fidelity_from_frame(
    df: pd.DataFrame, *, strategy: str = "keep-all", drift_tolerance: float = 0.25
) -> FidelityReport:
    """The fidelity figures of a replay frame's rows for one strategy.

    Args:
        df: a frame from :func:`~ctxnb.replay.runner.replay` or
            :func:`~ctxnb.replay.experiment.run_experiment`.
        strategy: the strategy label whose rows to compare (keep-all: nothing dropped).
        drift_tolerance: how far (relative) a segment's median ratio may be from the
            overall median before it is reported as drifting.

    Raises:
        ValueError: fewer than three steps with recorded prompt tokens.

    Warns:
        FidelityWarning: a segment drifts (see :attr:`FidelityReport.drifting`).

    Example:
        >>> report = fidelity_from_frame(df)  # doctest: +SKIP
        >>> round(report.pearson, 3)  # doctest: +SKIP
        0.997
    """
    import numpy as np

    rows = df[(df["strategy"] == strategy) & df["prompt_tokens"].notna()]
    rows = rows[rows["prompt_tokens"] > 0]
    if len(rows) < 3:
        raise ValueError(
            f"fidelity needs at least 3 steps with recorded prompt_tokens under {strategy!r}; "
            f"found {len(rows)}. Replay runs that record usage (mini-swe-agent does) "
            "under KeepAll."
        )
    if "segment" not in rows.columns:  # a frame written before segments existed
        rows = rows.assign(segment=0)
    points = rows[["trajectory", "segment", "step", "total_tokens", "prompt_tokens"]].rename(
        columns={"total_tokens": "ctxnb_tokens"}
    )
    points = points.reset_index(drop=True)
    x = points["ctxnb_tokens"].to_numpy(dtype=float)
    y = points["prompt_tokens"].to_numpy(dtype=float)
    pearson = float(np.corrcoef(x, y)[0, 1])
    per_run = [
        float(np.corrcoef(g["ctxnb_tokens"], g["prompt_tokens"].astype(float))[0, 1])
        for _, g in points.groupby("trajectory", sort=True)
        if len(g) >= 3 and g["ctxnb_tokens"].nunique() > 1 and g["prompt_tokens"].nunique() > 1
    ]
    scale, intercept = (float(v) for v in np.polyfit(x, y, 1))
    calibrated = scale * x + intercept
    scale_only = float((x @ y) / (x @ x))
    overall = float(np.median(x / y))
    seg = (
        points.assign(ratio=x / y)
        .groupby(["trajectory", "segment"], sort=True)["ratio"]
        .agg(steps="size", median_ratio="median")
        .reset_index()
    )
    drifting = tuple(
        (str(r.trajectory), int(r.segment), float(r.median_ratio))
        for r in seg.itertuples()
        if abs(r.median_ratio / overall - 1) > drift_tolerance
    )
    report = FidelityReport(
        trajectories=int(points["trajectory"].nunique()),
        steps=len(points),
        pearson=pearson,
        pearson_per_run_median=float(np.median(per_run)) if per_run else float("nan"),
        median_ratio_raw=overall,
        scale=scale,
        intercept=intercept,
        median_ratio_calibrated=float(np.median(calibrated / y)),
        median_abs_error_calibrated=float(np.median(np.abs(calibrated / y - 1))),
        scale_only=scale_only,
        median_ratio_scale_only=float(np.median(scale_only * x / y)),
        points=points,
        segments=seg,
        drifting=drifting,
    )
    if drifting:
        warnings.warn(
            f"replayed context sizes drift from the recorded ones in {len(drifting)} "
            f"segment(s) (overall median ctxnb/recorded {overall:.2f}): "
            f"{_drift_text(report)}. A compaction the replay missed or a prompt the run "
            "does not record (try hidden_prompt_tokens='auto') are the usual causes.",
            FidelityWarning,
            stacklevel=2,
        )
    return report


def check_fidelity(
    trajectories: Iterable[str | os.PathLike[str] | Trajectory],
    *,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    executor: Executor | None = None,
    progress: bool | None = False,
    hidden_prompt_tokens: HiddenPrompt = None,
    drift_tolerance: float = 0.25,
) -> FidelityReport:
    """Replay runs under KeepAll and compare each step with its recorded prompt size.

    Args:
        trajectories: runs that record ``prompt_tokens`` (paths, directories or
            :class:`~ctxnb.replay.model.Trajectory` objects).
        token_counter: the counter to check; the default heuristic when None.
        executor: where to replay; in this process when None (pass a process pool to
            check many runs faster).
        progress: show a progress bar (None: in notebooks and terminals).
        hidden_prompt_tokens: the agent's unrecorded prompt size (a number, ``"auto"``
            or None; see :func:`~ctxnb.replay.runner.replay`).
        drift_tolerance: see :func:`fidelity_from_frame`.

    Warns:
        FidelityWarning: a segment of a run drifts from the others.

    Example:
        >>> print(check_fidelity(["data/trajectories"]))  # doctest: +SKIP
        fidelity over 3 runs, ...
    """
    from .experiment import run_experiment

    own = executor is None
    pool = executor or ThreadPoolExecutor(max_workers=1)
    try:
        df = run_experiment(
            trajectories,
            [KeepAll()],
            token_counter=token_counter,
            executor=pool,
            progress=progress,
            files="pool",
            hidden_prompt_tokens=hidden_prompt_tokens,
        )
    finally:
        if own:
            pool.shutdown()
    return fidelity_from_frame(df, drift_tolerance=drift_tolerance)
