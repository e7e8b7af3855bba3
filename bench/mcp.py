"""Benchmark an MCP ``read_file`` round trip over stdio against an in-process dispatch.

Copies the sample workspace to a temporary directory, starts ``python -m ctxnb mcp
serve`` as a subprocess and calls ``read_file`` on a small file through the MCP SDK's
``ClientSession`` (over ``stdio_client``), then makes the same call with
``FileTools.dispatch`` in this process. Prints the median time per call of each, the
ratio, and whether the MCP median meets the 5 ms target.

Then, where the official MCP conformance suite is installed (``npm ci --prefix
.ci/mcp-conformance``), prints how many of each revision's required server scenarios
``ctxnb mcp serve --http`` passes (``scripts/mcp_conformance.py``; ``--no-conformance``
leaves it out).

Run with::

    python bench/mcp.py [--calls 200] [--file README.md] [--no-conformance]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and this module (named
# mcp.py) would hide the MCP SDK's `mcp` package; drop that folder before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import (  # noqa: E402
    StdioServerParameters,
    get_default_environment,
    stdio_client,
)

from ctxnb import Workspace  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

TARGET_MS = 5.0
REPO = _HERE.parent


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="timed calls of each kind")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    ap.add_argument("--file", default="README.md", help="workspace file to read")
    ap.add_argument("--no-conformance", action="store_true", help="skip the conformance run")
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
