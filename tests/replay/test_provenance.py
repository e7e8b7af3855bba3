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


def test_the_version_comes_from_the_package_metadata_and_the_commit_from_the_checkout() -> None:
    import subprocess
    from importlib.metadata import version

    from ctxnb.replay.provenance import ctxnb_commit, provenance

    p = provenance(strategies=[], labels=[], prices=None, inputs={}, token_counter=None)
    assert p["ctxnb_version"] == version("ctxnb")
    # The tests run from a checkout: the record names its commit, and whether it had
    # uncommitted changes, as git itself says.
    here = Path(__file__).parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True).stdout

    assert p["ctxnb_commit"] == git("rev-parse", "HEAD").strip() and len(p["ctxnb_commit"]) == 40
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    assert p["ctxnb_dirty"] is dirty and ctxnb_commit() == (p["ctxnb_commit"], dirty)


def test_a_ctxnb_inside_another_repository_names_no_commit_of_it(tmp_path: Path) -> None:
    # An installed copy under some other project's git folder (a vendored site-packages)
    # is not a checkout of ctxnb: that project's commit would be a false provenance.
    import shutil
    import subprocess
    import sys

    import ctxnb

    other = tmp_path / "project"
    shutil.copytree(
        Path(ctxnb.__file__).parent,
        other / "vendor" / "ctxnb",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(other), "-c", "user.name=t", "-c", "user.email=t@example.com",
         "commit", "-qm", "vendored"],
        check=True,
    )  # fmt: skip
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from ctxnb.replay.provenance import ctxnb_commit; print(ctxnb_commit())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(other / "vendor")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "(None, None)"


def test_settings_keep_credentials_out_of_the_record() -> None:
    import secrets

    from ctxnb.replay.provenance import redact_settings

    key = "sk-ant-api03-" + secrets.token_urlsafe(40)  # generated, never a real key
    settings = {
        "api_key": key,
        "api_base": f"https://user:{secrets.token_hex(8)}@proxy.example:8443/v1",
        "model_kwargs": {
            "temperature": 0.2,
            "extra_headers": {"Authorization": f"Bearer {key}"},
            "stop": [f"note {key}"],
        },
        "budget": None,
        "step_limit": 7,
    }
    out = redact_settings(settings)
    assert key not in json.dumps(out) and "user:" not in out["api_base"]
    assert out["api_key"] == "[set]" and out["model_kwargs"]["extra_headers"] == "[set]"
    assert out["api_base"] == "https://proxy.example:8443/v1"
    assert out["model_kwargs"]["temperature"] == 0.2 and out["step_limit"] == 7
    assert out["budget"] is None and redact_settings({"api_key": None}) == {"api_key": None}
