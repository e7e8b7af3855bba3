"""``run_task(model="local/...")``: a model this process serves for the run, and the
settings it refuses (an ``api_base`` beside it, the sandboxed loop that cannot reach it)."""

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


@pytest.mark.parametrize(
    "option, why",
    [({"api_base": "http://127.0.0.1:9/v1"}, "pass no api_base"), ({"sandbox": True}, "proxy")],
)
def test_a_local_model_refuses_what_it_cannot_honour(
    tmp_path: Path, option: dict[str, object], why: str
) -> None:
    from ctxnb.live import run_task, sample_task

    task = sample_task(tmp_path)
    with pytest.raises(ConfigError, match=why):
        run_task(tmp_path, task, model="local/smollm2", **option)  # type: ignore[arg-type]
