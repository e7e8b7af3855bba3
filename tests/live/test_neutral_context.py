"""Under a live run the model hears of its own tool only: no ctxnb API name reaches it.

The model of a live run is offered one tool, ``bash``. Whatever ctxnb does around its
commands (the harness selecting the intent, the governed ``run_command``, refusals,
masking) is ctxnb's business: the request bodies a real HTTP endpoint receives must not
name any of ctxnb's tools, while the audit, the trace and the session keep those names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxnb.llm.prices import PriceTable
from ctxnb.strategies.builtin import KeepAll, ObservationMasking

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("live_deps")]


def _priced() -> PriceTable:
    return PriceTable.default().with_prices(
        {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
    )


def _api_names(tools: object) -> list[str]:
    # Every tool a governed workspace dispatches, asked of the tools themselves (a tool
    # added later is covered), less the two that are ordinary words of any output.
    names = tools.tool_names()  # type: ignore[attr-defined]
    assert "run_command" in names and "select_active_intent" in names
    return [n for n in names if "_" in n] + ["intent_context"]


@pytest.mark.parametrize("strategy", [KeepAll(), ObservationMasking(1)], ids=lambda s: s.name)
def test_no_request_the_model_endpoint_receives_names_ctxnb_s_api(
    tmp_path: Path, strategy: object
) -> None:
    from ctxnb import Workspace
    from ctxnb.live import ScriptedModelServer, run_task, sample_task

    task = sample_task(tmp_path)
    # A README and a manifest, which a new notebook or MCP session would pin excerpts
    # of (recorded as ctxnb's `get_excerpt` calls): the live model must hear of neither.
    (tmp_path / "README.md").write_text("# calc\n\nSUMMATION-ENGINE-README for adding.\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "calc-manifest-7"\n')
    # A run that meets every path ctxnb takes: a plain read, a failing test run, a
    # destructive command refused for want of an approver, an edit of a test file the
    # sandbox drops, the fix, and the submission.
    script = [
        {"content": "Look first.", "commands": ["cat calc.py test_calc.py"]},
        {"content": "Run the tests.", "commands": ["python -m unittest -q"]},
        {"content": "Start over.", "commands": ["rm -rf calc.py"]},
        {"content": "Loosen the test.", "commands": ["sed -i 's/5)/-1)/' test_calc.py"]},
        {"content": "Fix it.", "commands": ["sed -i 's/return a - b/return a + b/' calc.py"]},
        {"content": "Check.", "commands": ["python -m unittest -q"]},
    ]
    with ScriptedModelServer(script) as server:
        result = run_task(
            tmp_path, task, strategy=strategy, prices=_priced(), retries=1, **server.model_args
        )
    assert result.exit_status == "Submitted" and len(server.requests) == len(script) + 1
    ws = Workspace.open(tmp_path)
    try:
        session = ws.session(result.trajectory.metadata["session_id"])
        names = _api_names(ws.tools(session))
        records = [session.get(i) for i in session.session_index]
        audit = ws.tools(session).audit()
    finally:
        ws.close()
    pattern = re.compile("|".join(re.escape(n) for n in names))
    for n, body in enumerate(server.requests):
        text = json.dumps(body)
        found = pattern.findall(text)
        assert not found, f"request {n} names {sorted(set(found))}"
        assert "SUMMATION-ENGINE-README" not in text and "calc-manifest-7" not in text
        offered = [t["function"]["name"] for t in body["tools"]]
        made = [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or ()]
        assert offered == ["bash"] and set(made) <= {"bash"}
        # Plain output: no frame of ctxnb's around a tool's result.
        for m in body["messages"]:
            if m["role"] == "tool":
                assert not m["content"].startswith("<tool ")
    last = server.requests[-1]["messages"]
    made = [json.loads(c["function"]["arguments"]) for m in last for c in m.get("tool_calls") or ()]
    assert made[0] == {"command": "cat calc.py test_calc.py"} and len(made) == len(script)
    outputs = [m["content"] for m in last if m["role"] == "tool"]
    if strategy.name == "keep-all":  # type: ignore[attr-defined]
        assert outputs[0].startswith('"""A tiny calculator module')
        assert "APPROVAL" in outputs[2] and "not committed: test_calc.py" in outputs[3]
    else:  # masked but the last: still nothing of ctxnb's in a placeholder
        assert outputs[-1].startswith("---") and all(o == "[output elided]\n" for o in outputs[:-1])
    # The trace keeps ctxnb's names: the session's records and the audit.
    tools = [r["tool"] for r in records if r.get("type") == "toolcall"]
    assert tools == ["select_active_intent"] + ["run_command"] * (len(script) + 1)
    assert {"select_active_intent", "run_command"} <= set(audit["tool"])
    shown = [r.get("shown", {}).get("tool") for r in records if r.get("type") == "toolcall"]
    assert shown == [None] + ["bash"] * (len(script) + 1)
