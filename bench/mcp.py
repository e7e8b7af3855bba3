"""Benchmark an MCP ``read_file`` round trip over stdio against an in-process dispatch,
and a second client's calls over HTTP while a first one waits on its approval.

Copies the sample workspace to a temporary directory, starts ``python -m ctxnb mcp
serve`` as a subprocess and calls ``read_file`` on a small file through the MCP SDK's
``ClientSession`` (over ``stdio_client``), then makes the same call with
``FileTools.dispatch`` in this process. Prints the median time per call of each, the
ratio, and whether the MCP median meets the 5 ms target.

Then, on a governed copy served with ``--http``, client B times ``read_file`` calls
with nobody waiting (the baseline) and again while client A's ``run_command`` waits on
its user's approval (an elicitation left unanswered); prints both medians, p95s and
slowest calls, the ratio, and whether B's p95 while A waits is within 100 ms.

Then, where the official MCP conformance suite is installed (``npm ci --prefix
.ci/mcp-conformance``), prints how many of each revision's required server scenarios
``ctxnb mcp serve --http`` passes (``scripts/mcp_conformance.py``; ``--no-conformance``
leaves it out).

Run with::

    python bench/mcp.py [--calls 200] [--file README.md] [--waiting-calls 50] [--no-conformance]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and this module (named
# mcp.py) would hide the MCP SDK's `mcp` package; drop that folder before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import (  # noqa: E402
    StdioServerParameters,
    get_default_environment,
    stdio_client,
)
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from ctxnb import Workspace  # noqa: E402
from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

TARGET_MS = 5.0
WAITING_TARGET_MS = 100.0
REPO = _HERE.parent
_INTENTS = """\
active_intents:
  - id: INT-BENCH
    name: Benchmark
    status: active
    owned_scope:
      - inventory/**
"""


async def _mcp_times(ws: Path, path: str, calls: int, warmup: int) -> list[float]:
    env = get_default_environment()
    env["PYTHONPATH"] = str(REPO)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxnb", "mcp", "serve", str(ws)], env=env
    )
    times: list[float] = []
    with anyio.fail_after(600):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as session:
                await session.initialize()
                for i in range(warmup + calls):
                    t0 = time.perf_counter()
                    res = await session.call_tool("read_file", {"path": path})
                    dt = time.perf_counter() - t0
                    if res.is_error:
                        raise SystemExit(f"read_file failed over MCP: {res.content}")
                    if i >= warmup:
                        times.append(dt)
    return times


def _dispatch_times(ws: Path, path: str, calls: int, warmup: int) -> list[float]:
    times: list[float] = []
    with Workspace.open(ws) as workspace:
        tools = workspace.tools(workspace.session("bench-dispatch"), caller="bench")
        for i in range(warmup + calls):
            t0 = time.perf_counter()
            out = tools.dispatch("read_file", {"path": path})
            dt = time.perf_counter() - t0
            if not out["ok"]:
                raise SystemExit(f"read_file failed in process: {out}")
            if i >= warmup:
                times.append(dt)
    return times


def _serve_http(ws: Path) -> tuple[subprocess.Popen[str], str]:
    """``ctxnb mcp serve WS --http 0`` in a subprocess, and the URL it listens on."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "ctxnb", "mcp", "serve", str(ws), "--http", "0"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on " in line:
            return proc, line.split("listening on ", 1)[1].split()[0]
    raise SystemExit(f"the MCP HTTP server did not start (exit {proc.wait()})")


async def _b_times(b: ClientSession, path: str, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        res = await b.call_tool("read_file", {"path": path})
        times.append(time.perf_counter() - t0)
        if res.is_error:
            raise SystemExit(f"read_file failed over MCP HTTP: {res.content}")
    return times


async def _waiting_times(url: str, path: str, calls: int) -> tuple[list[float], list[float]]:
    """Client B's call times with nobody waiting, then while client A waits on its
    approval (checked still pending after B's last call)."""
    asked, answer = anyio.Event(), anyio.Event()

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await answer.wait()  # A's user thinks while B works
        return types.ElicitResult(action="decline")

    async def client_a() -> None:
        async with (
            streamable_http_client(url) as (r, w),
            ClientSession(r, w, read_timeout_seconds=600, elicitation_callback=on_elicit) as a,
        ):
            await a.initialize()
            await a.call_tool("select_active_intent", {"intent_id": "INT-BENCH"})
            await a.call_tool("run_command", {"cmd": "rm inventory/report.py"})

    with anyio.fail_after(600):
        async with (
            streamable_http_client(url) as (r, w),
            ClientSession(r, w, read_timeout_seconds=60) as b,
        ):
            await b.initialize()
            await _b_times(b, path, 5)  # warm up
            alone = await _b_times(b, path, calls)
            async with anyio.create_task_group() as tg:
                tg.start_soon(client_a)
                await asked.wait()
                during = await _b_times(b, path, calls)
                if answer.is_set():
                    raise SystemExit("A's approval was answered before B's calls ended")
                answer.set()
    return alone, during


def _waiting(path: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = copy_sample_workspace(tmp, name="governed")
        init_governance(ws)
        (ws / ".orchestration" / "active_intents.yaml").write_text(_INTENTS, encoding="utf-8")
        proc, url = _serve_http(ws)
        try:
            alone, during = anyio.run(_waiting_times, url, path, calls)
        finally:
            proc.terminate()
            proc.wait(30)

    def row(name: str, times: list[float]) -> str:
        median = statistics.median(times) * 1000
        p95 = statistics.quantiles(times, n=20)[-1] * 1000
        return (
            f"  {name:<32}{median:8.3f} ms   (p95 {p95:.3f} ms, slowest {max(times) * 1000:.3f} ms)"
        )

    print(f"MCP HTTP: client B's read_file, {calls} calls each, median per call:")
    print(row("nobody waiting (baseline)", alone))
    print(row("while A waits on its approval", during))
    ratio = statistics.median(during) / statistics.median(alone)
    print(f"  ratio waiting / baseline        {ratio:8.2f}x")
    p95 = statistics.quantiles(during, n=20)[-1] * 1000
    verdict = "meets" if p95 <= WAITING_TARGET_MS else "misses"
    print(f"  target: B answered within {WAITING_TARGET_MS:g} ms while A waits (p95): {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="timed calls of each kind")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    ap.add_argument("--file", default="README.md", help="workspace file to read")
    ap.add_argument("--no-conformance", action="store_true", help="skip the conformance run")
    ap.add_argument("--waiting-calls", type=int, default=50,
                    help="client B's timed calls, alone and while A waits")  # fmt: skip
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ws = copy_sample_workspace(tmp)
        size = (ws / args.file).stat().st_size
        mcp_times = anyio.run(_mcp_times, ws, args.file, args.calls, args.warmup)
        local_times = _dispatch_times(ws, args.file, args.calls, args.warmup)

    mcp_ms = statistics.median(mcp_times) * 1000
    local_ms = statistics.median(local_times) * 1000
    p95 = statistics.quantiles(mcp_times, n=20)[-1] * 1000
    print(f"read_file on {args.file} ({size} bytes), {args.calls} calls each, median per call:")
    print(f"  MCP over stdio (ClientSession)  {mcp_ms:8.3f} ms   (p95 {p95:.3f} ms)")
    print(f"  in-process dispatch             {local_ms:8.3f} ms")
    print(f"  ratio MCP / in-process          {mcp_ms / local_ms:8.2f}x")
    verdict = "meets" if mcp_ms <= TARGET_MS else "misses"
    print(f"  target <= {TARGET_MS:g} ms per MCP call: {verdict}")
    _waiting(args.file, args.waiting_calls)
    if not args.no_conformance:
        _conformance()


def _conformance() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    import mcp_conformance

    print("MCP conformance suite (server scenarios each revision requires):")
    if (why := mcp_conformance.missing()) is not None:
        print(f"  not run: {why}")
        return
    for line in mcp_conformance.counts(mcp_conformance.run_all()).splitlines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
