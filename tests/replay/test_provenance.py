"""Provenance of replay frames: in df.attrs and in every Parquet file written from them."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
from _paths import TESTS

from ctxnb.llm.prices import PriceTable
from ctxnb.replay import run_experiment
from ctxnb.replay.experiment import write_parquet
from ctxnb.strategies.builtin import BlockMasking, KeepAll

MINI = TESTS / "data" / "trajectories" / "mini-swe-agent"


def test_a_replay_frame_names_its_inputs_prices_strategies_and_counter(tmp_path: Path) -> None:
    files = sorted(MINI.glob("*.traj.json"))[:2]
    df = run_experiment(
        files,
        [KeepAll(), BlockMasking(3, 4)],
        executor=ThreadPoolExecutor(1),
        progress=False,
        token_counter="chars4",
    )
    prov = df.attrs["ctxnb"]
    # The inputs are the files' own SHA-256, computed here independently.
    assert prov["inputs"] == {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    table = PriceTable.default()
    assert prov["price_table_as_of"] == table.as_of and prov["price_table_hash"] == table.hash
    assert prov["strategies"][1] == {
        "label": "block-masking",
        "name": "block-masking",
        "class": "BlockMasking",
        "params": {"keep_last": 3, "block": 4},
    }
    assert prov["token_counter"] == "chars4" and prov["ctxnb_version"]
    # Another price makes another hash.
    cheaper = table.with_prices(
        {"gpt-5": {"input": 1, "cache_write": 1, "cache_read": 0.1, "output": 1}}
    )
    assert cheaper.hash != table.hash
    out = write_parquet(df, tmp_path / "res")
    for f in sorted(out.rglob("*.parquet")):
        assert json.loads(pq.read_schema(f).metadata[b"ctxnb"]) == json.loads(json.dumps(prov))


def test_the_cache_hit_rate_reaches_every_worker_and_the_provenance() -> None:
    from ctxnb.replay.runner import replay

    files = sorted(MINI.glob("*.traj.json"))[:1]
    df = run_experiment(
        files,
        [KeepAll()],
        executor=ThreadPoolExecutor(1),
        progress=False,
        cache_hit_rate=0.5,
    )
    assert df.attrs["ctxnb"]["cache_hit_rate"] == 0.5
    alone = replay(files[0], [KeepAll()], cache_hit_rate=0.5)
    assert list(df["cache_read_tokens"]) == list(alone["cache_read_tokens"])
