"""Benchmark the cost of governance around a write, in-process and as a hook process.

(a) In-process, on a governed copy of the sample workspace:

- ``write_file`` through the governed file tools (the HookEngine's pre and post
  policies, the store version with the Agent Trace record in its log line, the ledger
  line, the audit line)
  against a bare ``write`` + ``fsync`` of the same bytes; the overhead's median, and
  where its time goes (each part timed on its own);
- the Claude Code hook handlers in-process (``pre-tool-use`` then ``post-tool-use``
  with the trace append) around the same bare write.

(b) ``ctxnb hook pre-tool-use`` as a process, through the installed console script and
through ``python -m ctxnb``, against ``python -c pass``: median wall time and ratio.
The payload is an Edit in scope of the session's intent, so every policy runs.
Bytecode is written once before timing, as an installed package has it.

(b') ``ctxnb hook post-tool-use`` as a process after a Write of a changed file (the
Agent Trace record, the store version, the audit line), against ``python -c pass``:
Claude Code waits for it after every edit. No target; it shows what the store costs.

(c) ``ctxnb hook pre-tool-use`` for a Read as a process in a workspace with ``[budget]``
(the read sized and charged, an audit line appended) against the same Read in a workspace
without one, interleaved: what a budget adds to every Read. No target.

(d) The same budgeted Read on a 10,000-line audit log: with the session's running totals
kept in ``.ctxnb/budget/`` (the hook reads only the lines after them) against the same
call with the counter removed before each run (the whole log read, as every call did
before the counter), interleaved; and in-process, a new ``SessionBudget``'s first look
with and without a counter. No target.

Targets: (a) the whole governed write <= 5x the bare write + fsync, and the pre+post
policies (governed minus ungoverned) <= 1 ms; (b) ratio <= 2x and median <= 120 ms.

Run with::

    python bench/hooks.py [--writes 200] [--runs 30] [--only budget|budget-log]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import handle_event
from ctxnb.samples import copy_sample_workspace

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory work
    owned_scope: ["inventory/**"]
"""
TARGET_OVERHEAD_MS = 1.0
TARGET_WRITE_RATIO = 5.0
TARGET_RATIO = 2.0
TARGET_PROCESS_MS = 120.0


def _ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


def _content(i: int) -> str:
    return "".join(f"value_{n} = {i * 100 + n}\n" for n in range(20))


