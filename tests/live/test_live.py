"""Live runs: mini-swe-agent + litellm against a scripted model on 127.0.0.1, on a real task."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _paths import REPO

from ctxnb.llm.prices import PriceTable, UnpricedModelWarning
from ctxnb.strategies.builtin import KeepAll, MetadataOnly

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("live_deps")]


def _priced() -> PriceTable:
    # The scripted model is billed as a real one so that dollars can be checked.
    return PriceTable.default().with_prices(
        {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
    )


def test_a_live_run_prints_nothing_of_litellm_s_own(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # A notebook stores what a cell prints: a live run must not depend on what a litellm
    # release prints (its provider-list banner for a model it cannot place, say).
    from ctxnb.live import ScriptedModelServer, run_task, sample_task
    from ctxnb.live.run import sample_script

    task = sample_task(tmp_path)
    with ScriptedModelServer(sample_script()) as server:
        result = run_task(tmp_path, task, prices=_priced(), retries=1, **server.model_args)
    assert result.passed
    out, err = capfd.readouterr()
    assert "Provider List" not in out + err and "litellm" not in out.lower()


def test_the_scripted_run_solves_the_sample_task_through_ctxnb(tmp_path: Path) -> None:
    from ctxnb.live import ScriptedModelServer, run_task, sample_task
    from ctxnb.live.run import SYSTEM_PROMPT, sample_script
    from ctxnb.replay import Trajectory
    from ctxnb.replay.runner import replay

    task = sample_task(tmp_path)
    fails = subprocess.run(task.test, shell=True, cwd=tmp_path, capture_output=True)
    assert fails.returncode != 0  # the task starts broken; its tests decide success
    with ScriptedModelServer(sample_script()) as server:
        result = run_task(
            tmp_path, task, strategy=KeepAll(), prices=_priced(), retries=1, **server.model_args
        )
    assert result.passed and result.exit_status == "Submitted"
    assert "return a + b" in (tmp_path / "calc.py").read_text()
    # Every model call went through litellm's HTTP path to the server, with ctxnb's messages.
    assert len(server.requests) == len(result.calls) == 5
    first, third = server.requests[0]["messages"], server.requests[2]["messages"]
    assert SYSTEM_PROMPT in first[0]["content"]
    # The task is the last turn: nothing of the harness's own call (the intent) follows.
    assert [m["role"] for m in first] == ["system", "user"] and first[-1]["content"] == task.prompt
    # Each call's messages are the previous call's and more (a prefix cache serves them).
    for prev, nxt in zip(server.requests, server.requests[1:], strict=False):
        assert nxt["messages"][: len(prev["messages"])] == prev["messages"]
    assert "def add(a, b)" in json.dumps(third)  # the output of step 0, via the context
    assert server.requests[0]["tools"][0]["function"]["name"] == "bash"
    # The history speaks of the tool the model was offered, and outputs are plain text.
    last = server.requests[-1]["messages"]
    made = [c["function"] for m in last for c in m.get("tool_calls") or ()]
    assert [f["name"] for f in made] == ["bash"] * 4
    assert [json.loads(f["arguments"]) for f in made][0] == {"command": "cat calc.py test_calc.py"}
    outputs = [m["content"] for m in last if m["role"] == "tool"]
    assert len(outputs) == 4 and "select_active_intent" not in json.dumps(last)
    assert "def add(a, b):\n    return a - b\n" in outputs[0]  # real newlines, no repr
    assert "'returncode'" not in json.dumps(last) and "[changed: calc.py]" in outputs[2]
    assert "[exit status 1]" in outputs[1]  # the failing test run says how it ended
    # Tokens and dollars are the provider's (here the server's) usage, priced per call.
    assert result.prompt_tokens == sum(
        json.loads(json.dumps(c)).get("prompt_tokens", 0) for c in [vars(x) for x in result.calls]
    )
    assert result.cached_tokens > 0
    p = PriceTable.default().get("gpt-5-mini")
    expected = sum(
        (
            c.cached_tokens * p.cache_read
            + (c.prompt_tokens - c.cached_tokens) * p.cache_write
            + c.completion_tokens * p.output
        )
        / 1e6
        for c in result.calls
    )
    assert (
        result.cost_usd == pytest.approx(expected)
        and 0 < result.cost_usd < result.cost_usd_uncached
    )
    # The trajectory is ctxnb's neutral format: it round-trips and replays.
    t = result.trajectory
    assert [s.action.tool for s in t.steps] == ["bash", "bash", "bash", "bash", "submit"]
    assert t.steps[2].files[0].path == "calc.py" and t.steps[2].files[0].op == "edit"
    assert t.steps[0].thought.startswith("Let me look")
    assert [s.usage.prompt_tokens for s in t.steps] == [c.prompt_tokens for c in result.calls]
    t.to_jsonl(tmp_path / "run.jsonl")
    assert Trajectory.from_jsonl(tmp_path / "run.jsonl") == t
    df = replay(t, [KeepAll()], prices=_priced())
    assert df["prompt_tokens"].notna().all() and len(df) == 5
    # The run's own bill is in the frame: what the server's usage cost, call by call.
    assert df["recorded_cost_usd"].sum() == pytest.approx(result.cost_usd)
    # Every command went through the governed tools, which recorded it in the session.
    from ctxnb import Workspace

    session = Workspace.open(tmp_path).session(t.metadata["session_id"])
    calls = [session.get(i) for i in session.session_index]
    ran = [c["args"]["cmd"] for c in calls if c.get("tool") == "run_command"]
    assert ran == [s.action.raw for s in t.steps]


def test_the_strategy_decides_what_the_model_sees(tmp_path: Path) -> None:
    from ctxnb.live import ScriptedModelServer, run_task, sample_task
    from ctxnb.live.run import sample_script

    task = sample_task(tmp_path)
    with ScriptedModelServer(sample_script()) as server:
        result = run_task(
            tmp_path,
            task,
            strategy=MetadataOnly(),
            retries=1,
            prices=_priced(),
            **server.model_args,
        )
    assert result.passed  # scripted: the answers do not depend on what was sent
    assert "def add(a, b)" not in json.dumps(server.requests[2]["messages"])
    assert result.trajectory.metadata["strategy"] == "metadata-only"


def test_a_run_that_does_not_fix_the_task_fails_and_refused_commands_are_shown(
    tmp_path: Path,
) -> None:
    from ctxnb.live import ScriptedModelServer, run_task, sample_task

    task = sample_task(tmp_path)
    script = [
        {"content": "Clean up first.", "commands": ["rm -rf calc.py"]},
        {"content": "And the tests.", "commands": ["rm -f test_calc.py"]},
        {"content": "Give up.", "commands": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]},
    ]
    with ScriptedModelServer(script) as server, pytest.warns(UnpricedModelWarning):
        result = run_task(tmp_path, task, retries=1, **server.model_args)
    assert not result.passed and result.exit_status == "Submitted"
    # An observed deletion is destructive: with no approver, nothing of it is committed,
    # and the model is told why.
    assert (tmp_path / "calc.py").exists()
    refused = result.trajectory.steps[0]
    assert "APPROVAL" in refused.observation and "calc.py" in refused.observation
    assert "APPROVAL" in json.dumps(server.requests[1]["messages"])
    # The task's tests lie outside the agent's scope: the deletion is dropped, the model
    # reads that it was, and the run is flagged as tampering with its tests.
    assert (tmp_path / "test_calc.py").exists()
    dropped = result.trajectory.steps[1]
    assert "not committed: test_calc.py" in dropped.observation
    assert result.tests_tampered and result.tampered == ("test_calc.py",)
    assert result.cost_usd != result.cost_usd  # NaN: the scripted model has no price


def test_nothing_is_downloaded_when_litellm_and_mini_swe_agent_load(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import json, os, sys
        seen = []
        def hook(event, args):
            if event == "socket.connect":
                seen.append(repr(args[1]))
            elif event in ("urllib.Request", "http.client.connect"):
                seen.append(event + " " + repr(args[:2]))
        sys.addaudithook(hook)
        import ctxnb.llm.calls
        litellm = ctxnb.llm.calls.litellm_module()
        import ctxnb.live.run
        ctxnb.live.run._minisweagent()
        print(json.dumps({"seen": seen, "env": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
                          "models": len(litellm.model_cost)}))
        """
    )
    env = {
        k: v for k, v in __import__("os").environ.items() if not k.startswith(("LITELLM", "MSWEA"))
    }
    env["HOME"] = str(tmp_path)  # no user config: mini-swe-agent writes its own under it
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["seen"] == []
    assert out["env"] == "True"
    assert out["models"] > 100  # the cost map came from the package itself
    assert "mini-swe-agent" not in proc.stdout  # no banner


