"""Strategies compared on SWE-bench-format instances: one row per live run, graded.

:func:`run_task_experiment` runs instances x strategies x repeats through
:func:`~ctxnb.tasks.run_instance` (governed, sandboxed, graded with the harness's log
parsers) and returns the frame of :func:`ctxnb.live.experiment.run_experiment`, so
:func:`ctxnb.live.stats.summarize` and :func:`~ctxnb.live.stats.compare` give its solve
rates, dollars, tokens, re-reads and recalls with their intervals. ``solved`` is the
instance resolved without touching its tests.

With no ``model`` each run answers from :func:`gold_script`: the instance's gold patch,
applied as an agent would after reading the file it changes, with the fix marked as
needing that read (``needs``), so that a strategy that elided it costs a re-read, or a
recall when it offers one (see :class:`~ctxnb.live.ScriptedModelServer`). The answers do
not depend on the context otherwise: the solve rate is the same under every strategy,
and what differs is what the context costs.

Example:
    >>> from ctxnb.strategies import KeepAll, ObservationMasking
    >>> df = run_task_experiment(mined, [KeepAll(), ObservationMasking(1)],
    ...                          repo="parse", python="python3")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TaskFormatError
from ..llm.prices import PriceTable, resolve_prices
from .instances import Instance

if TYPE_CHECKING:
    import pandas as pd

    from ..strategies.builtin import ContextStrategy

__all__ = ["gold_script", "run_task_experiment"]

_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _first_change(patch: str) -> tuple[str, str]:
    """The first file a patch changes and a line of it the fix relies on having read
    (the first removed line, else the first unchanged one)."""
    path, removed, context = None, None, None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            if path is not None:
                break  # the first file only
            name = line[4:].split("\t")[0]
            path = name[2:] if name.startswith("b/") else name
        elif path is None or line.startswith(("---", "@@")):
            continue
        elif line.startswith("-") and removed is None and line[1:].strip():
            removed = line[1:]
        elif line.startswith(" ") and context is None and line[1:].strip():
            context = line[1:]
    need = removed or context
    if path is None or path == "/dev/null" or need is None:
        raise TaskFormatError("the gold patch changes no existing file: no script reads it")
    return path, need


def gold_script(instance: Instance) -> list[dict[str, Any]]:
    """Scripted answers that solve ``instance`` with its gold patch, as an agent would.

    Read the file the patch changes, look at the tree's state, apply the patch (needing
    a line of the file in view: see the module), check what changed.

    Example:
        >>> inst = Instance.from_dict({"instance_id": "i", "repo": "o/r",
        ...     "base_commit": "c", "problem_statement": "p", "test_patch": "",
        ...     "patch": "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n",
        ...     "FAIL_TO_PASS": [], "PASS_TO_PASS": []})
        >>> [s["commands"][0].split("\\n")[0] for s in gold_script(inst)][:4]
        ['cat m.py', 'git status --short', "git apply <<'CTXNB_EOF'", 'git diff --stat']
        >>> gold_script(inst)[2]["needs"]
        'x = 1'
    """
    path, need = _first_change(instance.patch)
    return [
        {"content": f"Read {path}, which the fix is in.", "commands": [f"cat {path}"]},
        {"content": "What state is the tree in?", "commands": ["git status --short"]},
        {
            "content": "Apply the fix.",
            "commands": [f"git apply <<'CTXNB_EOF'\n{instance.patch}CTXNB_EOF"],
            "needs": need,
            "reread": f"cat {path}",
        },
        {"content": "Check the change.", "commands": ["git diff --stat"]},
        {"content": "Done.", "commands": [_SUBMIT]},
    ]


def _row(inst: Instance, label: str, repeat: int, run: Any) -> dict[str, Any]:
    live = run.live
    return {
        "task": inst.instance_id,
        "strategy": label,
        "repeat": repeat,
        "solved": run.resolved,
        "passed": run.evaluation.resolved,
        "tests_tampered": live.tests_tampered,
        "verdict": run.evaluation.status,
        "exit_status": live.exit_status,
        "steps": len(live.trajectory.steps),
        "re_reads": live.re_reads,
        "recalls": live.recalls,
        "calls": len(live.calls),
        "prompt_tokens": live.prompt_tokens,
        "cached_tokens": live.cached_tokens,
        "completion_tokens": live.completion_tokens,
        "cost_usd": live.cost_usd,
        "cost_usd_uncached": live.cost_usd_uncached,
    }


def run_task_experiment(
    instances: Sequence[Instance],
    strategies: Sequence[ContextStrategy],
    *,
    repo: str | os.PathLike[str],
    python: str,
    repeats: int = 1,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    step_limit: int = 30,
    prices: PriceTable | Mapping[str, Any] | str | None = None,
    scripted_priced_as: str = "gpt-5-mini",
    scripted_token_counter: str = "chars4",
    plugins: Sequence[str] = (),
) -> pd.DataFrame:
    """Run ``instances`` x ``strategies`` x ``repeats`` live and grade each run.

    Args:
        instances: the tasks (from :func:`~ctxnb.tasks.mine_tasks` or
            :func:`~ctxnb.tasks.load_instances`).
        strategies: the context strategies; their labels must differ.
        repo: a checkout that has every instance's base commit.
        python: the interpreter of the environment the tests run in.
        repeats: runs per (instance, strategy).
        model: a litellm model; None answers from :func:`gold_script`.
        api_base, api_key: the model's endpoint and key, when not the provider's.
        step_limit: the most model calls per run.
        prices: the price table (see :func:`~ctxnb.llm.prices.resolve_prices`).
        scripted_priced_as: the real model the scripted one is billed as.
        scripted_token_counter: how the scripted model counts tokens (``chars4``:
            by length, so that random ids in paths count the same in every run).
        plugins: the pytest plugins the tests need (see
            :func:`~ctxnb.tasks.run_instance`); the verdict loads no other.

    Returns:
        The columns of :data:`ctxnb.live.experiment.RUN_COLUMNS` (``verdict`` is the
        grading's status), sorted by task, strategy and repeat, the provenance in
        ``df.attrs["ctxnb"]``.
    """
    import pandas as pd

    from ..live.experiment import RUN_COLUMNS, _scripted_prices
    from ..live.scripted import ScriptedModelServer
    from ..replay.provenance import provenance, redact_settings
    from ..replay.runner import strategy_labels
    from .evaluate import run_instance

    labels = strategy_labels(list(strategies))
    table = resolve_prices(prices)
    if model is None:
        table = _scripted_prices(table, scripted_priced_as)
    rows = []
    for inst in instances:
        for strategy, label in zip(strategies, labels, strict=True):
            for r in range(repeats):
                common: dict[str, Any] = {
                    "repo": repo,
                    "python": python,
                    "strategy": strategy,
                    "step_limit": step_limit,
                    "prices": table,
                    "plugins": tuple(plugins),
                }
                if model is not None:
                    model_args: dict[str, Any] = {
                        "model": model,
                        "api_base": api_base,
                        "api_key": api_key,
                    }
                    run = run_instance(inst, retries=3, **common, **model_args)
                else:
                    script = gold_script(inst)
                    with ScriptedModelServer(script, token_counter=scripted_token_counter) as s:
                        served: dict[str, Any] = dict(s.model_args)
                        run = run_instance(
                            inst, retries=1, model_name="ctxnb-scripted", **common, **served
                        )
                rows.append(_row(inst, label, r, run))
    df = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    df = df.sort_values(["task", "strategy", "repeat"], kind="stable", ignore_index=True)
    digest = hashlib.sha256(
        json.dumps([i.to_dict() for i in instances], sort_keys=True).encode()
    ).hexdigest()
    df.attrs["ctxnb"] = provenance(
        strategies=list(strategies),
        labels=labels,
        prices=table,
        inputs={"instances": digest},
        token_counter=scripted_token_counter if model is None else None,
        extra={
            "model": model or f"scripted gold patches (priced as {scripted_priced_as})",
            "repeats": repeats,
            "settings": redact_settings(
                {
                    "model": model,
                    "api_base": api_base,
                    "api_key": api_key,
                    "step_limit": step_limit,
                    "plugins": list(plugins),
                    "python": python,
                    "scripted_priced_as": None if model else scripted_priced_as,
                    "scripted_token_counter": None if model else scripted_token_counter,
                }
            ),
        },
    )
    return df
