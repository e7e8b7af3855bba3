"""Recall in a live run: the agent's ``recall`` command, over real HTTP and the real
sandbox, against masking alone and keep-all (a script that needs an earlier output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxnb.llm.prices import PriceTable
from ctxnb.strategies import KeepAll, ObservationMasking, WithRecall

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("live_deps")]

# Read, run the tests, then fix: the fix relies on having read `return a - b`, which
# masking the last output but one has elided by then.
SCRIPT = [
    {"content": "Look first.", "commands": ["cat calc.py"]},
    {"content": "Run the tests.", "commands": ["python -m unittest -q"]},
    {
        "content": "Fix the operator.",
        "commands": ["sed -i 's/return a - b/return a + b/' calc.py"],
        "needs": "    return a - b",
        "reread": "cat calc.py",
    },
    {"content": "Check.", "commands": ["python -m unittest -q"]},
]


@pytest.mark.parametrize(
    ("strategy", "recalls", "re_reads"),
    [
        (KeepAll(), 0, 0),
        (ObservationMasking(1), 0, 1),
        (WithRecall(ObservationMasking(1)), 1, 0),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_masking_re_reads_what_recall_gets_back_from_the_session(
    tmp_path: Path, strategy: object, recalls: int, re_reads: int
) -> None:
    from ctxnb import Workspace
    from ctxnb.live import ScriptedModelServer, run_task, sample_task

    task = sample_task(tmp_path)
    prices = PriceTable.default().with_prices(
        {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
    )
    with ScriptedModelServer(SCRIPT) as server:
        result = run_task(
            tmp_path, task, strategy=strategy, prices=prices, retries=1, **server.model_args
        )
    assert result.solved and result.exit_status == "Submitted"
    assert (result.recalls, result.re_reads) == (recalls, re_reads)
    assert server.recoveries == {"recall": recalls, "reread": re_reads}
    if not recalls:
        # Masking alone never mentions recall, and a recall it is not offered runs as the
        # shell command it is (there is none).
        assert all("recall" not in json.dumps(r["messages"]) for r in server.requests)
        return
    commands = [s.action.raw for s in result.trajectory.steps]
    assert commands[2] == "recall --search return a b"
    # The answer came from the session, as plain output of the model's own bash call:
    # the line it needed, under the handle of the output it came from.
    after = server.requests[3]["messages"]
    answer = [m for m in after if m["role"] == "tool"][-1]["content"]
    assert "(bash(command=cat calc.py)):" in answer and ":     return a - b\n" in answer
    assert "run_command" not in json.dumps(after) and "`recall " in json.dumps(after)
    # The trace keeps ctxnb's name for it; nothing ran in the shell.
    ws = Workspace.open(tmp_path)
    try:
        s = ws.session(result.trajectory.metadata["session_id"])
        audit = ws.tools(s).audit()
    finally:
        ws.close()
    assert list(audit["tool"]).count("recall") == 1
    assert list(audit["tool"]).count("run_command") == len(commands) - 1
