"""Replaying recorded runs under context strategies: replay, fidelity, grid, analysis, CLI."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from _needs import has_module, require
from _paths import REPO

from ctxnb.context import context_diff
from ctxnb.replay import Action, FileTouch, Step, Trajectory, load
from ctxnb.replay.analysis import (
    compare_at,
    plot_cost_vs_loss,
    plot_tokens_per_step,
    summarize,
)
from ctxnb.replay.experiment import parse_strategy, run_experiment
from ctxnb.replay.fidelity import check_fidelity, fidelity_from_frame
from ctxnb.replay.runner import COLUMNS, replay, replay_contexts, strategy_labels
from ctxnb.strategies.builtin import (
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
    Selection,
    StrategyInput,
)

DATA = REPO / "data" / "trajectories"
MINI = sorted(DATA.glob("*.traj.json"))
DJANGO = DATA / "django__django-13670.traj.json"


@pytest.fixture(scope="module")
def django() -> Trajectory:
    return load(DJANGO)


def _read(i: int, path: str, content: str, **kw: int) -> Step:
    return Step(
        index=i,
        action=Action(tool="read", args={"path": path}),
        observation=content,
        files=[FileTouch(path=path, op="read", content=content, **kw)],
    )


@pytest.fixture
def small() -> Trajectory:
    """A run whose losses are known by hand (see the test that uses it)."""
    return Trajectory(
        id="small",
        source_format="ctxnb",
        task="Fix a.py",
        system_prompt="You fix bugs.",
        steps=[
            _read(0, "a.py", "v1\n"),
            Step(
                index=1,
                action=Action(tool="edit", args={"path": "a.py"}),
                observation="",
                files=[FileTouch(path="a.py", op="edit", content="v2\n")],
            ),
            Step(index=2, action=Action(tool="bash", args={"command": "ls"}), observation="a.py"),
            _read(3, "a.py", "v2\n"),
            _read(4, "b.py", "l2\nl3\n", start_line=2, end_line=3),
            _read(5, "a.py", "v2\n"),
        ],
    )


# -- replay ---------------------------------------------------------------------------------


def test_rows_are_steps_times_strategies(django: Trajectory) -> None:
    strategies = [KeepAll(), ObservationMasking(5), RecencyWindow(4), MetadataOnly()]
    df = replay(django, strategies)
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == len(django.steps) * len(strategies)
    assert set(df["strategy"]) == {
        "keep-all",
        "observation-masking",
        "recency-window",
        "metadata-only",
    }
    assert df.groupby("strategy")["step"].apply(list).map(len).eq(len(django.steps)).all()
    # Sections add up to the total, and the recorded prompt sizes come along.
    parts = df[["tokens_system", "tokens_metadata", "tokens_active", "tokens_chat"]].sum(axis=1)
    assert (parts == df["total_tokens"]).all()
    assert df["prompt_tokens"].notna().all()


def test_replay_is_deterministic(django: Trajectory) -> None:
    strategies = [KeepAll(), ObservationMasking(3), MetadataOnly()]
    a = replay(django, strategies)
    b = replay(load(DJANGO), strategies)
    pd.testing.assert_frame_equal(a, b)
    assert a["context_hash"].nunique() > len(django.steps)  # hashes really differ by step


def test_observation_masking_reads_fewer_tokens(django: Trajectory) -> None:
    df = replay(django, [KeepAll(), ObservationMasking(3)])
    totals = df.groupby("strategy")["total_tokens"].sum()
    assert totals["observation-masking"] < totals["keep-all"]
    late = df[df["step"] == df["step"].max()].set_index("strategy")
    assert late.loc["observation-masking", "items_masked"] > 0
    assert late.loc["keep-all", "items_masked"] == 0


def test_re_reads_and_stale_reads_are_counted(small: Trajectory) -> None:
    # File objects shown beside the outputs (files="active"), as ctxnb's own sessions do.
    df = replay(small, [KeepAll(), MetadataOnly(), ObservationMasking(0)], files="active")
    by = df.set_index(["strategy", "step"])
    # Keep-all: the read at step 0 shows a.py v1; a.py changes at step 1, so from step 2
    # on that tool output is stale (steps 2, 3, 4, 5). The read at step 3 is current.
    assert by.loc["keep-all", "stale_reads"].tolist() == [0, 0, 1, 1, 1, 1]
    assert by.loc["keep-all", "re_reads"].sum() == 0
    # Metadata only: a.py is read again at steps 3 and 5 with nothing of it in context;
    # b.py at step 4 is a first read, not a re-read.
    assert by.loc["metadata-only", "re_reads"].tolist() == [0, 0, 0, 1, 0, 1]
    assert by.loc["metadata-only", "stale_reads"].sum() == 0
    # Masking every tool output keeps the file objects whole: nothing lost.
    assert by.loc["observation-masking", "re_reads"].sum() == 0
    # ... unless files are only in the pool, as for a shell-only agent (the default).
    pool = replay(small, [ObservationMasking(0)])
    assert pool["re_reads"].tolist() == [0, 0, 0, 1, 0, 1]


def test_partial_reads_and_edits_make_file_versions(small: Trajectory) -> None:
    last = None
    for step, _, ctx, _ in replay_contexts(small, [KeepAll()], files="active"):
        last = ctx if step.index == 5 else last
    assert last is not None
    files = {it.label: it.text for it in last.items if it.type == "file"}
    assert "v2" in files["a.py"] and "v1" not in files["a.py"]
    assert "[… lines 1-1 not seen …]\nl2\nl3\n" in files["b.py"]


def test_range_read_splices_into_known_content() -> None:
    t = Trajectory(
        id="splice",
        source_format="ctxnb",
        steps=[
            _read(0, "c.py", "1\n2\n3\n4\n"),
            _read(1, "c.py", "TWO\nTHREE\n", start_line=2, end_line=3),
            Step(index=2, action=Action(tool="submit")),
        ],
    )
    *_, (_, _, ctx, _) = replay_contexts(t, [KeepAll()], files="active")
    text = next(it.text for it in ctx.items if it.type == "file")
    assert "1\nTWO\nTHREE\n4\n" in text


def test_strategy_labels_tell_equal_names_apart() -> None:
    assert strategy_labels([ObservationMasking(3), ObservationMasking(8)]) == [
        "observation-masking:3",
        "observation-masking:8",
    ]
    with pytest.raises(ValueError, match="more than once"):
        strategy_labels([KeepAll(), KeepAll()])


# -- fidelity -------------------------------------------------------------------------------


def test_keep_all_tracks_recorded_prompt_tokens() -> None:
    report = check_fidelity(MINI)
    assert report.trajectories == 3
    assert report.steps >= 60
    assert report.pearson >= 0.98
    assert report.pearson_per_run_median >= 0.99
    assert 0.8 <= report.median_ratio_raw <= 1.3
    assert 0.95 <= report.median_ratio_calibrated <= 1.05
    assert report.median_abs_error_calibrated < 0.1
    assert "pearson" in str(report)


def test_fidelity_needs_recorded_usage(small: Trajectory) -> None:
    with pytest.raises(ValueError, match="prompt_tokens"):
        fidelity_from_frame(replay(small, [KeepAll()]))


# -- the grid -------------------------------------------------------------------------------


class KeepNewestTwo:
    """A custom strategy in a few lines: the two newest items in full."""

    name = "newest-two"

    def select(self, inp: StrategyInput) -> Selection:
        return Selection.keep(inp, [i.id for i in sorted(inp.items, key=lambda i: i.seq)[-2:]])


def _duck(out: Path) -> pd.DataFrame:
    require(has_module("duckdb"), "duckdb (the dev extra)")
    import duckdb

    return duckdb.sql(
        f"SELECT strategy, count(*) AS n, sum(total_tokens) AS tokens "
        f"FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true) "
        "GROUP BY strategy ORDER BY strategy"
    ).df()


def test_grid_with_threads_writes_partitioned_parquet(tmp_path: Path) -> None:
    paths = MINI[:2]
    strategies = [KeepAll(), ObservationMasking(3), KeepNewestTwo()]
    with ThreadPoolExecutor(2) as ex:
        df = run_experiment(paths, strategies, executor=ex, out_dir=tmp_path, progress=False)
    steps = sum(len(load(p).steps) for p in paths)
    assert len(df) == steps * 3
    assert list(df["trajectory"].unique()) == [load(p).id for p in paths]  # input order
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "strategy=keep-all",
        "strategy=newest-two",
        "strategy=observation-masking",
    ]
    back = _duck(tmp_path)
    assert back["strategy"].tolist() == ["keep-all", "newest-two", "observation-masking"]
    assert back["n"].tolist() == [steps] * 3
    expected = df.groupby("strategy")["total_tokens"].sum()
    assert back.set_index("strategy")["tokens"].astype(int).to_dict() == expected.to_dict()
    totals = df.groupby("strategy")["total_tokens"].sum()
    assert totals["newest-two"] < totals["keep-all"]


def test_grid_with_the_default_process_pool(tmp_path: Path) -> None:
    paths = MINI[:2]
    strategies = [KeepAll(), ObservationMasking(3)]
    df = run_experiment(paths, strategies, out_dir=tmp_path, progress=False)
    serial = pd.concat([replay(load(p), strategies) for p in paths], ignore_index=True)
    pd.testing.assert_frame_equal(df, serial)  # same rows and hashes as in-process
    assert _duck(tmp_path)["strategy"].tolist() == ["keep-all", "observation-masking"]


def test_runs_sharing_an_id_are_kept_apart_with_a_warning(tmp_path: Path) -> None:
    from ctxnb.replay.analysis import summarize
    from ctxnb.replay.experiment import DuplicateRunWarning

    one = MINI[0]
    copy = tmp_path / "copy.traj.json"
    copy.write_bytes(one.read_bytes())
    with ThreadPoolExecutor(1) as ex, pytest.warns(DuplicateRunWarning, match="2 runs share"):
        df = run_experiment([one, MINI[1], copy], [KeepAll()], executor=ex, progress=False)
    tid, steps = load(one).id, len(load(one).steps)
    assert list(df["trajectory"].unique()) == [tid, load(MINI[1]).id, f"{tid}#2"]
    assert (df["trajectory"] == f"{tid}#2").sum() == steps  # not merged into 2x the steps
    a = df[df["trajectory"] == tid].drop(columns="trajectory").reset_index(drop=True)
    b = df[df["trajectory"] == f"{tid}#2"].drop(columns="trajectory").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert int(summarize(df).loc["keep-all", "runs"]) == 3


def test_parse_strategy() -> None:
    assert isinstance(parse_strategy("keep-all"), KeepAll)
    assert parse_strategy("observation-masking:7").keep_last == 7  # type: ignore[attr-defined]
    assert parse_strategy("recency-window").n == 10  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown strategy"):
        parse_strategy("summarize-everything")
    with pytest.raises(ValueError, match="integers"):
        parse_strategy("recency-window:ten")
    with pytest.raises(ValueError, match="at most 0"):
        parse_strategy("keep-all:3")


# -- analysis -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid(django: Trajectory) -> pd.DataFrame:
    return replay(django, [KeepAll(), ObservationMasking(3), MetadataOnly()])


def test_summarize_relative_to_keep_all(grid: pd.DataFrame) -> None:
    s = summarize(grid, prices={"input_per_mtok": 2.0})
    assert s.index.tolist() == ["keep-all", "observation-masking", "metadata-only"]
    assert s.loc["keep-all", "tokens_rel"] == 1.0
    assert 0 < s.loc["observation-masking", "tokens_rel"] < 1
    assert s.loc["metadata-only", "cost"] == pytest.approx(
        grid[grid.strategy == "metadata-only"]["total_tokens"].sum() * 2.0 / 1e6
    )
    assert (
        s.loc["keep-all", "peak_tokens"] == grid[grid.strategy == "keep-all"]["total_tokens"].max()
    )
    with pytest.raises(ValueError, match="input_per_mtok"):
        summarize(grid, prices={"output": 1.0})


def test_plots_return_axes(grid: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = plot_tokens_per_step(grid, "django__django-13670")
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["keep-all", "observation-masking", "metadata-only", "recorded prompt"]
    ax2 = plot_cost_vs_loss(summarize(grid))
    # one point per strategy, each its own legend entry
    assert sum(len(c.get_offsets()) for c in ax2.collections) == 3
    assert [t.get_text() for t in ax2.get_legend().get_texts()] == labels[:3]
    with pytest.raises(ValueError, match="no rows"):
        plot_tokens_per_step(grid, "nope")
    plt.close("all")


def test_compare_at_and_diff(django: Trajectory) -> None:
    a, b = compare_at(django, KeepAll(), ObservationMasking(2), step=12)
    assert a.strategy["name"] == "keep-all" and b.strategy["name"] == "observation-masking"
    d = context_diff(a, b)
    assert d["changed"] and not d["entered"] and not d["left"]
    assert all(it.masked for it in b.items if it.id in d["changed"])
    # The same step of a full replay has the same context.
    row = replay(django, [KeepAll()]).set_index("step").loc[12]
    assert row["context_hash"] == a.hash
    same = compare_at(django, KeepAll(), KeepAll(), step=3)
    assert context_diff(*same) == {"entered": [], "left": [], "changed": []}
    with pytest.raises(IndexError):
        compare_at(django, KeepAll(), KeepAll(), step=999)


# -- CLI ------------------------------------------------------------------------------------


def test_cli_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ctxnb.cli.app import main

    out = tmp_path / "out"
    code = main(
        [
            "replay",
            str(DJANGO),
            "--strategy",
            "keep-all",
            "--strategy",
            "observation-masking:3",
            "--workers",
            "1",
            "--price",
            "1.25",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "keep-all" in text and "observation-masking" in text and "cost" in text
    assert (out / "strategy=keep-all").is_dir()
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(DJANGO), "--strategy", "nonsense"])
    assert exc.value.code == 2
    assert main(["replay", str(tmp_path / "empty-dir-does-not-exist"), "--workers", "1"]) == 1


def test_cli_replay_table_fits_100_columns_and_warns_about_unpriced_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped runs under the six default strategies: one of them has no price."""
    from ctxnb.cli.app import main

    assert main(["replay", str(DATA), "--workers", "1", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 100, max(lines, key=len)
    assert len([ln for ln in lines if ln.startswith(("keep-all", "metadata-only"))]) == 2
    assert "NaN" not in out and "cost_usd" in out  # the priced runs' dollars, never NaN
    assert "warning: 1 of 5 run(s) have no price" in " ".join(err.split())
    assert "--price" in err and max(len(ln) for ln in err.splitlines()) <= 100
    # A flat price adds its column, and the table still fits.
    assert main(["replay", str(DATA), "--workers", "1", "--no-progress", "--price", "3"]) == 0
    out, _ = capsys.readouterr()
    assert "cost_flat" in out and max(len(ln) for ln in out.splitlines()) <= 100
    # Every column, under summarize()'s own names, with --wide.
    assert main(["replay", str(DATA), "--workers", "1", "--no-progress", "--wide"]) == 0
    out, _ = capsys.readouterr()
    assert "unpriced_runs" in out and "recorded_cost_usd" in out
    assert max(len(ln) for ln in out.splitlines()) > 100


def test_on_context_sees_every_context_of_the_frame_once(small: Trajectory) -> None:
    seen: list[tuple[int, str, str]] = []
    df = replay(
        small,
        [KeepAll(), ObservationMasking(1)],
        on_context=lambda step, label, ctx: seen.append((step.index, label, ctx.hash)),
    )
    # One call per row, in the frame's order, with the context each row measured.
    assert len(seen) == len(df) > 2
    assert seen == list(zip(df["step"], df["strategy"], df["context_hash"], strict=True))
    # The same contexts as replay_contexts gives on its own.
    again = [
        (s.index, label, c.hash)
        for s, label, c, _ in replay_contexts(small, [KeepAll(), ObservationMasking(1)])
    ]
    assert again == seen
