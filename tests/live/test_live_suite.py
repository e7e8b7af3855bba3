"""The live task suite, run_experiment over tasks x strategies, and the statistics of its frame."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from _needs import has_module, require

from ctxnb.live.stats import bootstrap_mean_ci, compare, mcnemar_exact, summarize, wilson
from ctxnb.live.suite import load_suite


def test_every_suite_task_starts_failing_and_its_recorded_fix_is_judged_as_noted(
    tmp_path: Path,
) -> None:
    # The suite is data: check each task for real with the verdict's own runner (no
    # agent): its tests fail as shipped, the recorded fix makes them pass, and the hidden
    # check fails exactly the fixes whose note says they overfit.
    from ctxnb.live.verdict import check_scripts, collect_tests, judge, pristine_files

    tasks = load_suite()
    assert len(tasks) >= 20 and len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        task = t.materialize(tmp_path / t.id)
        work = tmp_path / t.id / "work"
        assert set(t.tests) <= set(t.files) and not set(t.hidden) & set(t.files)
        pristine, hidden = pristine_files(task.tests, source=work, hidden=task.hidden)
        ids = collect_tests(work, pristine)
        assert ids and all(i.startswith(Path(task.tests[0]).stem + ".") for i in ids), ids
        before = judge(work, pristine=pristine, expected=ids)
        assert before.reason in ("failed", "errored"), (t.id, before.outcomes)
        fix = t.script[1]["commands"][0]
        assert subprocess.run(fix, shell=True, cwd=work, capture_output=True).returncode == 0
        after = judge(
            work,
            pristine=pristine,
            expected=ids,
            hidden=hidden,
            scripts=check_scripts(task.check, hidden),
        )
        assert after.passed == (not t.note), (t.id, after.outcomes, after.output)
        # What fails an overfit fix is its hidden check, not the visible tests.
        assert all(after.outcomes[i] == "passed" for i in ids), t.id


def test_a_bad_suite_file_says_what_a_task_needs(tmp_path: Path) -> None:
    bad = tmp_path / "suite.json"
    bad.write_text(json.dumps({"tasks": [{"id": "x"}]}))
    with pytest.raises(ValueError, match="task 0 .*needs id, prompt, files, test"):
        load_suite(bad)
    bad.write_text("[]")
    with pytest.raises(ValueError, match="no tasks"):
        load_suite(bad)


@pytest.mark.parametrize("name", ["../escape.py", "/tmp/abs.py", "a/../../b.py"])
def test_a_task_file_name_cannot_leave_its_folder(tmp_path: Path, name: str) -> None:
    task = {"id": "t", "prompt": "p", "files": {name: "x = 1\n"}, "test": "true"}
    (tmp_path / "suite.json").write_text(json.dumps({"tasks": [task]}))
    (suite,) = load_suite(tmp_path / "suite.json")
    with pytest.raises(ValueError, match="leaves the task's folder"):
        suite.materialize(tmp_path / "run")
    assert not (tmp_path / "escape.py").exists() and not Path("/tmp/abs.py").exists()


@pytest.mark.slow
def test_the_suite_runs_under_two_strategies_on_dask_and_in_process_alike(
    live_deps: None, tmp_path: Path
) -> None:
    require(has_module("distributed"), "dask.distributed")
    from distributed import Client, LocalCluster

    from ctxnb.live.experiment import RUN_COLUMNS, run_experiment
    from ctxnb.replay.experiment import write_parquet
    from ctxnb.strategies.builtin import KeepAll, ObservationMasking

    # The whole suite, on worker processes: tasks and strategies travel by value.
    tasks = load_suite()
    overfit = {t.id for t in tasks if t.note}
    strategies = [KeepAll(), ObservationMasking(1)]
    local = run_experiment(tasks, strategies)
    with (
        # A dashboard on a free port: 8787, dask's default, is taken by any other
        # cluster on the machine (another test worker's, a developer's).
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        remote = run_experiment(tasks, strategies, executor=client)
    assert list(local.columns) == list(RUN_COLUMNS)
    pd.testing.assert_frame_equal(local, remote)
    assert local.attrs == remote.attrs
    assert len(local) == 2 * len(tasks)
    solved = local.groupby("task")["solved"].all()
    assert overfit and {t for t, ok in solved.items() if not ok} == overfit
    assert not local["tests_tampered"].any() and (local["exit_status"] == "Submitted").all()
    assert (local["cost_usd"] > 0).all() and (local["cached_tokens"] > 0).all()
    # Masking sends fewer prompt tokens than keep-all on every task.
    wide = local.pivot(index="task", columns="strategy", values="prompt_tokens")
    assert (wide["observation-masking"] < wide["keep-all"]).all()
    # Provenance: in the frame and in every Parquet file written from it.
    prov = local.attrs["ctxnb"]
    assert prov["ctxnb_version"] and len(prov["price_table_hash"]) == 64
    assert [s["label"] for s in prov["strategies"]] == ["keep-all", "observation-masking"]
    assert prov["strategies"][1]["params"] == {"keep_last": 1}
    assert len(prov["inputs"]["suite"]) == 64 and prov["token_counter"]
    import pyarrow.parquet as pq

    out = write_parquet(local, tmp_path / "runs")
    files = sorted(out.rglob("*.parquet"))
    assert len(files) == 2
    for f in files:
        meta = json.loads(pq.read_schema(f).metadata[b"ctxnb"])
        assert meta == json.loads(json.dumps(prov))
    s = summarize(local)
    n = len(tasks)
    assert s.loc["keep-all", "solve_rate"] == (n - len(overfit)) / n
    assert s.loc["keep-all", "unpriced_runs"] == 0
    c = compare(local, "keep-all", "observation-masking")
    assert c["pairs"] == n and c["only_a"] == c["only_b"] == 0 and c["p_mcnemar"] == 1.0


def test_wilson_and_mcnemar_match_scipy() -> None:
    require(has_module("scipy"), "scipy (the reference statistics; in the dev extra)")
    import scipy.stats as scipy_stats

    for k, n in [(0, 5), (5, 5), (19, 22), (1, 40), (20, 44)]:
        ci = scipy_stats.binomtest(k, n).proportion_ci(method="wilson")
        lo, hi = wilson(k, n)
        assert lo == pytest.approx(ci.low, abs=1e-9) and hi == pytest.approx(ci.high, abs=1e-9)
    for a, b in [(0, 5), (3, 9), (7, 7), (1, 0)]:
        ref = scipy_stats.binomtest(min(a, b), a + b, 0.5).pvalue
        assert mcnemar_exact(a, b) == pytest.approx(ref)
    assert mcnemar_exact(0, 0) == 1.0 and all(math.isnan(x) for x in wilson(0, 0))


def test_bootstrap_intervals_are_seeded_cover_the_mean_and_keep_nan() -> None:
    xs = [0.1, 0.2, 0.2, 0.4, 1.5, 0.3, 0.25]
    lo, hi = bootstrap_mean_ci(xs)
    assert lo < sum(xs) / len(xs) < hi and (lo, hi) == bootstrap_mean_ci(xs)
    assert all(math.isnan(v) for v in bootstrap_mean_ci([0.1, float("nan")]))


def _frame(rows: list[tuple[str, str, int, bool, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "task": t,
                "strategy": s,
                "repeat": r,
                "solved": ok,
                "cost_usd": c,
                "tests_tampered": False,
                "steps": 3,
                "prompt_tokens": 100,
                "cached_tokens": 50,
            }
            for t, s, r, ok, c in rows
        ]
    )


def test_compare_pairs_runs_by_task_and_repeat() -> None:
    rows = []
    for i in range(8):
        rows.append((f"t{i}", "a", 0, True, 1.0))
        rows.append((f"t{i}", "b", 0, i < 2, 2.0))  # b fails 6 tasks a solves
    df = _frame(rows)
    c = compare(df, "a", "b")
    assert (c["both"], c["only_a"], c["only_b"], c["neither"]) == (2, 6, 0, 0)
    assert c["p_mcnemar"] == pytest.approx(2 / 2**6)
    assert c["cost_diff_usd"] == -1.0 and c["cost_diff_lo"] == c["cost_diff_hi"] == -1.0
    s = summarize(df)
    assert (
        s.loc["b", "solved"] == 2
        and s.loc["b", "solve_rate_lo"] < 0.25 < s.loc["b", "solve_rate_hi"]
    )
    with pytest.raises(ValueError, match="share no"):
        compare(df, "a", "c")


def test_summarize_keeps_an_unpriced_run_out_of_the_mean() -> None:
    df = _frame([("t0", "a", 0, True, 1.0), ("t1", "a", 0, True, float("nan"))])
    s = summarize(df).loc["a"]
    assert s["unpriced_runs"] == 1 and math.isnan(s["cost_usd"]) and math.isnan(s["cost_usd_lo"])


def test_doctests() -> None:
    import doctest

    import ctxnb.live.stats
    import ctxnb.live.suite
    import ctxnb.replay.provenance

    for m in (ctxnb.live.stats, ctxnb.live.suite, ctxnb.replay.provenance):
        assert doctest.testmod(m).failed == 0, m.__name__


def test_the_module_imports_without_dask_or_litellm() -> None:
    code = "import sys, ctxnb.live.experiment, ctxnb.live.stats; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_live_summaries_give_every_figure_a_seeded_paired_interval() -> None:
    # Ten tasks of uneven size; "same" spends exactly what keep-all does on each, "lean"
    # a fifth less prompt on each: paired, both ratios are exact, with zero width.
    rows = []
    for i in range(10):
        for strategy, f in (("keep-all", 1.0), ("same", 1.0), ("lean", 0.8)):
            rows.append(
                {
                    "task": f"t{i}",
                    "strategy": strategy,
                    "repeat": 0,
                    "solved": i % 3 > 0,
                    "tests_tampered": False,
                    "steps": 3 + i,
                    "prompt_tokens": int(1000 * (i + 1) ** 1.5 * f),
                    "cached_tokens": 400 * (i + 1),
                    "cost_usd": 0.001 * (i + 1) ** 1.5,
                }
            )
    df = pd.DataFrame(rows)
    s = summarize(df)
    for strategy in s.index:
        for col in ("steps", "prompt_tokens", "cached_tokens", "cost_usd"):
            lo, v, hi = (s.loc[strategy, c] for c in (f"{col}_lo", col, f"{col}_hi"))
            assert lo < v < hi, (strategy, col)
    for col in ("prompt_tokens_rel", "cost_usd_rel"):
        assert s.loc["same", col] == s.loc["same", f"{col}_lo"] == s.loc["same", f"{col}_hi"] == 1
    lean = s.loc["lean", ["prompt_tokens_rel", "prompt_tokens_rel_lo", "prompt_tokens_rel_hi"]]
    assert lean.tolist() == pytest.approx([0.8] * 3, abs=1e-3)
    assert s.attrs["intervals"]["n"] == 10 and s.attrs["intervals"]["seed"] == 0
    assert "Wilson" in s.attrs["intervals"]["solve_rate"]
    # Seeded: the same frame, the same numbers; another seed, others.
    pd.testing.assert_frame_equal(summarize(df), s)
    assert summarize(df, seed=5).loc["lean", "steps_lo"] != s.loc["lean", "steps_lo"] or (
        summarize(df, seed=5).loc["lean", "cost_usd_lo"] != s.loc["lean", "cost_usd_lo"]
    )
    # More runs, narrower: the same ten tasks repeated four times.
    more = summarize(pd.concat([df.assign(repeat=r) for r in range(4)], ignore_index=True))
    width = lambda t: t.loc["lean", "steps_hi"] - t.loc["lean", "steps_lo"]  # noqa: E731
    assert width(more) < width(s) * 0.75


def test_a_live_frame_and_its_parquet_record_every_setting_without_secrets(
    tmp_path: Path,
) -> None:
    require(has_module("minisweagent") and has_module("litellm"), "mini-swe-agent and litellm")
    import secrets

    import pyarrow.parquet as pq

    from ctxnb.live.experiment import run_experiment
    from ctxnb.strategies import KeepAll

    key = "sk-" + secrets.token_hex(24)  # generated, never a real key
    df = run_experiment(
        load_suite()[:1],
        [KeepAll()],
        budget=50_000,
        step_limit=7,
        api_key=key,
        model_kwargs={"temperature": 0.0, "extra_headers": {"Authorization": f"Bearer {key}"}},
        out_dir=tmp_path / "out",
    )
    prov = df.attrs["ctxnb"]
    settings = prov["settings"]
    assert settings["budget"] == 50_000 and settings["step_limit"] == 7
    assert settings["model_kwargs"] == {"temperature": 0.0, "extra_headers": "[set]"}
    assert settings["api_key"] == "[set]" and settings["api_base"] is None
    assert settings["scripted_priced_as"] == "gpt-5-mini" and prov["ctxnb_commit"]
    # How tokens were counted is a setting to read, not a credential to hide.
    assert settings["scripted_token_counter"] == "chars4"
    files = sorted((tmp_path / "out").rglob("*.parquet"))
    assert files
    for f in files:
        meta = pq.read_schema(f).metadata[b"ctxnb"]
        assert json.loads(meta) == json.loads(json.dumps(prov)) and key.encode() not in meta
    assert key not in json.dumps(prov)
