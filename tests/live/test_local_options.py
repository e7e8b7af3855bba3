"""``run_task(model="local/...")`` and the protocol doors' ``--model local/...``: a model
this process serves, and the settings it refuses (an ``api_base`` beside it, a model file
that is not there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb.errors import ConfigError
from ctxnb.live.local import LocalModelServer

pytestmark = pytest.mark.usefixtures("live_deps")


def test_local_names_resolve_to_the_packaged_model_or_a_gguf_path() -> None:
    assert LocalModelServer.for_model("local/smollm2").model_path is None
    server = LocalModelServer.for_model("local//models/tiny-chat.gguf")
    assert server.model_path == Path("/models/tiny-chat.gguf") and server.name == "tiny-chat"
    for bad in ("local/", "local/gpt-5", "local//etc/passwd", "smollm2"):
        with pytest.raises(ConfigError, match="local/smollm2"):
            LocalModelServer.for_model(bad)


def test_a_local_model_is_served_for_the_run(tmp_path: Path) -> None:
    from ctxnb.live import run_task, sample_task

    task = sample_task(tmp_path / "w")
    missing = tmp_path / "no-such-model.gguf"
    # run_task routes the name to a LocalModelServer, which checks the file it would load.
    with pytest.raises(ConfigError, match="no-such-model.gguf does not exist"):
        run_task(tmp_path / "w", task, model=f"local/{missing}")
    assert not (tmp_path / "w" / ".orchestration").exists()  # refused before any run


def test_a_local_model_refuses_an_api_base_beside_it(tmp_path: Path) -> None:
    from ctxnb.live import run_task, sample_task

    task = sample_task(tmp_path)
    with pytest.raises(ConfigError, match="pass no api_base"):
        run_task(tmp_path, task, model="local/smollm2", api_base="http://127.0.0.1:9/v1")


@pytest.mark.parametrize("door", ["acp", "a2a"])
@pytest.mark.parametrize(
    "flags, why",
    [
        (["--model", "local/{missing}"], "no-such-model.gguf does not exist"),
        (["--model", "local/smollm2", "--api-base", "http://127.0.0.1:9/v1"], "no api_base"),
    ],
)
def test_the_protocol_doors_resolve_a_local_model_as_run_task_does(
    tmp_path: Path, door: str, flags: list[str], why: str
) -> None:
    # The real `ctxnb acp|a2a serve` process: a local name goes through serve_local
    # before anything is served, so a model it cannot serve stops the server with the
    # reason (it used to serve, and fail each prompt on an unknown litellm provider).
    import os
    import subprocess
    import sys

    from _needs import has_module, require
    from _paths import REPO

    require(has_module(door), f"the {door.upper()} SDK (ctxnb[{door}])")
    missing = tmp_path / "no-such-model.gguf"
    args = [a.format(missing=missing) for a in flags]
    cmd = [sys.executable, "-m", "ctxnb", door, "serve", str(tmp_path), *args]
    if door == "a2a":
        cmd += ["--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1, out.stderr
    assert why in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""  # nothing reached the protocol stream
