"""Run a grid of context strategies over many recorded runs, in parallel.

:func:`run_experiment` replays every trajectory once (see :func:`ctxnb.replay.runner.replay`)
and assembles the context under every strategy at every step. Trajectories are spread
over any :class:`concurrent.futures.Executor`; by default a local process pool with
one worker per CPU. The result is one tidy pandas frame and, if asked, a Parquet
dataset partitioned hive-style by strategy (``out/strategy=keep-all/part-0.parquet``)
that DuckDB, Polars or Spark read without ctxnb::

    SELECT strategy, sum(total_tokens) FROM read_parquet('out/**/*.parquet',
        hive_partitioning = true) GROUP BY strategy

**Strategies cross process boundaries by value.** The strategies and the token counter
are serialized with cloudpickle, so a strategy class defined in a notebook cell or in
a script's ``__main__`` reaches the worker processes as it is. Any
:class:`concurrent.futures.Executor` works (threads, processes, Ray's), and so does a
``dask.distributed`` :class:`~distributed.Client` (a ``LocalCluster`` or a real
cluster): pass the client itself as ``executor``. The Parquet written is the same
whichever runs the work. A worker that dies (out of memory, killed) is reported as an
:class:`ExperimentError` naming the run, not as a bare ``BrokenProcessPool``.

Example:
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from ctxnb.strategies import KeepAll, ObservationMasking
    >>> df = run_experiment(["data/trajectories"], [KeepAll(), ObservationMasking(5)],
    ...                     executor=ThreadPoolExecutor(2))  # doctest: +SKIP
    >>> df.groupby("strategy")["total_tokens"].sum()  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pickle
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import cloudpickle

from ..errors import CtxnbError
from ..llm.prices import CacheTTL, PriceTable, resolve_prices
from ..llm.tokens import TokenCounter
from ..strategies.builtin import ContextStrategy
from ..strategies.registry import STRATEGY_SPECS, parse_strategy
from .model import Trajectory
from .provenance import PARQUET_KEY, file_sha256, provenance
from .runner import (
    FileMode,
    HiddenPrompt,
    check_cache_ttl,
    check_hit_rate,
    default_strategies,
    replay,
    strategy_labels,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "STRATEGY_SPECS",
    "DuplicateRunWarning",
    "ExperimentError",
    "expand_paths",
    "parse_strategy",
    "run_experiment",
    "write_parquet",
]

_TRAJ_SUFFIXES = (".json", ".jsonl", ".traj")


def expand_paths(items: Iterable[str | os.PathLike[str] | Trajectory]) -> list[Path | Trajectory]:
    """Trajectories and files as given; a directory stands for the runs inside it.

    Files in a directory are taken in name order when their suffix is ``.json``,
    ``.jsonl`` or ``.traj`` and their content is a known trajectory format (so a
    ``README.md`` or a ``results_summary.json`` next to the runs is skipped).

    Example:
        >>> len(expand_paths(["data/trajectories"])) >= 1  # doctest: +SKIP
        True
    """
    from .converters import sniff_format
    from .model import TrajectoryFormatError

    out: list[Path | Trajectory] = []
    for item in items:
        if isinstance(item, Trajectory):
            out.append(item)
            continue
        p = Path(item)
        if p.is_dir():
            for f in sorted(p.iterdir()):
                if f.is_file() and f.name.endswith(_TRAJ_SUFFIXES):
                    try:
                        sniff_format(f)
                    except TrajectoryFormatError:
                        continue
                    out.append(f)
        else:
            out.append(p)
    return out


class ExperimentError(CtxnbError, RuntimeError):
    """A worker could not replay a run (it died, or could not be reached).

    Attributes:
        run: the run it was replaying.
    """

    def __init__(self, message: str, *, run: str | None = None) -> None:
        super().__init__(message)
        self.run = run


def _replay_one(
    item: Path | Trajectory, setup: bytes, budget: int | None, options: dict[str, Any]
) -> pd.DataFrame:
    # Module level, so that every executor can import it; the strategies and counter
    # come by value (cloudpickle) so that classes defined in __main__ arrive too.
    strategies, token_counter = pickle.loads(setup)
    return replay(item, strategies, budget, token_counter, **options)


def _executor(executor: Any) -> Executor:
    """A concurrent.futures executor for what the caller passed (a dask Client too)."""
    if isinstance(executor, Executor):
        return executor
    get = getattr(executor, "get_executor", None)
    if callable(get):  # dask.distributed.Client
        ex = get(pure=False)
        if isinstance(ex, Executor):
            return ex
    raise TypeError(
        f"executor must be a concurrent.futures.Executor or a dask.distributed.Client, "
        f"got {type(executor).__name__}"
    )


def _name(item: Path | Trajectory) -> str:
    return item.id if isinstance(item, Trajectory) else str(item)


def _input_hash(item: Path | Trajectory) -> str:
    if isinstance(item, Trajectory):
        return hashlib.sha256(item.model_dump_json().encode()).hexdigest()
    return file_sha256(item)


def _want_progress(progress: bool | None) -> bool:
    if progress is not None:
        return progress
    return "ipykernel" in sys.modules or sys.stderr.isatty()


def _size(item: Path | Trajectory) -> int:
    if isinstance(item, Trajectory):
        return len(item.steps) * 4096
    try:
        return item.stat().st_size
    except OSError:
        return 0


class DuplicateRunWarning(UserWarning):
    """Two runs given to :func:`run_experiment` carry the same trajectory id.

    They are kept apart (the later ones as ``<id>#2``, ``<id>#3`` …) rather than merged
    into one long run; the warning names the files so that a copy can be removed.
    """


def _separate_duplicates(items: Sequence[Path | Trajectory], frames: list[pd.DataFrame]) -> None:
    # Run ids come from inside the files, so copies of one run (or two runs that reuse an
    # instance id) would otherwise merge into one run of twice the steps.
    seen: dict[str, list[str]] = {}
    for item, df in zip(items, frames, strict=True):
        if df.empty:
            continue
        tid = str(df["trajectory"].iloc[0])
        names = seen.setdefault(tid, [])
        names.append(_name(item))
        if len(names) > 1:
            df["trajectory"] = f"{tid}#{len(names)}"
    dups = {tid: names for tid, names in seen.items() if len(names) > 1}
    if dups:
        tid, names = next(iter(dups.items()))
        others = f" (and {len(dups) - 1} more ids)" if len(dups) > 1 else ""
        warnings.warn(
            f"{sum(len(n) for n in dups.values())} runs share a trajectory id, e.g. {len(names)} "
            f"x {tid!r} ({names[0]}, {names[1]}{', …' if len(names) > 2 else ''}){others}; "
            f"kept apart as {tid!r}, '{tid}#2' …; remove the copies to compare distinct runs",
            DuplicateRunWarning,
            stacklevel=3,
        )


def run_experiment(
    trajectories: Iterable[str | os.PathLike[str] | Trajectory],
    strategies: Sequence[ContextStrategy] | None = None,
    *,
    budget: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    executor: Executor | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    files: FileMode = "pool",
    hidden_prompt_tokens: HiddenPrompt = None,
    model: str | None = None,
    prices: PriceTable | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    cache_hit_rate: float = 1.0,
    cache_write_ttl: CacheTTL | Literal["auto"] = "auto",
) -> pd.DataFrame:
    """Replay many runs under many strategies, in parallel, into one tidy frame.

    Args:
        trajectories: paths of trajectory files, directories of them, or
            :class:`~ctxnb.replay.model.Trajectory` objects.
        strategies: context strategies (picklable, see the module docs);
            :func:`~ctxnb.replay.runner.default_strategies` when None.
        budget: total token budget per context, or None for no limit.
        token_counter: a counter, a name such as ``"heuristic"``, or None for the
            default; it must pickle too when a process pool is used.
        executor: where to run: any :class:`concurrent.futures.Executor` or a
            ``dask.distributed.Client``; a local ``ProcessPoolExecutor`` with
            ``os.cpu_count()`` workers when None (shut down afterwards). An executor or
            client you pass is left running.
        out_dir: if given, the frame is also written there as Parquet, partitioned
            hive-style by strategy (:func:`write_parquet`).
        progress: show a progress bar; None shows one in notebooks and terminals.
        files: ``"active"`` or ``"pool"`` (see :func:`~ctxnb.replay.runner.replay_contexts`).
        hidden_prompt_tokens: the agent's unrecorded prompt size, a number, ``"auto"``
            or None (see :func:`~ctxnb.replay.runner.replay`).
        model: the model whose prices apply; each run's own model when None.
        prices: the price table (see :func:`~ctxnb.llm.prices.resolve_prices`).
        cache_hit_rate: the share of a cacheable prefix the provider's cache serves
            (see :func:`~ctxnb.replay.runner.replay`).
        cache_write_ttl: the price of a cache write: ``"5m"``, ``"1h"``, or ``"auto"``
            for each run's own (see :func:`~ctxnb.replay.runner.replay`).

    Returns:
        The rows of every run, in the order the runs were given (then step, then
        strategy), with the columns of :data:`~ctxnb.replay.runner.COLUMNS`.

    Raises:
        TrajectoryFormatError: a file is not a trajectory ctxnb can read.
        NotFoundError: nothing to replay.
        ValueError: two strategies share a label.
        ExperimentError: a worker process died.

    Example:
        >>> from concurrent.futures import ThreadPoolExecutor
        >>> from ctxnb.strategies import KeepAll, ObservationMasking
        >>> df = run_experiment(["data/trajectories"], [KeepAll(), ObservationMasking()],
        ...                     executor=ThreadPoolExecutor(2), out_dir="results",
        ...                     progress=False)  # doctest: +SKIP
    """
    import pandas as pd

    from .frame import COLUMNS, frame

    items = expand_paths(trajectories)
    if not items:
        from ..errors import NotFoundError

        raise NotFoundError(
            "no trajectories to replay: pass trajectory files, directories holding "
            f"them ({', '.join(_TRAJ_SUFFIXES)}), or Trajectory objects"
        )
    strategies = list(strategies) if strategies is not None else default_strategies()
    strategy_labels(strategies)  # fail fast, before any work is sent out
    check_hit_rate(cache_hit_rate)
    check_cache_ttl(cache_write_ttl)
    table = resolve_prices(prices)
    if model:
        table.get(model)  # an unknown model fails here, not in every worker
    options: dict[str, Any] = {
        "files": files,
        "hidden_prompt_tokens": hidden_prompt_tokens,
        "model": model,
        "prices": table,
        "cache_hit_rate": cache_hit_rate,
        "cache_write_ttl": cache_write_ttl,
    }
    setup = cloudpickle.dumps((strategies, token_counter))
    own = executor is None
    if executor is None:
        # Spawned, not forked: a fork of a process whose Arrow or BLAS threads are
        # running can deadlock, and spawn behaves the same on every platform.
        executor = ProcessPoolExecutor(
            max_workers=max(1, min(os.cpu_count() or 1, len(items))),
            mp_context=multiprocessing.get_context("spawn"),
        )
    else:
        executor = _executor(executor)
    results: dict[int, pd.DataFrame] = {}
    bar = None
    try:
        # Longest runs first, so that no worker is left with a long one at the end.
        order = sorted(range(len(items)), key=lambda i: -_size(items[i]))
        futures: dict[Future[pd.DataFrame], int] = {
            executor.submit(_replay_one, items[i], setup, budget, options): i for i in order
        }
        if _want_progress(progress) and futures:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(futures), desc="replay", unit="run")
        try:
            for fut in as_completed(futures):
                try:
                    results[futures[fut]] = fut.result()
                except BrokenExecutor as exc:
                    run = _name(items[futures[fut]])
                    raise ExperimentError(
                        f"a worker died while replaying {run} ({type(exc).__name__}: {exc}). "
                        "Usual causes: it ran out of memory (pass fewer workers, e.g. "
                        "executor=ProcessPoolExecutor(1)), or it was killed. Replay that run "
                        "alone with ctxnb.replay.replay() to see the error.",
                        run=run,
                    ) from exc
                if bar is not None:
                    bar.update(1)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    finally:
        if bar is not None:
            bar.close()
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    frames = [results[i] for i in range(len(items))]
    _separate_duplicates(items, frames)
    df = pd.concat(frames, ignore_index=True) if frames else frame([])
    df = df[list(COLUMNS)]
    df.attrs["ctxnb"] = provenance(
        strategies=strategies,
        labels=strategy_labels(strategies),
        prices=table,
        inputs={_name(item): _input_hash(item) for item in items},
        token_counter=token_counter,
        extra={
            "budget": budget,
            "files": files,
            "hidden_prompt_tokens": hidden_prompt_tokens,
            "model": model,
            "cache_hit_rate": cache_hit_rate,
            "cache_write_ttl": cache_write_ttl,
        },
    )
    if out_dir is not None:
        write_parquet(df, out_dir)
    return df


def write_parquet(df: pd.DataFrame, out_dir: str | os.PathLike[str]) -> Path:
    """Write a replay frame as Parquet, partitioned hive-style by strategy.

    The frame's provenance (``df.attrs["ctxnb"]``) goes into every file's metadata
    under the key ``ctxnb`` (JSON; ``pyarrow.parquet.read_schema(f).metadata[b"ctxnb"]``).

    Files already under ``out_dir`` for the strategies in ``df`` are replaced; other
    strategies' partitions are left alone, so runs can add strategies one at a time.

    Returns:
        The directory.

    Example:
        >>> write_parquet(df, "results")  # doctest: +SKIP
        PosixPath('results')
        >>> import duckdb  # doctest: +SKIP
        >>> duckdb.sql("SELECT strategy, count(*) FROM read_parquet('results/**/*.parquet', "
        ...            "hive_partitioning = true) GROUP BY 1")  # doctest: +SKIP
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    if "ctxnb" in df.attrs:
        # Provenance travels with the data: every file's metadata carries it.
        meta = dict(table.schema.metadata or {})
        meta[PARQUET_KEY] = json.dumps(df.attrs["ctxnb"], sort_keys=True, default=str).encode()
        table = table.replace_schema_metadata(meta)
    ds.write_dataset(
        table,
        out,
        format="parquet",
        partitioning=["strategy"],
        partitioning_flavor="hive",
        existing_data_behavior="delete_matching",
        basename_template="part-{i}.parquet",
    )
    return out
