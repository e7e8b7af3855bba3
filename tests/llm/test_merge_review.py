"""A litellm model as the review backend of merge proposals, over real HTTP on 127.0.0.1
(the scripted model server): what it is sent, and what of its answer is kept."""

from __future__ import annotations

import json
import secrets
import string
from pathlib import Path
from typing import Any

import pytest
from _tasks import scripted_prices

from ctxnb import Workspace
from ctxnb._util.merge3 import merge3
from ctxnb.live.scripted import ScriptedModelServer
from ctxnb.llm.merge_review import LiteLLMMergeReviewer
from ctxnb.tools.merging import review_request

PATH = "inventory/models.py"


@pytest.fixture
def stale(sample_ws: Path, live_deps: None) -> tuple[Any, str, str, str]:
    """An agent's edit of the reorder level (10) and a person's (7) of the same line; a
    generated token sits in the line above. Returns (tools, base sha, ours, token)."""
    token = "ghp_" + "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(36)
    )
    text = (sample_ws / PATH).read_text()
    text = text.replace("    sku: str\n", f'    sku: str\n    api_token = "{token}"\n', 1)
    (sample_ws / PATH).write_text(text)
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"), caller="test")
    base = tools.read_file(PATH).sha256
    (sample_ws / PATH).write_text(text.replace("reorder_level: int = 5", "reorder_level: int = 7"))
    return tools, base, text.replace("reorder_level: int = 5", "reorder_level: int = 10"), token


def _conflict_lines(root: Path, tools: Any, ours: str) -> tuple[int, int]:
    theirs = (root / PATH).read_text()
    base = theirs.replace("reorder_level: int = 7", "reorder_level: int = 5")
    c = review_request(PATH, merge3(base, ours, theirs))["conflicts"][0]
    return c["start_line"], c["end_line"]


def test_the_model_resolves_the_conflict_and_sees_only_it_redacted(
    sample_ws: Path, stale: tuple[Any, str, str, str]
) -> None:
    tools, base, ours, token = stale
    start, end = _conflict_lines(sample_ws, tools, ours)
    answer = {
        "resolutions": [
            {"path": PATH, "start_line": start, "end_line": end,
             "text": "    reorder_level: int = 10\n"}
        ]
    }  # fmt: skip
    script = [{"content": "```json\n" + json.dumps(answer) + "\n```", "commands": []}]
    with ScriptedModelServer(script) as server:
        reviewer = LiteLLMMergeReviewer(
            "openai/ctxnb-scripted", api_base=server.url, api_key="unused", prices=scripted_prices()
        )
        p = tools.propose_merge(PATH, ours, base_sha256=base, reviewer=reviewer)
        (body,) = server.requests
    assert p.ready and p.resolved_by == "openai/ctxnb-scripted", p.review_refused
    wire = json.dumps(body)
    assert token not in wire and "[REDACTED:" in wire
    assert "reorder_level: int = 7" in wire and "reorder_level: int = 10" in wire
    assert "stock_level" not in wire  # the rest of the file is not sent
    assert tools.apply_merge(p.id).success
    written = (sample_ws / PATH).read_text()
    assert "reorder_level: int = 10\n" in written and token in written  # the secret kept


def test_a_model_answer_reaching_outside_the_conflict_is_refused(
    sample_ws: Path, stale: tuple[Any, str, str, str]
) -> None:
    tools, base, ours, _ = stale
    start, end = _conflict_lines(sample_ws, tools, ours)
    answer = {
        "resolutions": [
            {"path": PATH, "start_line": start - 2, "end_line": end,
             "text": "    unit_price_cents: int = 0\n    reorder_level: int = 10\n"}
        ]
    }  # fmt: skip
    with ScriptedModelServer([{"content": json.dumps(answer), "commands": []}]) as server:
        reviewer = LiteLLMMergeReviewer(
            "openai/ctxnb-scripted", api_base=server.url, api_key="unused", prices=scripted_prices()
        )
        p = tools.propose_merge(PATH, ours, base_sha256=base, reviewer=reviewer)
    assert not p.ready and "not a conflict's" in (p.review_refused or "")
    out = tools.dispatch("apply_merge", {"proposal_id": p.id})
    assert out["error_code"] == "MERGE_UNRESOLVED"
    assert "reorder_level: int = 7" in (sample_ws / PATH).read_text()
