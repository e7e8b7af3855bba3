"""Outcomes at scale: live runs over tasks x strategies x repeats, into one frame.

:func:`run_experiment` runs every task of a suite (see :mod:`ctxnb.live.suite`) under
every strategy, ``repeats`` times, each run in a fresh copy of the task, and returns
one row per run: whether it was solved (pristine tests and hidden check pass, tests
untouched), the verdict's reason (``passed``, ``failed``, ``missing-report`` …), its
steps, tokens, cached tokens, dollars and exit status. With no
``model`` each task's recorded solution answers (a :class:`~ctxnb.live.ScriptedModelServer`
per run); with one, that litellm model does. Runs go in process one after another, or
to any :class:`concurrent.futures.Executor` or ``dask.distributed`` client; the frame
is the same either way (rows sorted by task, strategy, repeat).

Example:
    >>> from ctxnb.live.experiment import run_experiment
    >>> from ctxnb.live.stats import summarize
    >>> from ctxnb.strategies import KeepAll, ObservationMasking
    >>> df = run_experiment(strategies=[KeepAll(), ObservationMasking(2)])  # doctest: +SKIP
    >>> summarize(df)[["solve_rate", "solve_rate_lo", "solve_rate_hi"]]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import cloudpickle

from ..llm.prices import PriceTable, resolve_prices
from ..strategies.builtin import ContextStrategy, KeepAll
from .suite import SuiteTask, load_suite

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RUN_COLUMNS", "run_experiment"]

#: Columns of the frame :func:`run_experiment` returns, in order.
RUN_COLUMNS: tuple[str, ...] = (
    "task",
    "strategy",
    "repeat",
    "solved",
    "passed",
    "tests_tampered",
    "verdict",
    "exit_status",
    "steps",
    "re_reads",
    "recalls",
    "calls",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "cost_usd",
    "cost_usd_uncached",
)


def _run_one(task: SuiteTask, setup: bytes, repeat: int, options: dict[str, Any]) -> dict[str, Any]:
    # Module level (every executor can import it); the strategy comes by value.
    from .run import run_task
    from .scripted import ScriptedModelServer

    strategy, label = pickle.loads(setup)
    with tempfile.TemporaryDirectory(prefix=f"ctxnb-{task.id}-") as tmp:
        spec = task.materialize(tmp)
        run_args = {
            k: options[k]
            for k in ("budget", "step_limit", "prices", "model_kwargs")
            if k in options
        }
        if options.get("model"):
            model_args = {k: options[k] for k in ("model", "api_base", "api_key") if options.get(k)}
            result = run_task(
                f"{tmp}/work", spec, strategy=strategy, retries=3, **model_args, **run_args
            )
        else:
            counter = options.get("token_counter")
            with ScriptedModelServer(list(task.script), token_counter=counter) as server:
                scripted: dict[str, Any] = dict(server.model_args)
                result = run_task(
                    f"{tmp}/work", spec, strategy=strategy, retries=1, **scripted, **run_args
                )
    return {
        "task": task.id,
        "strategy": label,
        "repeat": repeat,
        "solved": result.solved,
        "passed": result.passed,
        "tests_tampered": result.tests_tampered,
        "verdict": result.verdict,
        "exit_status": result.exit_status,
        "steps": len(result.trajectory.steps),
        "re_reads": result.re_reads,
        "recalls": result.recalls,
        "calls": len(result.calls),
        "prompt_tokens": result.prompt_tokens,
        "cached_tokens": result.cached_tokens,
        "completion_tokens": result.completion_tokens,
        "cost_usd": result.cost_usd,
        "cost_usd_uncached": result.cost_usd_uncached,
    }


def _scripted_prices(table: PriceTable, priced_as: str) -> PriceTable:
    # The scripted model is billed as a real one, so that dollars mean something in CI.
    return table.with_prices({"ctxnb-scripted": table.get(priced_as)})


def run_experiment(
    tasks: Sequence[SuiteTask] | None = None,
    strategies: Sequence[ContextStrategy] | None = None,
    *,
    repeats: int = 1,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    budget: int | None = None,
    step_limit: int = 30,
    executor: Executor | Any | None = None,
    prices: PriceTable | Mapping[str, Any] | str | None = None,
    scripted_priced_as: str = "gpt-5-mini",
    scripted_token_counter: str = "chars4",
    model_kwargs: dict[str, Any] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Run tasks x strategies x repeats live and return one row per run.

    Args:
        tasks: the suite (the one shipped with ctxnb when None).
        strategies: context strategies ([KeepAll()] when None); labels must differ.
        repeats: runs per (task, strategy).
        model: a litellm model; None answers from each task's recorded solution.
        api_base: the model's endpoint, when not the provider's.
        api_key: the key, when not in the provider's environment variable.
        budget: the token budget of each context, or None.
        step_limit: the most model calls per run.
        executor: None runs in this process, one run after another; else any
            :class:`concurrent.futures.Executor` or a ``dask.distributed.Client``.
        prices: the price table (see :func:`~ctxnb.llm.prices.resolve_prices`).
        scripted_priced_as: the real model whose prices the scripted model is billed at.
        scripted_token_counter: how the scripted model counts tokens; ``chars4``
            counts by length only, so that runs whose prompts differ only in random
            ids (paths of temporary copies, call ids) count the same.
        model_kwargs: passed on to ``litellm.completion``.
        out_dir: if given, the frame is also written there as Parquet, partitioned by
            strategy, its provenance in every file's metadata
            (:func:`~ctxnb.replay.experiment.write_parquet`).

    Returns:
        The columns of :data:`RUN_COLUMNS`, sorted by task, strategy and repeat, with
        the provenance in ``df.attrs["ctxnb"]`` (see :func:`ctxnb.provenance.provenance`).
    """
    import pandas as pd

    from ..replay.experiment import _executor, write_parquet
    from ..replay.provenance import provenance, redact_settings
    from ..replay.runner import strategy_labels

    tasks = list(tasks) if tasks is not None else load_suite()
    strategies = list(strategies) if strategies is not None else [KeepAll()]
    labels = strategy_labels(strategies)
    table = resolve_prices(prices)
    if model is None:
        table = _scripted_prices(table, scripted_priced_as)
    options: dict[str, Any] = {
        "model": model,
        "api_base": api_base,
        "api_key": api_key,
        "budget": budget,
        "step_limit": step_limit,
        "prices": table,
        "model_kwargs": model_kwargs,
        "token_counter": scripted_token_counter,
    }
    jobs = [
        (task, cloudpickle.dumps((strategy, label)), r)
        for task in tasks
        for strategy, label in zip(strategies, labels, strict=True)
        for r in range(repeats)
    ]
    if executor is None:
        rows = [_run_one(t, s, r, options) for t, s, r in jobs]
    else:
        ex = _executor(executor)
        futures = [ex.submit(_run_one, t, s, r, options) for t, s, r in jobs]
        rows = [f.result() for f in futures]
    df = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    df = df.sort_values(["task", "strategy", "repeat"], kind="stable", ignore_index=True)
    suite_hash = hashlib.sha256(
        json.dumps([asdict(t) for t in tasks], sort_keys=True).encode()
    ).hexdigest()
    df.attrs["ctxnb"] = provenance(
        strategies=strategies,
        labels=labels,
        prices=table,
        inputs={"suite": suite_hash},
        token_counter=scripted_token_counter if model is None else None,
        extra={
            "model": model or f"scripted (priced as {scripted_priced_as})",
            "repeats": repeats,
            # Every setting the runs depend on, credentials recorded as set or not
            # (where they ran is not one: the frame is the same on any executor).
            "settings": redact_settings(
                {
                    "model": model,
                    "api_base": api_base,
                    "api_key": api_key,
                    "budget": budget,
                    "step_limit": step_limit,
                    "model_kwargs": model_kwargs,
                    "scripted_priced_as": None if model else scripted_priced_as,
                    "scripted_token_counter": None if model else scripted_token_counter,
                }
            ),
        },
    )
    if out_dir is not None:
        write_parquet(df, out_dir)
    return df