# A recorded mini-swe-agent run shipped with ctxnb, replayed under a summarizing strategy.
_DJANGO_RUN = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


def test_an_llm_summarizer_through_litellm_is_counted_in_replay_results() -> None:
    from ctxnb.live import ScriptedModelServer
    from ctxnb.llm.calls import LiteLLMSummarizer
    from ctxnb.replay import load
    from ctxnb.replay.runner import replay
    from ctxnb.strategies.builtin import Summarize

    t = load(_DJANGO_RUN)
    script = [{"content": f"SUMMARY-{n}: the output listed files and errors."} for n in range(200)]
    with ScriptedModelServer(script) as server:
        summarizer = LiteLLMSummarizer(
            "openai/ctxnb-scripted", api_base=server.url, api_key="unused", prices=_priced()
        )
        df = replay(t, [KeepAll(), Summarize(keep_last=3, summarizer=summarizer, max_tokens=80)])
    s = df[df["strategy"] == "summarize"]
    assert summarizer.calls == len(server.requests) > 0
    # Each request asked for one output's summary, within the budget.
    body = server.requests[0]
    assert body["max_tokens"] == 80 and "Output of" in body["messages"][1]["content"]
    assert s["strategy_tokens"].sum() == sum(
        u.prompt_tokens + u.completion_tokens for u in summarizer.usage
    )
    assert s["strategy_cost_usd"].sum() == pytest.approx(sum(u.cost_usd for u in summarizer.usage))
    assert s["strategy_cost_usd"].sum() > 0
    assert s["total_tokens"].sum() < df[df["strategy"] == "keep-all"]["total_tokens"].sum()


