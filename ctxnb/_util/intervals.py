"""Bootstrap intervals over runs, and how a table shows them.

An experiment's figures are sums and ratios over runs (trajectories, or live runs of a
task), and runs differ far more from each other than steps within a run do: the
resampling unit is the run. Every strategy is resampled with the *same* runs in each
resample (one weight matrix for all), so a ratio to a baseline is paired: the task-to-
task spread cancels, and a strategy that gives the baseline's numbers on every run has
a ratio of exactly 1 with zero width.

The interval is the percentile bootstrap: seeded (the same numbers every time), with
the method, level, resamples, seed and number of runs recorded in a frame's
``attrs["intervals"]`` by :func:`interval_attrs`. With fewer than two runs there is
nothing to resample and the bounds are NaN.

Example:
    >>> import numpy as np
    >>> w = run_weights(3, resamples=4, seed=0)
    >>> w.shape, bool((w.sum(axis=1) == 3).all())
    ((4, 3), True)
    >>> format_interval(1.5, 1.25, 1.75, "{:.2f}")
    '1.50 [1.25–1.75]'
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "LEVEL",
    "RESAMPLES",
    "SEED",
    "format_interval",
    "interval_attrs",
    "percentile_interval",
    "run_weights",
]

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
METHOD = "percentile bootstrap over runs, paired across strategies"


def run_weights(n_runs: int, *, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """How many times each run is drawn in each resample: a ``(resamples, n_runs)``
    integer matrix (each row sums to ``n_runs``). A statistic over runs is then
    ``weights @ per_run_values`` for every resample at once."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_runs, size=(resamples, n_runs))
    # One bincount per row: row b counts how often each run was drawn.
    offsets = draws + n_runs * np.arange(resamples)[:, None]
    return np.bincount(offsets.ravel(), minlength=resamples * n_runs).reshape(resamples, n_runs)


def percentile_interval(samples: Any, *, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap replicates (NaN if any is NaN)."""
    import numpy as np

    x = np.asarray(samples, dtype=float)
    if not len(x) or np.isnan(x).any():
        return (math.nan, math.nan)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(x, [tail, 100 - tail])
    return (float(lo), float(hi))


def interval_attrs(
    n_runs: int, *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> dict[str, Any]:
    """What a frame's ``attrs["intervals"]`` records about its ``*_lo``/``*_hi`` columns."""
    return {
        "method": METHOD,
        "level": level,
        "resamples": resamples,
        "seed": seed,
        "n": n_runs,
        "columns": "<figure>_lo, <figure>_hi",
    }


def format_interval(value: Any, lo: Any, hi: Any, fmt: str = "{}") -> str:
    """``value [lo–hi]``, each formatted with ``fmt``; the bounds are left out when NaN."""

    def nan(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    if nan(value):
        return "–"
    text = fmt.format(value)
    if nan(lo) or nan(hi):
        return text
    return f"{text} [{fmt.format(lo)}–{fmt.format(hi)}]"
