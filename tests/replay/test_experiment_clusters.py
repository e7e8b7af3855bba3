"""run_experiment on other machines' worth of workers: dask, __main__ strategies, dead workers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from _needs import has_module, require
from _paths import REPO

from ctxnb.replay.experiment import ExperimentError, parse_strategy, run_experiment
from ctxnb.strategies.builtin import BlockMasking, KeepAll, ObservationMasking, Summarize

ROOT = REPO
DATA = ROOT / "data" / "trajectories"
RUNS = [DATA / "django__django-13670.traj.json", DATA / "tool_heavy.jsonl"]


def _read(out: Path) -> pd.DataFrame:
    import pyarrow.dataset as ds

    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    df = table.to_pandas()
    return df.sort_values(["trajectory", "strategy", "step"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def threads_result(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("threads")
    with ThreadPoolExecutor(1) as ex:
        run_experiment(
            RUNS, [KeepAll(), BlockMasking(3, 4)], executor=ex, out_dir=out, progress=False
        )
    return _read(out)


def test_a_dask_local_cluster_writes_the_same_parquet(
    tmp_path: Path, threads_result: pd.DataFrame
) -> None:
    require(has_module("distributed"), "dask.distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        df = run_experiment(
            RUNS, [KeepAll(), BlockMasking(3, 4)], executor=client, out_dir=tmp_path, progress=False
        )
        pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "strategy=block-masking",
        "strategy=keep-all",
    ]
    pd.testing.assert_frame_equal(_read(tmp_path), threads_result)
    assert len(df) == len(threads_result)


MAIN_SCRIPT = textwrap.dedent(
    """
    import sys
    from concurrent.futures import ProcessPoolExecutor
    from ctxnb.replay.experiment import run_experiment
    from ctxnb.strategies.builtin import Selection

    class LastThreeCalls:  # defined in __main__, as in a notebook cell
        name = "last-three-calls"

        def select(self, inp):
            calls = [i.id for i in inp.items if i.type == "toolcall"][-3:]
            return Selection.keep(inp, calls)

    if __name__ == "__main__":
        runs, out, how = sys.argv[1:3], sys.argv[3], sys.argv[4]
        if how == "dask":
            from distributed import Client, LocalCluster
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                              dashboard_address=":0") as c, Client(c) as client:
                df = run_experiment(runs, [LastThreeCalls()], executor=client, out_dir=out,
                                    progress=False)
        else:
            df = run_experiment(runs, [LastThreeCalls()], out_dir=out, progress=False)
        print(len(df), df["items_active"].max())
    """
)


@pytest.mark.parametrize("how", ["processes", "dask"])
def test_a_strategy_defined_in_main_reaches_worker_processes(tmp_path: Path, how: str) -> None:
    if how == "dask":
        require(has_module("distributed"), "dask.distributed")
    script = tmp_path / "experiment_script.py"
    script.write_text(MAIN_SCRIPT)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(script), *map(str, RUNS), str(out), how],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, most = proc.stdout.split()
    assert int(rows) > 20 and int(most) <= 3
    assert (out / "strategy=last-three-calls").is_dir()


class DiesInTheWorker:
    """A strategy that kills the process it runs in (as the OOM killer would)."""

    name = "dies"

    def select(self, inp):
        import os

        os._exit(3)


def test_a_dead_worker_is_a_clear_error() -> None:
    with ProcessPoolExecutor(1) as ex, pytest.raises(ExperimentError, match="worker died") as e:
        run_experiment(RUNS[:1], [DiesInTheWorker()], executor=ex, progress=False)
    assert e.value.run == str(RUNS[0])
    assert "out of memory" in str(e.value)


def test_anything_else_is_refused_as_an_executor() -> None:
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        run_experiment(RUNS[:1], [KeepAll()], executor=object(), progress=False)


def test_new_strategies_by_name() -> None:
    assert repr(parse_strategy("block-masking:3,7")) == "BlockMasking(keep_last=3, block=7)"
    s = parse_strategy("summarize:2,80")
    assert isinstance(s, Summarize) and (s.keep_last, s.max_tokens) == (2, 80)
    assert isinstance(parse_strategy("observation-masking"), ObservationMasking)
