"""``make demo``: a scripted agent session over the sample workspace.

Run with ``ctxnb demo`` (or ``python -m ctxnb.demo``). It works on a temporary copy of
the sample workspace (a small inventory tracker), so it can run any number of times;
``ctxnb demo --keep DIR`` leaves the copy in ``DIR/tinyinv``, store and ledger included,
for the other commands to look at:

1. index the workspace and show what the store holds;
2. govern it: ``.orchestration/`` with one intent;
3. a scripted agent reads, is refused once, declares its intent, edits, is refused out
   of its scope and on a stale version, runs the tests and one shell command confined to
   the intent's scope;
4. the context the model would see, under two strategies;
5. the Agent Trace ledger, summarized (with the confined command's record), and the
   edited file's history.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .govern.ledger import TraceLedger
from .samples import copy_sample_workspace
from .strategies.builtin import KeepAll, ObservationMasking
from .workspace import Workspace

INTENTS = """\
active_intents:
  - id: INT-001
    name: Raise the default reorder level
    status: active
    owned_scope: ["inventory/**", "tests/**"]
    constraints:
      - Money stays in integer cents
    acceptance_criteria:
      - python -m pytest -q passes
"""

SYSTEM_PROMPT = "You are a careful coding agent working on tinyinv. Cite an intent before editing."


def _h(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)))


def _git(root: Path, *args: str) -> bool:
    if shutil.which("git") is None:
        return False
    env_args = ["-c", "user.name=ctxnb demo", "-c", "user.email=demo@ctxnb.invalid"]
    proc = subprocess.run(["git", *env_args, *args], cwd=root, capture_output=True)
    return proc.returncode == 0


# What a person adds to inventory/models.py while the agent works: no record's line.
PERSONS_LINE = "# reviewed by a person\n"

# The sample's tests are unittest cases: the demo needs the core install only, no pytest.
RUN_TESTS = "python -m unittest discover -q -s tests"


def _held_for_approval(ws: Workspace, session: Any, root: Path) -> None:
    """A command whose text looks harmless but empties a file: its observed effect waits
    for a human, who sees the real diff; rejected, nothing happened."""
    from .govern.approval import CallbackApprover

    def review(req: Any) -> bool:
        print(f"      the approver is asked: {req.reason}")
        for line in req.args["diff"].splitlines()[:6]:
            print(f"        {line}")
        print("        ...")
        return False

    print("  a command that empties a file without saying so is held for a human, with")
    print("  the diff of what it did (on its overlay); the human says no:")
    reviewed = ws.tools(
        session,
        caller="scripted-agent",
        model_id="example/scripted-agent",
        approver=CallbackApprover(review, by="demo-reviewer"),
    )
    reviewed.dispatch("select_active_intent", {"intent_id": "INT-001"})
    cmd = "awk 'BEGIN{system(\"cp /dev/null inventory/report.py\")}'"
    held = reviewed.dispatch("run_command", {"cmd": cmd, "shell": True})
    lines = (root / "inventory" / "report.py").read_text().count("\n")
    print(f"      -> {held.get('error_code')}: inventory/report.py still has {lines} lines")


def _refusals_by_scope_and_staleness(tools: Any, root: Path, text: str, sha: str) -> None:
    """A write outside the intent's scope is refused; so is a write based on a version
    someone else has changed since the agent read it (the optimistic lock)."""
    print("  outside INT-001's scope, a write is refused even with the intent declared:")
    _call(tools, "write_file", {"path": "README.md", "content": "# tinyinv\n"})
    print("  a person edits inventory/models.py meanwhile; the agent's next write, based on")
    print("  the version it wrote, is stale and refused; it reads again:")
    models = root / "inventory" / "models.py"
    models.write_text(models.read_text() + PERSONS_LINE)
    later = text.replace("reorder_level: int = 10", "reorder_level: int = 12")
    args = {"path": "inventory/models.py", "content": later, "expected_sha256": sha}
    _call(tools, "write_file", args)
    _call(tools, "read_file", {"path": "inventory/models.py"})


def _call(tools: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    shown = ", ".join(f"{k}={v!r}" if len(repr(v)) < 50 else f"{k}=…" for k, v in args.items())
    out = tools.dispatch(name, args)
    if out["ok"]:
        res = out["result"]
        # A command that ran but failed is shown as a failure, not as a ✓.
        mark = "✗" if isinstance(res, dict) and res.get("returncode", 0) != 0 else "✓"
        if isinstance(res, dict) and "sha256" in res and "content" in res:
            brief = f"{res.get('total_lines')} lines, sha256 {res['sha256'][:12]}…"
        elif isinstance(res, dict) and "success" in res:
            brief = res["message"]
        elif isinstance(res, dict) and "returncode" in res:
            lines = res["stdout"].strip().splitlines() or res["stderr"].strip().splitlines()
            brief = f"exit {res['returncode']}: " + " ".join(ln for ln in lines[-3:] if ln)
        elif isinstance(res, str):
            brief = res.splitlines()[0] + f" … ({len(res.splitlines())} lines)"
        else:
            brief = str(res)[:80]
        print(f"  {mark} {name}({shown})\n      {brief}")
    else:
        print(f"  ✗ {name}({shown})\n      REFUSED {out['error_code']}: {out['message']}")
        print(f"      required action: {out['required_action']}")
    return out


def run(base: Path, *, kept: bool = False) -> Path:
    """The demo on a copy of the sample workspace made in ``base``; returns the copy."""
    root = copy_sample_workspace(base)
    has_git = (
        _git(root, "init", "-q")
        and _git(root, "add", "-A")
        and _git(root, "commit", "-q", "-m", "tinyinv 0.3.0")
    )
    git_note = ", a git repository" if has_git else ""
    where = "a copy of tinyinv, kept" if kept else "a temporary copy of tinyinv"
    print(f"sample workspace: {where}{git_note}")

    _h("1. index the workspace")
    ws = Workspace.open(root)
    report = ws.index(progress=False)
    print(report)

    _h("2. govern it")
    from .govern import init_governance

    created = init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    print("created " + ", ".join(str(p.relative_to(root)) for p in created))
    print("intent INT-001 owns inventory/** and tests/**")

    _h("3. a scripted agent session")
    session = ws.session("demo-agent", system_prompt=SYSTEM_PROMPT)
    tools = ws.tools(session, caller="scripted-agent", model_id="example/scripted-agent")
    session.add_turn("user", "Raise the default reorder level of items from 5 to 10.")
    _call(tools, "read_file", {"path": "AGENTS.md"})
    read = _call(tools, "read_file", {"path": "inventory/models.py"})
    text = read["result"]["content"]
    new_text = text.replace("reorder_level: int = 5", "reorder_level: int = 10")
    _call(tools, "write_file", {"path": "inventory/models.py", "content": new_text})
    session.add_turn("assistant", "I must declare my intent first: INT-001.")
    _call(tools, "select_active_intent", {"intent_id": "INT-001"})
    wrote = _call(
        tools,
        "write_file",
        {
            "path": "inventory/models.py",
            "content": new_text,
            "expected_sha256": read["result"]["sha256"],
        },
    )
    _refusals_by_scope_and_staleness(tools, root, new_text, wrote["result"]["sha256"])
    test = _call(tools, "read_file", {"path": "tests/test_models.py"})
    test_text = test["result"]["content"]
    extra = (
        "\n    def test_default_reorder_level_is_ten(self):\n"
        '        self.assertEqual(Item("A", "a", 1).reorder_level, 10)\n'
    )
    _call(
        tools,
        "write_file",
        {
            "path": "tests/test_models.py",
            "content": test_text + extra,
            "expected_sha256": test["result"]["sha256"],
        },
    )
    _call(tools, "run_command", {"cmd": RUN_TESTS})
    print("  a shell command runs confined (bubblewrap): only INT-001's scope is writable,")
    print("  .env is masked, no network, none of the caller's secret variables:")
    confined = _call(
        tools,
        "run_command",
        {"cmd": "printf '# reviewed\\n' >> inventory/report.py; cat .env", "shell": True},
    )
    if confined["ok"]:
        res = confined["result"]
        print(f"      stderr: {res['stderr'].strip()}")
        for change in res["effects"]["changed"]:
            print(f"      {change['kind']} {change['path']}: version {change['version'][-12:]}")
    _held_for_approval(ws, session, root)
    session.add_turn("assistant", "Done: the default reorder level is 10 and the tests pass.")

    _h("4. the context under two strategies (budget 3,000 tokens)")
    full = session.assemble(strategy=KeepAll(), budget=3000)
    masked = session.assemble(strategy=ObservationMasking(keep_last=1), budget=3000)
    for ctx in (full, masked):
        parts = ", ".join(f"{k} {v}" for k, v in ctx.tokens_by_section().items())
        n_masked = sum(it.masked for it in ctx.items)
        print(
            f"  {ctx.strategy['name']:<20} {ctx.total_tokens:>5} tokens ({parts}); "
            f"{len(ctx.items)} items, {n_masked} masked, {len(ctx.evicted)} evicted"
        )
    before = {it.id: it for it in full.items}
    for it in masked.items:
        if it.masked and it.id in before:
            print(f"  masked: {it.label[:60]} ({before[it.id].tokens} → {it.tokens} tokens)")

    _h("5. the Agent Trace ledger")
    ledger_path = root / ".orchestration" / "agent_trace.jsonl"
    records = list(TraceLedger(ledger_path).records())
    for rec in records:
        meta = rec.get("metadata", {})
        for f in rec["files"]:
            ranges = [
                (r["start_line"], r["end_line"]) for c in f["conversations"] for r in c["ranges"]
            ]
            rev = rec.get("vcs", {}).get("revision", "-")[:10]
            print(
                f"  {meta.get('intent_id')}  {f['path']:<22} lines {ranges}  "
                f"{meta.get('mutation_class')}  rev {rev}"
            )
    shell = [r for r in records if r.get("metadata", {}).get("tool") == "run_command"]
    if shell:
        print("  the confined command's record:")
        for line in json.dumps(shell[-1], indent=1).splitlines():
            print(f"    {line}")
    print(f"  {len(records)} records; intent map:")
    for line in (root / ".orchestration" / "intent_map.md").read_text().splitlines():
        if line.startswith(("## ", "- ")):
            print(f"    {line}")
    audit = tools.audit()
    print(
        f"  audit log: {len(audit)} calls, {int((~audit['success']).sum())} refused, "
        f"median {audit['duration_ms'].median():.2f} ms"
    )

    _h("6. history of inventory/models.py")
    for v in ws.history("inventory/models.py"):
        d = v.doc
        print(
            f"  {v.version_id[:12]}…@{v.tx_id:<3} {d['char_count']:>5} chars  {v.tx_time:%H:%M:%S}"
        )
    session.close()
    ws.close()
    return root


def main(keep: Path | None = None) -> int:
    """Run the demo in a temporary directory, or in ``keep`` (left in place)."""
    if keep is not None:
        root = run(keep, kept=True)
        print(f"\nthe workspace is kept in {root}; look around with, for example:")
        print(f"  ctxnb history inventory/models.py -w {root}")
        print(f"  ctxnb why inventory/models.py -w {root}")
        print(f"  ctxnb trace verify {root}")
        return 0
    with tempfile.TemporaryDirectory(prefix="ctxnb-demo-") as tmp:
        run(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
