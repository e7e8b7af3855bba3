"""Every exit toward a model or a log, driven for real on a corpus of files (bench/redact.py).

Each exit takes the planted files and returns, per file, the text that left ctxnb there:

- ``redact``: :func:`ctxnb.redaction.redact` on the file's text (the one pass itself);
- ``read``: ``read_file`` through the tool runner (``Workspace.tools().dispatch``);
- ``search``: ``search`` for the file's first line, restricted to the file by ``globs``;
- ``context``: the file activated in a session, the assembled context's text;
- ``command``: a governed ``run_command`` (bubblewrap overlay) that ``cat``s the files, its
  output split per file at markers it prints;
- ``trace+audit``: a governed ``write_file`` of the text to a new path: what the Agent
  Trace ledger and the audit log gained;
- ``mcp``: ``read_file`` through ctxnb's MCP server, over stdio, with the MCP SDK's client.

A secret leaks at an exit when it, or its JSON-escaped form, is in what left. A
look-alike is falsely redacted when a ``[REDACTED:`` marker is in what left.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[1]

INTENTS = """\
active_intents:
  - id: INT-001
    name: Redaction bench
    status: active
    owned_scope: ["**"]
"""


class Case(Protocol):
    kind: str
    name: str
    text: str
    secrets: tuple[str, ...]


def leaked(out: str, secret: str) -> bool:
    return secret in out or json.dumps(secret)[1:-1] in out


def _plant(root: Path, cases: Sequence[Case]) -> list[str]:
    rels = []
    for i, case in enumerate(cases):
        suffix = Path(case.name).suffix or ".txt"
        rel = f"corpus/{i:04d}-{case.kind}{suffix}"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(case.text, encoding="utf-8")
        rels.append(rel)
    return rels


def _repo(tmp: Path) -> Path:
    root = tmp / "ws"
    shutil.copytree(REPO / "data" / "sample_workspace", root)
    return root


def _git(root: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@ctxnb.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@ctxnb.invalid",
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
    }
    subprocess.run(["git", *args], cwd=root, check=True, env=env, capture_output=True)


def run_exits(
    cases: Sequence[Case], exits: Sequence[str], *, batch: int = 25
) -> dict[str, list[str]]:
    """For each exit, the text that left ctxnb for each case (in the order of ``cases``)."""
    from ctxnb import Workspace
    from ctxnb.govern import init_governance
    from ctxnb.redaction import redact

    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxnb-redact-exits-") as t:
        tmp = Path(t)
        root = _repo(tmp)
        rels = _plant(root, cases)
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "corpus")
        init_governance(root)
        (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
        ws = Workspace.open(root)
        session = ws.session("bench")
        tools = ws.tools(session, caller="agent", model_id="bench/model")
        assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
        drivers: dict[str, Callable[[], list[str]]] = {
            "redact": lambda: [redact(c.text).text for c in cases],
            "read": lambda: [json.dumps(tools.dispatch("read_file", {"path": r})) for r in rels],
            "search": lambda: [_search(tools, r, c) for r, c in zip(rels, cases, strict=True)],
            "context": lambda: [_context(ws, r) for r in rels],
            "command": lambda: _command(tools, rels, batch),
            "trace+audit": lambda: _write(tools, root, cases),
            "mcp": lambda: _mcp(root, rels, tmp),
        }
        for name in exits:
            out[name] = drivers[name]()
    return out


def _search(tools: Any, rel: str, case: Case) -> str:
    first = next((ln for ln in case.text.split("\n") if ln.strip()), "")
    pattern = first.strip()[:12]
    if not pattern:
        return ""
    res = tools.dispatch("search", {"pattern": pattern, "regex": False, "globs": [rel]})
    return json.dumps(res)


def _context(ws: Any, rel: str) -> str:
    session = ws.session(f"ctx-{abs(hash(rel))}")
    tools = ws.tools(session)
    tools.dispatch("read_file", {"path": rel})
    return str(session.assemble().to_text())


def _command(tools: Any, rels: list[str], batch: int) -> list[str]:
    texts: list[str] = []
    for i in range(0, len(rels), batch):
        part = rels[i : i + batch]
        loop = "for f in " + " ".join(part) + '; do echo "@@@@ $f"; cat "$f"; echo; done'
        res = tools.dispatch("run_command", {"cmd": "sh -c " + shlex.quote(loop)})
        result = res.get("result") or {}
        if not res.get("ok") or result.get("returncode") != 0 or result.get("truncated"):
            # A command that did not run shows no secret: that is no finding, say so.
            raise RuntimeError(f"the command exit did not run: {json.dumps(res)[:400]}")
        stdout = result["stdout"]
        pieces = {}
        for chunk in stdout.split("@@@@ ")[1:]:
            name, _, body = chunk.partition("\n")
            pieces[name.strip()] = body
        missing = [r for r in part if r not in pieces]
        if missing:
            raise RuntimeError(f"the command exit printed no output for {missing[:3]}")
        texts += [pieces[r] for r in part]
    return texts


def _write(tools: Any, root: Path, cases: Sequence[Case]) -> list[str]:
    trace = root / ".orchestration" / "agent_trace.jsonl"
    audit = root / ".ctxnb" / "audit.jsonl"
    texts = []
    for i, case in enumerate(cases):
        t0 = trace.read_text(encoding="utf-8") if trace.exists() else ""
        a0 = audit.read_text(encoding="utf-8") if audit.exists() else ""
        res = tools.dispatch("write_file", {"path": f"written/{i:04d}.txt", "content": case.text})
        t1 = trace.read_text(encoding="utf-8") if trace.exists() else ""
        a1 = audit.read_text(encoding="utf-8") if audit.exists() else ""
        texts.append(json.dumps(res) + t1[len(t0) :] + a1[len(a0) :])
    return texts


def _mcp(root: Path, rels: list[str], tmp: Path) -> list[str]:
    # bench/mcp.py would shadow the MCP SDK's package: import it without bench/ on the path.
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import mcp.client.session  # noqa: F401
        from _mcp_client import _text, run_async, stdio_session
    finally:
        sys.path[:] = saved

    texts: list[str] = []

    async def body() -> None:
        async with stdio_session(root, tmp / "mcp-err.log") as s:
            for rel in rels:
                res = await s.call_tool("read_file", {"path": rel})
                texts.append(_text(res) + json.dumps(res.structured_content))

    run_async(body, timeout=600)
    return texts
