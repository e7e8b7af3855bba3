"""``ws.why(file)`` for every line of a large file with many recorded changes, after a
rebase moved every line, vs ``git blame --line-porcelain`` of the same file.

The file is ``argparse.py`` of the running Python (about 2,600 lines). ``CHANGES``
recorded AI changes (a record, the new version observed into the store, a commit each)
edit or insert a few lines at spread-out places; then the branch is rebased onto a
commit that adds lines at the top, so no range is in place any more and every record is
matched through a diff with its stored version (the slowest path). Both tools answer
who wrote each line; git blame walks the commits, why reads the ledger and the store.

Usage: python bench/why.py [CHANGES]
"""

from __future__ import annotations

import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import git_env, stdlib_dir  # noqa: E402

from ctxnb import Workspace  # noqa: E402
from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.govern.ledger import TraceLedger, build_trace_record  # noqa: E402
from ctxnb.tools.patching import changed_line_ranges  # noqa: E402

FILE = "argparse.py"


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=git_env()
    )
    return out.stdout


def main() -> None:
    changes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-why-"))
    try:
        root = base / "repo"
        root.mkdir()
        shutil.copy(stdlib_dir() / FILE, root / FILE)
        git(root, "init", "-q", "-b", "main")
        init_governance(root)
        (root / ".git" / "info" / "exclude").write_text(".ctxnb/\n.orchestration/\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "base")
        ws = Workspace.open(root)
        ws.observe([FILE])
        ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
        rng = random.Random(7)
        for k in range(changes):
            old = (root / FILE).read_text()
            lines = old.splitlines(keepends=True)
            at = rng.randrange(20, len(lines))  # away from the header the rebase adds
            new_lines = [
                f"    change_{k}_{j} = {rng.random()!r}\n" for j in range(rng.randint(1, 4))
            ]
            lines[at : at + rng.randint(0, 2)] = new_lines
            new = "".join(lines)
            (root / FILE).write_text(new)
            ledger.append(
                build_trace_record(
                    file_path=FILE,
                    ranges=changed_line_ranges(old, new),
                    new_text=new,
                    intent_id="INT-1",
                    session_id=None,
                    model_id="acme/bench",
                    repo_root=root,
                    tool="apply_patch",
                )
            )
            ws.observe([FILE])
            git(root, "commit", "-q", "-am", f"change {k}")
        base_sha = git(root, "rev-list", "--max-parents=0", "HEAD").strip()
        git(root, "checkout", "-q", "-b", "upstream", base_sha)
        text = (root / FILE).read_text()
        (root / FILE).write_text("# upstream header\n" * 5 + text)
        git(root, "commit", "-q", "-am", "upstream")
        git(root, "checkout", "-q", "main")
        git(root, "rebase", "-q", "upstream")
        ws.close()

        n_lines = len((root / FILE).read_text().splitlines())
        whys, ones, blames = [], [], []
        attributed = 0
        for _ in range(5):
            ws = Workspace.open(root)
            t = time.perf_counter()
            result = ws.why(FILE)
            whys.append(time.perf_counter() - t)
            attributed = n_lines - len(result.unattributed)
            t = time.perf_counter()
            ws.why(FILE, n_lines // 2)
            ones.append(time.perf_counter() - t)
            ws.close()
            t = time.perf_counter()
            git(root, "blame", "--line-porcelain", FILE)
            blames.append(time.perf_counter() - t)
        mw, mb = statistics.median(whys), statistics.median(blames)
        print(f"{FILE}: {n_lines} lines, {changes} recorded changes, rebased (all moved)")
        print(f"ws.why(file), lines attributed: {attributed}")
        print(f"ws.why(file)                median {mw * 1000:8.1f} ms")
        print(f"ws.why(file, line)          median {statistics.median(ones) * 1000:8.1f} ms")
        print(f"git blame --line-porcelain  median {mb * 1000:8.1f} ms")
        print(f"  ratio (whole file) {mw / mb:.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