def _bare_write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class _Timer:
    """Wraps methods to add up the time spent in each (per write, later)."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = defaultdict(list)

    def wrap(self, obj: Any, attr: str, label: str) -> None:
        fn = getattr(obj, attr)
        spent = self.spent[label]

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        setattr(obj, attr, timed)


def bench_in_process(root: Path, writes: int) -> None:
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("bench"), caller="bench")
    engine = tools.engine  # type: ignore[attr-defined]
    engine.select_active_intent("INT-001")
    target = "inventory/bench_target.py"
    bare_path = root / "inventory" / "bench_bare.py"

    timer = _Timer()
    timer.wrap(engine, "before", "pre policies (engine.before)")
    for policy in engine.post:
        timer.wrap(policy, "run", f"post: {policy.name}")
    # The trace line's fsync runs in the background while the call is recorded; the call
    # waits for it before it returns (inside the governed figure, not in this part).
    timer.wrap(engine.ledger, "append_later", "  of which trace append (fsync overlapped)")
    # A write_file's record goes in its store version's log line (one fsync for both,
    # issue 31): prepared while the new data is fsynced (inside the atomic write's part),
    # its ledger line (one write, no fsync) once the log line's fsync is done, before the
    # call returns.
    timer.wrap(engine.recorder, "prepare_logged", "  trace record prepared (during fsync)")
    timer.wrap(engine.recorder, "finish_logged", "ledger line (no fsync), after the log's")
    timer.wrap(tools.audit_log, "append", "audit line (.ctxnb/audit.jsonl)")
    # Inside the atomic write: the store version and its trace record are made durable
    # after the new data is fsynced under a temporary name and before the rename.
    timer.wrap(tools._files, "index_bytes", "  store version + its log fsync (before rename)")
    timer.wrap(tools.session, "record_toolcall", "session.record_toolcall")
    timer.wrap(tools.policy, "write_bytes_atomic", "atomic write (temp+fsync, commit, rename)")
    timer.wrap(engine, "mutation_class", "  mutation class (during fsync)")

    from ctxnb.tools.filetools import FileTools

    # The same write without the hook engine: the difference is what the policies cost.
    plain = FileTools(ws, ws.session("bench-plain"), caller="bench")
    plain_target = "inventory/bench_plain.py"
    plain.write_file(plain_target, _content(-1), mode="create")
    ungoverned: list[float] = []

    tools.write_file(target, _content(-1))  # the first write creates the file
    for spent in timer.spent.values():
        spent.clear()
    governed: list[float] = []
    bare: list[float] = []
    for i in range(writes):
        text = _content(i)
        start = time.perf_counter()
        result = tools.write_file(target, text)
        governed.append(time.perf_counter() - start)
        assert result.success, result.message
        start = time.perf_counter()
        _bare_write(bare_path, text.encode())
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert plain.write_file(plain_target, text).success
        ungoverned.append(time.perf_counter() - start)
    ws.close()

    ratio = _ms(governed) / _ms(bare)
    verdict = "meets" if ratio <= TARGET_WRITE_RATIO else "misses"
    print("(a) governed write_file vs bare write+fsync, in-process")
    print(f"    writes: {writes}")
    print(f"    governed write_file median: {_ms(governed):8.3f} ms")
    print(f"    bare write+fsync median:    {_ms(bare):8.3f} ms")
    print(
        f"    ratio:                      {ratio:8.2f}x "
        f"({verdict} <= {TARGET_WRITE_RATIO:.0f}x; overhead {_ms(governed) - _ms(bare):.3f} ms)"
    )
    policies = _ms(governed) - _ms(ungoverned)
    print(f"    ungoverned write_file median:  {_ms(ungoverned):8.3f} ms (same tools, no engine)")
    print(
        f"    pre+post policies alone:       {policies:8.3f} ms "
        f"({'meets' if policies <= TARGET_OVERHEAD_MS else 'misses'} the "
        f"{TARGET_OVERHEAD_MS} ms target)"
    )
    print("    where the time goes (median per write):")
    for label, spent in sorted(timer.spent.items(), key=lambda kv: -_ms(kv[1] or [0.0])):
        if spent:
            print(f"      {label:<40} {_ms(spent):8.3f} ms")


def bench_hook_handlers(root: Path, writes: int) -> None:
    target = root / "inventory" / "bench_hooked.py"
    session = "bench-hooks"
    handle_event(
        "user-prompt-submit",
        {"session_id": session, "cwd": str(root), "prompt": "work under INT-001"},
    )
    pre: list[float] = []
    post: list[float] = []
    bare: list[float] = []
    for i in range(writes):
        text = _content(i)
        base = {"session_id": session, "cwd": str(root), "tool_name": "Write"}
        tool_input = {"file_path": str(target), "content": text}
        start = time.perf_counter()
        answer = handle_event("pre-tool-use", {**base, "tool_input": tool_input})
        pre.append(time.perf_counter() - start)
        assert answer.stdout == "", answer.stdout
        start = time.perf_counter()
        _bare_write(target, text.encode())
        bare.append(time.perf_counter() - start)
        patch = [{"oldStart": 1, "oldLines": 20, "newStart": 1, "newLines": 20}]
        start = time.perf_counter()
        answer = handle_event(
            "post-tool-use",
            {**base, "tool_input": tool_input, "tool_response": {"structuredPatch": patch}},
        )
        post.append(time.perf_counter() - start)
        assert answer.exit_code == 0 and answer.stdout == "", answer
    total = [a + b for a, b in zip(pre, post, strict=True)]
    print("(a') Claude Code hook handlers in-process around the same bare write")
    print(f"    pre-tool-use median:        {_ms(pre):8.3f} ms")
    print(
        f"    post-tool-use median:       {_ms(post):8.3f} ms "
        "(trace record, store version, audit line)"
    )
    # Each call is a fresh hook in Claude Code: it opens the store, which reads what is not
    # compacted yet. The last quarter against the first shows whether that grows.
    q = max(1, len(post) // 4)
    print(
        f"    post-tool-use, first/last {q} calls: {_ms(post[:q]):.3f} / {_ms(post[-q:]):.3f} ms "
        f"(slowest call {max(post) * 1000:.1f} ms)"
    )
    print(f"    pre+post overhead median:   {_ms(total):8.3f} ms")
    print(f"    bare write+fsync median:    {_ms(bare):8.3f} ms")


def _time_process(argv: list[str], stdin: bytes, runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
        out.append(time.perf_counter() - start)
        if proc.returncode != 0 or proc.stdout:
            raise SystemExit(f"{argv} answered {proc.returncode}: {proc.stdout!r} {proc.stderr!r}")
    return out


def bench_process(root: Path, runs: int) -> None:
    session = "bench-process"
    handle_event(
        "user-prompt-submit",
        {"session_id": session, "cwd": str(root), "prompt": "work under INT-001"},
    )
    payload = {
        "session_id": session,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {
            "file_path": str(root / "inventory" / "models.py"),
            "old_string": "a",
            "new_string": "b",
        },
    }
    stdin = json.dumps(payload).encode()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = Path(sys.executable).parent / "ctxnb"
    commands: list[tuple[str, list[str]]] = [("python -c pass", [sys.executable, "-c", "pass"])]
    if script.exists():
        commands.append(("ctxnb hook pre-tool-use", [str(script), "hook", "pre-tool-use"]))
    else:
        print(f"    (no console script at {script}; install ctxnb to time it)")
    commands.append(
        (
            "python -m ctxnb hook pre-tool-use",
            [sys.executable, "-m", "ctxnb", "hook", "pre-tool-use"],
        )
    )
    for _, argv in commands:  # writes bytecode and warms the caches
        _time_process(argv, stdin, 2, env)
    results: dict[str, list[float]] = {label: [] for label, _ in commands}
    for _ in range(runs):  # interleaved, so load on the machine hits every command alike
        for label, argv in commands:
            results[label].extend(_time_process(argv, stdin, 1, env))
    base = _ms(results["python -c pass"])
    print("(b) hook process start-up (Edit in scope: path policy, intent, scope)")
    print(f"    runs: {runs} each, interleaved")
    print(f"    {'python -c pass':<36} {base:8.1f} ms")
    for label, _ in commands[1:]:
        median = _ms(results[label])
        ratio = median / base
        ratio_ok = "meets" if ratio <= TARGET_RATIO else "misses"
        time_ok = "meets" if median <= TARGET_PROCESS_MS else "misses"
        print(
            f"    {label:<36} {median:8.1f} ms  {ratio:4.2f}x  "
            f"({ratio_ok} <= {TARGET_RATIO}x; {time_ok} <= {TARGET_PROCESS_MS:.0f} ms)"
        )


def _structured_patch(old: str, new: str) -> list[dict[str, Any]]:
    """Claude Code's ``structuredPatch`` of a Write: one hunk over the whole file."""
    a, b = old.splitlines(), new.splitlines()
    lines = [f"-{x}" for x in a] + [f"+{x}" for x in b]
    return [{"oldStart": 1, "oldLines": len(a), "newStart": 1, "newLines": len(b), "lines": lines}]


