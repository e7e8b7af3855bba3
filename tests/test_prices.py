"""Price tables and the dollars in replay results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxnb._text import common_prefix_len
from ctxnb.errors import ConfigError, CtxnbError, NotFoundError
from ctxnb.prices import ModelPrice, PriceTable, resolve_prices
from ctxnb.replay import load
from ctxnb.replay.replay import replay
from ctxnb.strategies import KeepAll, ObservationMasking

DJANGO = (
    Path(__file__).resolve().parent.parent
    / "data"
    / "trajectories"
    / "django__django-13670.traj.json"
)


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

    import ctxnb.prices

    assert doctest.testmod(ctxnb.prices).failed == 0
