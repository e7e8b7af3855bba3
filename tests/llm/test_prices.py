"""Price tables and the dollars in replay results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from _paths import REPO, TESTS
from hypothesis import given
from hypothesis import strategies as st

from ctxnb._util.text import common_prefix_len
from ctxnb.errors import ConfigError, CtxnbError, NotFoundError
from ctxnb.llm.prices import (
    ModelPrice,
    PriceTable,
    UnpricedModelWarning,
    normalize_model,
    recorded_cost,
    resolve_prices,
)
from ctxnb.replay import load
from ctxnb.replay.runner import replay
from ctxnb.strategies.builtin import KeepAll, ObservationMasking

DJANGO = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


def test_the_shipped_table_is_dated_sourced_and_complete() -> None:
    t = PriceTable.default()
    assert t.as_of and "litellm" in t.source
    for p in t.models.values():
        assert p.cache_read < p.input <= p.cache_write
        assert p.output > p.input
        assert p.as_of == t.as_of
    # Routing prefixes name the same model.
    assert t.get("google/gemini-3-pro-preview") is t.get("gemini-3-pro-preview")
    assert t.get("openrouter/anthropic/claude-opus-4-6").model == "claude-opus-4-6"


def test_costs_with_and_without_caching() -> None:
    p = ModelPrice("m", input=2.0, cache_write=2.5, cache_read=0.2, output=10.0)
    assert p.cost(cache_read=1_000_000, new=1_000_000, output=1_000_000) == pytest.approx(12.7)
    assert p.cost(cache_read=1_000_000, new=1_000_000, output=1_000_000, caching=False) == (
        pytest.approx(14.0)
    )


def test_unknown_models_and_bad_tables_say_how_to_fix_them(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="with_prices"):
        PriceTable.default().get("no-such-model")
    bad = tmp_path / "prices.json"
    bad.write_text('{"models": {"x": {"input": 1}}}')
    with pytest.raises(ConfigError, match="cache_write"):
        PriceTable.from_file(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        PriceTable.from_file(bad)
    with pytest.raises(CtxnbError, match="non-negative"):
        PriceTable.default().with_prices(
            {"x": {"input": -1, "cache_write": 1, "cache_read": 1, "output": 1}}
        )


def test_the_prices_option_resolves_argument_then_environment_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = {
        "as_of": "2030-01-01",
        "source": "test",
        "models": {"m": {"input": 1, "cache_write": 1, "cache_read": 0.5, "output": 3}},
    }
    f = tmp_path / "p.json"
    f.write_text(json.dumps(mine))
    monkeypatch.setenv("CTXNB_PRICES", str(f))
    assert resolve_prices(None).as_of == "2030-01-01"
    assert resolve_prices(None).get("m").output == 3
    monkeypatch.delenv("CTXNB_PRICES")
    assert resolve_prices(None).as_of == PriceTable.default().as_of
    over = resolve_prices(
        {"claude-opus-4-6": {"input": 1, "cache_write": 1, "cache_read": 0, "output": 1}}
    )
    assert over.get("claude-opus-4-6").input == 1 and over.get("gpt-5").input == 1.25
    assert resolve_prices(mine).get("m").cache_read == 0.5
    assert resolve_prices(str(f)).source == "test"


@given(st.text(max_size=300), st.text(max_size=300), st.text(max_size=50))
def test_common_prefix_matches_the_reference(a: str, b: str, shared: str) -> None:
    import os.path

    for x, y in ((a, b), (shared + a, shared + b), (a, a), (a, a + b)):
        assert common_prefix_len(x, y) == len(os.path.commonprefix([x, y]))


def test_replay_prices_every_step_as_billed() -> None:
    t = load(DJANGO)
    df = replay(t, [KeepAll(), ObservationMasking(5)])
    price = PriceTable.default().get(t.metadata["model"])
    for r in df.sample(20, random_state=1).itertuples():
        out = 0 if pd.isna(r.completion_tokens) else r.completion_tokens
        assert r.cost_usd == pytest.approx(
            (
                r.cache_read_tokens * price.cache_read
                + r.new_tokens * price.cache_write
                + out * price.output
            )
            / 1e6
        )
        assert r.cost_usd_uncached == pytest.approx(
            (r.total_tokens * price.input + out * price.output) / 1e6
        )
    keep = df[df["strategy"] == "keep-all"]
    # The whole prompt is new at the first step and (most of it) cached afterwards.
    assert keep["cache_read_tokens"].iloc[0] == 0
    assert keep["cache_read_tokens"].iloc[1:].gt(0).all()
    assert keep["cost_usd"].sum() < keep["cost_usd_uncached"].sum()
    # The recorded output tokens are the same for every strategy.
    assert df.groupby("step")["completion_tokens"].nunique().max() == 1


def test_model_and_prices_options() -> None:
    t = load(DJANGO)
    unknown = t.model_copy(update={"metadata": {**t.metadata, "model": "in-house-7b"}})
    with pytest.warns(UnpricedModelWarning, match="in-house-7b"):
        df = replay(unknown, [KeepAll()])
    assert df["cost_usd"].isna().all() and df["cost_usd_uncached"].isna().all()
    with pytest.raises(NotFoundError, match="in-house-7b"):
        replay(unknown, [KeepAll()], model="in-house-7b")
    cheap = replay(
        unknown,
        [KeepAll()],
        model="in-house-7b",
        prices={
            "in-house-7b": {"input": 0.1, "cache_write": 0.1, "cache_read": 0.01, "output": 0.2}
        },
    )
    assert cheap["cost_usd"].gt(0).all()
    assert math.isclose(
        cheap["cost_usd_uncached"].sum(),
        (cheap["total_tokens"].sum() * 0.1 + cheap["completion_tokens"].fillna(0).sum() * 0.2)
        / 1e6,
    )


def test_doctests() -> None:
    import doctest

    import ctxnb.llm.prices

    assert doctest.testmod(ctxnb.llm.prices).failed == 0


MINI = TESTS / "data" / "trajectories" / "mini-swe-agent"
CLAUDE = TESTS / "data" / "trajectories" / "claude-code"


@pytest.mark.parametrize(
    "name",
    [
        "@google/gemini-3-pro-preview",  # 2 of the vendored mini-swe-agent runs say so
        "google/gemini-3-pro-preview",
        "openrouter/google/gemini-3-pro-preview",
        " gemini/gemini-3-pro-preview ",
        "vertex_ai/gemini-3-pro-preview",
    ],
)
def test_model_names_are_normalised_to_the_table_s_name(name: str) -> None:
    assert PriceTable.default().get(name).model == "gemini-3-pro-preview"
    assert normalize_model(name) == "gemini-3-pro-preview"


def test_dated_releases_cost_what_their_model_costs() -> None:
    t = PriceTable.default()
    assert t.get("claude-sonnet-4-5-20250929") == t.get("claude-sonnet-4-5")
    assert t.get("vertex_ai/claude-sonnet-4-5@20250929") == t.get("claude-sonnet-4-5")
    assert t.find("claude-sonnet-4-5-turbo") is None  # only a date is dropped


def test_every_vendored_mini_swe_agent_run_gets_a_price() -> None:
    files = sorted(MINI.glob("*.traj.json"))
    models = {load(f).metadata["model"] for f in files}
    assert "@google/gemini-3-pro-preview" in models  # the case that used to cost $0
    assert all(PriceTable.default().find(m) is not None for m in models)


def _unknown_run() -> pd.DataFrame:
    t = load(DJANGO)
    known = replay(t, [KeepAll()])
    unknown = t.model_copy(
        update={"id": "other", "metadata": {**t.metadata, "model": "in-house-7b"}}
    )
    with pytest.warns(UnpricedModelWarning, match="in-house-7b.*NaN"):
        other = replay(unknown, [KeepAll()])
    return pd.concat([known, other], ignore_index=True)


def test_summarize_never_counts_an_unpriced_run_as_zero_dollars() -> None:
    from ctxnb.replay.analysis import summarize

    df = _unknown_run()
    s = summarize(df).loc["keep-all"]
    assert s["runs"] == 2 and s["unpriced_runs"] == 1
    assert math.isnan(s["cost_usd"]) and math.isnan(s["cost_usd_uncached"])
    known = df[df["trajectory"] != "other"]
    assert s["cost_usd_priced"] == pytest.approx(known["cost_usd"].sum())
    assert s["cost_usd_priced"] > 0
    # All priced: the same number, and nothing unpriced.
    s2 = summarize(known).loc["keep-all"]
    assert s2["unpriced_runs"] == 0 and s2["cost_usd"] == pytest.approx(s2["cost_usd_priced"])


def test_an_unknown_summarizer_model_is_not_free() -> None:
    from ctxnb.replay.analysis import summarize

    df = replay(load(DJANGO), [KeepAll()])
    df.loc[df.index[3], "strategy_cost_usd"] = float("nan")  # one call with no price
    s = summarize(df).loc["keep-all"]
    assert s["unpriced_runs"] == 1 and math.isnan(s["cost_usd"])


def test_call_usage_for_an_unknown_model_warns_and_is_nan() -> None:
    from ctxnb.llm.calls import call_usage

    with pytest.warns(UnpricedModelWarning, match="my-llm"):
        u = call_usage({"prompt_tokens": 10, "completion_tokens": 1}, "my-llm", PriceTable())
    assert math.isnan(u.cost_usd) and u.prompt_tokens == 10


def test_the_frame_carries_the_bill_each_recorded_call_states() -> None:
    # mini-swe-agent via OpenRouter records each call's cost: the frame carries it as is.
    f = MINI / "astropy__astropy-13453.traj.json"
    raw = json.loads(f.read_text())
    billed = [
        m["extra"]["response"]["usage"]["cost"]
        for m in raw["messages"]
        if m["role"] == "assistant" and "usage" in m.get("extra", {}).get("response", {})
    ]
    df = replay(load(f), [KeepAll(), ObservationMasking(5)])
    keep = df[df["strategy"] == "keep-all"]
    assert keep["recorded_cost_usd"].sum() == pytest.approx(sum(billed))
    # The bill is the run's, whatever the strategy.
    mask = df[df["strategy"] != "keep-all"]
    assert list(mask["recorded_cost_usd"]) == list(keep["recorded_cost_usd"])
    assert keep["recorded_cached_tokens"].notna().all()


def test_claude_code_s_one_hour_cache_writes_are_billed_at_twice_the_input_price() -> None:
    from ctxnb.replay.model import Usage

    p = PriceTable.default().get("claude-sonnet-4-5")
    u = Usage(
        prompt_tokens=1000, completion_tokens=10, cached_tokens=600, cache_write_1h_tokens=300
    )
    # 600 reads, 300 one-hour writes, 100 plain input, 10 output.
    assert recorded_cost(p, u) == pytest.approx(
        (600 * p.cache_read + 300 * 2 * p.input + 100 * p.input + 10 * p.output) / 1e6
    )
    t = load(CLAUDE / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    first = next(s.usage for s in t.steps if s.usage is not None)
    assert first.cache_write_1h_tokens == 8037 and first.cached_tokens == 17842
    assert first.prompt_tokens == 3 + 8037 + 17842
    assert recorded_cost(None, first) != recorded_cost(None, first)  # no price, no usage cost


def test_a_cache_hit_rate_models_an_implicit_cache_next_to_the_recorded_one() -> None:
    from ctxnb.replay.analysis import summarize

    run = load(MINI / "astropy__astropy-13453.traj.json")
    ideal = replay(run, [KeepAll()])
    implicit = replay(run, [KeepAll()], cache_hit_rate=0.8)
    expected = [round(n * 0.8) for n in ideal["cache_read_tokens"]]
    assert list(implicit["cache_read_tokens"]) == expected
    assert (implicit["new_tokens"] + implicit["cache_read_tokens"]).equals(ideal["total_tokens"])
    # Fewer tokens from the cache, more billed as new: the modelled bill goes up.
    assert implicit["cost_usd"].sum() > ideal["cost_usd"].sum()
    assert list(replay(run, [KeepAll()], cache_hit_rate=0.0)["cache_read_tokens"]) == [0] * len(
        ideal
    )
    table = summarize(implicit)
    recorded = implicit["recorded_cached_tokens"].sum() / implicit["prompt_tokens"].sum()
    assert table.loc["keep-all", "recorded_cache_share"] == pytest.approx(recorded, abs=1e-4)
    assert (
        table.loc["keep-all", "cache_read_share"]
        < summarize(ideal).loc["keep-all", "cache_read_share"]
    )
    for bad in (-0.1, 1.5, float("nan"), "0.8", True):
        with pytest.raises(ValueError, match="cache_hit_rate"):
            replay(run, [KeepAll()], cache_hit_rate=bad)  # type: ignore[arg-type]