def bench_post_process(root: Path, runs: int) -> None:
    """Two shapes of a Write's answer. What Claude Code sends (``type``, ``content``,
    ``structuredPatch``, ``originalFile``: every Write in the recorded transcripts carries
    them) tells the hook what the file was; the bare shape of the hook reference's example
    (``filePath`` and ``success`` only) does not, and the hook then reads the store's
    newest version of the file, which opens the store (pyarrow, pydantic)."""
    session = "bench-post-process"
    handle_event(
        "user-prompt-submit",
        {"session_id": session, "cwd": str(root), "prompt": "work under INT-001"},
    )
    target = root / "inventory" / "bench_post.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    post_argv = [sys.executable, "-m", "ctxnb", "hook", "post-tool-use"]
    base_argv = [sys.executable, "-c", "pass"]
    post: dict[str, list[float]] = {"full": [], "bare": []}
    base: list[float] = []
    previous = ""
    for i in range(2 * runs + 2):
        shape = "full" if i % 2 == 0 else "bare"
        text = _content(i)
        _bare_write(target, text.encode())
        response: dict[str, Any] = {"filePath": str(target), "success": True}
        if shape == "full":
            response = {
                "type": "update" if previous else "create",
                "filePath": str(target),
                "content": text,
                "structuredPatch": _structured_patch(previous, text),
                "originalFile": previous or None,
            }
        payload = {
            "session_id": session,
            "cwd": str(root),
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(target), "content": text},
            "tool_response": response,
        }
        spent = _time_process(post_argv, json.dumps(payload).encode(), 1, env)
        previous = text
        if i >= 2:  # the first run of each shape writes bytecode
            post[shape].extend(spent)
            if shape == "full":
                base.extend(_time_process(base_argv, b"", 1, env))
    print("(b') post-tool-use as a process (a Write: trace record, store version, audit line)")
    print(f"    runs: {runs} of each shape, interleaved with python -c pass")
    print(f"    {'python -c pass':<44} {_ms(base):8.1f} ms")
    for shape, label in (
        ("full", "post-tool-use, Claude Code's answer"),
        ("bare", "post-tool-use, filePath+success only"),
    ):
        print(
            f"    {label:<44} {_ms(post[shape]):8.1f} ms  "
            f"{_ms(post[shape]) / _ms(base):4.1f}x"
            + ("  (target <= 2.0x)" if shape == "full" else "")
        )