def test_an_llm_summarizer_with_no_price_warns_and_is_not_free() -> None:
    # The summarizer's model is not in the price table: its calls warn, cost NaN, and
    # summarize() reports the run as unpriced instead of adding $0 to the strategy.
    import math

    from ctxnb.live import ScriptedModelServer
    from ctxnb.llm.calls import LiteLLMSummarizer
    from ctxnb.replay import load
    from ctxnb.replay.analysis import summarize
    from ctxnb.replay.runner import replay
    from ctxnb.strategies.builtin import Summarize

    t = load(_DJANGO_RUN)
    script = [{"content": f"SUMMARY-{n}: files and errors."} for n in range(200)]
    with ScriptedModelServer(script) as server:
        summarizer = LiteLLMSummarizer(
            "openai/ctxnb-scripted", api_base=server.url, api_key="unused", prices=PriceTable()
        )
        with pytest.warns(UnpricedModelWarning, match="ctxnb-scripted"):
            df = replay(t, [KeepAll(), Summarize(keep_last=3, summarizer=summarizer)])
    assert summarizer.calls > 0
    s = df[df["strategy"] == "summarize"]
    assert s["strategy_tokens"].sum() > 0 and s["strategy_cost_usd"].isna().any()
    table = summarize(df)
    assert table.loc["summarize", "unpriced_runs"] == 1
    assert math.isnan(table.loc["summarize", "cost_usd"])
    # The run's own calls are priced: keep-all is not touched by the summarizer's model.
    assert table.loc["keep-all", "unpriced_runs"] == 0 and table.loc["keep-all", "cost_usd"] > 0


@pytest.mark.parametrize("how", ["sed", "python, approved"])
def test_a_run_that_edits_the_tests_to_pass_is_not_solved_and_is_flagged(
    tmp_path: Path, how: str
) -> None:
    # The attack: leave add() broken (2 + 3 gives -1) and make the test expect -1,
    # once refused by governance (sed -i outside the scope), once run for real (an
    # approver lets Python code run; the sandbox drops the out-of-scope write).
    from ctxnb.govern.approval import CallbackApprover
    from ctxnb.live import ScriptedModelServer, run_task, sample_task

    task = sample_task(tmp_path)
    edit = (
        "sed -i 's/add(2, 3), 5/add(2, 3), -1/' test_calc.py"
        if how == "sed"
        else "python3 - <<'PY'\nimport pathlib\np = pathlib.Path('test_calc.py')\n"
        "p.write_text(p.read_text().replace('add(2, 3), 5', 'add(2, 3), -1'))\nPY\n"
        "python -m unittest -q"
    )
    script = [
        {"content": "Make the test agree with the code.", "commands": [edit]},
        {"content": "Done.", "commands": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]},
    ]
    with ScriptedModelServer(script) as server:
        result = run_task(
            tmp_path,
            task,
            retries=1,
            prices=_priced(),
            approver=None if how == "sed" else CallbackApprover(lambda req: True),
            **server.model_args,
        )
    assert result.tests_tampered and result.tampered == ("test_calc.py",)
    assert not result.solved and not result.passed
    assert "-1" not in (tmp_path / "test_calc.py").read_text()  # out of scope: dropped
    assert result.trajectory.metadata["tests_tampered"] is True
    if how == "sed":
        # The edit ran on the overlay; the sandbox dropped it and told the model so.
        observation = result.trajectory.steps[0].observation or ""
        assert "not committed: test_calc.py (outside the scope)" in observation
    else:
        # It ran: inside the sandbox the edited test passed against the broken code.
        assert "OK" in (result.trajectory.steps[0].observation or "")