def bench_session_end_process(root: Path, runs: int) -> None:
    """``ctxnb hook session-end`` as a process: a session's lease released, an audit line."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    end_argv = [sys.executable, "-m", "ctxnb", "hook", "session-end"]
    base_argv = [sys.executable, "-c", "pass"]
    ends: list[float] = []
    base: list[float] = []
    for i in range(runs + 1):
        session = f"bench-end-{i}"
        handle_event(  # each session takes the lease its end releases
            "user-prompt-submit",
            {"session_id": session, "cwd": str(root), "prompt": "work under INT-001"},
        )
        payload = {"session_id": session, "cwd": str(root), "hook_event_name": "SessionEnd"}
        spent = _time_process(end_argv, json.dumps({**payload, "reason": "other"}).encode(), 1, env)
        if i:  # the first run writes bytecode
            ends.extend(spent)
            base.extend(_time_process(base_argv, b"", 1, env))
    print("(b'') session-end as a process (a lease released, an audit line)")
    print(f"    runs: {runs}, interleaved with python -c pass")
    print(f"    {'python -c pass':<36} {_ms(base):8.1f} ms")
    print(
        f"    {'python -m ctxnb hook session-end':<36} {_ms(ends):8.1f} ms  "
        f"{_ms(ends) / _ms(base):4.1f}x"
    )


def bench_budget_process(runs: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [sys.executable, "-m", "ctxnb", "hook", "pre-tool-use"]
    configs = {
        "without [budget]": "",
        "read_bytes": "[budget]\nread_bytes = 1_000_000_000\n",
        "read_bytes + read_tokens": (
            "[budget]\nread_bytes = 1_000_000_000\nread_tokens = 1_000_000_000\n"
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for n, (label, toml) in enumerate(configs.items()):
            (Path(tmp) / str(n)).mkdir()
            roots[label] = _governed_copy(str(Path(tmp) / str(n)))
            (roots[label] / "ctxnb.toml").write_text(toml)
        stdins = {}
        for label, root in roots.items():
            payload = {
                "session_id": "bench-budget",
                "cwd": str(root),
                "hook_event_name": "PreToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": str(root / "inventory" / "models.py")},
            }
            stdins[label] = json.dumps(payload).encode()
            _time_process(argv, stdins[label], 2, env)  # bytecode and the settings cache
        results: dict[str, list[float]] = {label: [] for label in stdins}
        for _ in range(runs):  # interleaved, so load on the machine hits both alike
            for label, stdin in stdins.items():
                results[label].extend(_time_process(argv, stdin, 1, env))
        audit = roots["read_bytes"] / ".ctxnb" / "audit.jsonl"
        lines = len(audit.read_text().splitlines())
    base = _ms(results["without [budget]"])
    print("(c) pre-tool-use for a Read as a process: what [budget] adds (sized, charged)")
    print(f"    runs: {runs} each, interleaved; the audit log ends at {lines} lines")
    print(f"    {'without [budget]':<36} {base:8.1f} ms")
    for label in list(configs)[1:]:
        median = _ms(results[label])
        print(f"    {label:<36} {median:8.1f} ms  {median / base:4.2f}x")


def bench_budget_log(runs: int, lines: int = 10_000) -> None:
    from ctxnb.config import BudgetConfig
    from ctxnb.tools.budget import SessionBudget

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [sys.executable, "-m", "ctxnb", "hook", "pre-tool-use"]
    session = "bench-budget-log"
    with tempfile.TemporaryDirectory() as tmp:
        root = _governed_copy(tmp)
        (root / "ctxnb.toml").write_text("[budget]\nread_bytes = 1_000_000_000_000\n")
        payload = {
            "session_id": session,
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": str(root / "inventory" / "models.py")},
        }
        stdin = json.dumps(payload).encode()
        _time_process(argv, stdin, 2, env)  # bytecode, the settings cache, one real line
        log = root / ".ctxnb" / "audit.jsonl"
        line = json.loads(log.read_text().splitlines()[-1])
        # The log of a long project: many sessions' calls, a fifth of them this one's.
        with log.open("a", encoding="utf-8") as f:
            for i in range(lines - len(log.read_text().splitlines())):
                sid = session if i % 5 == 0 else f"other-{i % 7}"
                f.write(json.dumps({**line, "session_id": sid}) + "\n")
        (counter,) = (root / ".ctxnb" / "budget").iterdir()
        kept: list[float] = []
        whole: list[float] = []
        for _ in range(runs):  # interleaved, so load on the machine hits both alike
            kept.extend(_time_process(argv, stdin, 1, env))
            counter.unlink()
            whole.extend(_time_process(argv, stdin, 1, env))
        limits = BudgetConfig(read_bytes=10**12)
        fresh: dict[str, list[float]] = {"counter": [], "no counter": []}
        for _ in range(runs):
            for label, path in (("counter", counter), ("no counter", None)):
                start = time.perf_counter()
                SessionBudget(limits, log, session, counter=path).remaining()
                fresh[label].append(time.perf_counter() - start)
        size = log.stat().st_size
    print("(d) a budgeted Read's hook process on a long audit log")
    print(f"    runs: {runs} each, interleaved; the log: {lines:,} lines, {size / 1e6:.1f} MB")
    print(f"    {'whole log read (no counter)':<36} {_ms(whole):8.1f} ms")
    print(f"    {'running totals kept':<36} {_ms(kept):8.1f} ms  {_ms(kept) / _ms(whole):4.2f}x")
    base = _ms(fresh["no counter"])
    print("    in-process, a new SessionBudget's first remaining():")
    print(f"    {'no counter (the whole log)':<36} {base:8.2f} ms")
    print(
        f"    {'counter (the lines after it)':<36} {_ms(fresh['counter']):8.2f} ms  "
        f"{_ms(fresh['counter']) / base:5.3f}x"
    )


def _governed_copy(tmp: str) -> Path:
    root = copy_sample_workspace(tmp)
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return root


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200, help="writes per in-process figure")
    parser.add_argument("--runs", type=int, default=30, help="processes per command")
    parser.add_argument(
        "--only", choices=["budget", "budget-log", "session-end"], help="run only this part"
    )
    args = parser.parse_args(argv)
    if args.only == "budget":
        bench_budget_process(args.runs)
        return
    if args.only == "budget-log":
        bench_budget_log(args.runs)
        return
    if args.only == "session-end":
        with tempfile.TemporaryDirectory() as tmp:
            bench_session_end_process(_governed_copy(tmp), args.runs)
        return
    steps: list[Callable[[Path], None]] = [
        lambda root: bench_in_process(root, args.writes),
        lambda root: bench_hook_handlers(root, args.writes),
        lambda root: bench_process(root, args.runs),
        lambda root: bench_post_process(root, max(3, args.runs // 3)),
        lambda root: bench_session_end_process(root, max(3, args.runs // 3)),
    ]
    for step in steps:
        with tempfile.TemporaryDirectory() as tmp:
            step(_governed_copy(tmp))
    bench_budget_process(args.runs)
    bench_budget_log(args.runs)


if __name__ == "__main__":
    main()