def test_what_the_verdict_s_tests_print_leaves_redacted(tmp_path: Path) -> None:
    import secrets

    from ctxnb.live.verdict import judge, pristine_files

    key = "ghp_" + secrets.token_hex(18)  # a generated GitHub-style token, never a real one
    (tmp_path / "test_calc.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n"
        f"    def test(self):\n        print('token={key}')\n"
    )
    pristine, _ = pristine_files(["test_calc.py"], source=tmp_path, hidden=None)
    v = judge(tmp_path, pristine=pristine, expected=["test_calc.T.test"])
    assert v.passed and "token=" in v.output and key not in v.output


def test_tests_changed_behind_the_sandbox_s_back_are_still_caught(tmp_path: Path) -> None:
    # Whatever way a test file changed, the verdict runs the pristine copy and flags it.
    from ctxnb.live.verdict import judge, pristine_files

    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    test = "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
    (tmp_path / "test_calc.py").write_text(
        test + "    def test(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    pristine, _ = pristine_files(["test_calc.py"], source=tmp_path, hidden=None)
    (tmp_path / "test_calc.py").write_text(
        test + "    def test(self):\n        self.assertEqual(add(2, 3), -1)\n"
    )
    v = judge(tmp_path, pristine=pristine, expected=["test_calc.T.test"])
    assert v.tests_tampered and not v.passed and not v.solved
    # A link in place of the test is no test either.
    (tmp_path / "test_calc.py").unlink()
    (tmp_path / "test_calc.py").symlink_to("/etc/hostname")
    v = judge(tmp_path, pristine=pristine, expected=["test_calc.T.test"])
    assert v.tests_tampered and v.tampered == ("test_calc.py",) and not v.passed
    # With the code fixed and the test untouched, the same verdict passes.
    (tmp_path / "test_calc.py").unlink()
    (tmp_path / "test_calc.py").write_bytes(pristine["test_calc.py"])
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    v = judge(tmp_path, pristine=pristine, expected=["test_calc.T.test"])
    assert v.passed and v.solved and not v.tests_tampered


def test_a_hidden_check_the_agent_never_saw_decides_too(tmp_path: Path) -> None:
    from ctxnb.live.verdict import judge

    (tmp_path / "calc.py").write_text(
        "def add(a, b):\n    return 5\n"
    )  # fits the visible test only
    hidden = {"check_calc.py": b"from calc import add\nassert add(1, 1) == 2, add(1, 1)\n"}
    v = judge(tmp_path, pristine={}, expected=[], hidden=hidden, scripts=["check_calc.py"])
    assert not v.passed and "AssertionError" in v.output
    assert v.reason == "failed" and v.outcomes == {"script:check_calc.py": "failed"}
    assert not (tmp_path / "check_calc.py").exists()  # never in the agent's workspace


def test_run_task_closes_the_workspace_it_opened_and_only_that_one(tmp_path: Path) -> None:
    # A store left open folds on a timer 30 s after its last commit; run_experiment
    # removes each run's folder long before, and the timer then failed on it.
    import threading

    from ctxnb import Workspace
    from ctxnb.live import ScriptedModelServer, run_task, sample_task
    from ctxnb.live.run import sample_script

    def timers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if isinstance(t, threading.Timer)}

    before = timers()
    task = sample_task(tmp_path / "a")
    with ScriptedModelServer(sample_script()) as server:
        result = run_task(tmp_path / "a", task, prices=_priced(), retries=1, **server.model_args)
    assert result.passed
    assert {t for t in timers() - before if t.is_alive()} == set()
    # A workspace the caller opened stays the caller's, open.
    task = sample_task(tmp_path / "b")
    with Workspace.open(tmp_path / "b") as ws:
        with ScriptedModelServer(sample_script()) as server:
            result = run_task(ws, task, prices=_priced(), retries=1, **server.model_args)
        session = ws.session(result.trajectory.metadata["session_id"])
        assert len(session.session_index) > 5


def test_a_nested_test_file_is_out_of_the_scope_of_a_task_that_owns_everything() -> None:
    # .gitignore rules: `**` owns tests/ whole, and `!/tests/test_a.py` alone cannot take
    # one file out of it; the task's globs own the folder entry by entry instead.
    from ctxnb.govern.core import in_scope
    from ctxnb.live.run import Task

    task = Task("p", "t", tests=("tests/test_a.py", "tests/unit/test_b.py", "test_c.py"))
    globs = task.owned_scope
    for path in ("tests/test_a.py", "tests/unit/test_b.py", "test_c.py"):
        assert not in_scope(globs, path), path
    for path in ("src/app.py", "tests/helpers.py", "tests/unit/conftest_data.py", "app.py"):
        assert in_scope(globs, path), path
    # A scope that does not own the folder gains nothing from the test files.
    narrow = Task("p", "t", scope=("src/**",), tests=("tests/test_a.py",)).owned_scope
    assert narrow == ["src/**", "!/tests/test_a.py"] and not in_scope(narrow, "tests/x.py")
