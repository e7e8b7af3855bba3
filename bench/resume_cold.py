"""Resume a stored session in a fresh process, against ``git status`` processes.

The session of ``bench/resume.py`` (every file of the standard-library corpus, about
2,450, nothing changed), resumed as a user meets it: a new interpreter that imports
ctxnb, opens the workspace and resumes (``Workspace.open(root).session(id)``), against
``git status`` on the same tree. Target (issue 46): ≤ 5x ``git status``.

Each pair runs in turn (A B A B …) after a warm-up, so load on a shared machine falls on
both alike; wall and CPU time (user + sys of the child) are printed, with the ratio of
each pair's medians. ``--breakdown`` then times the parts of one fresh resume: the
interpreter alone, ``from ctxnb import Workspace``, the open, the resume, and prints the
resume's top functions by cumulative time (cProfile) and its slowest imports
(``-X importtime``).

Usage: python bench/resume_cold.py [--repeat N] [--runs R] [--breakdown] [--keep | --root DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, git_env  # noqa: E402

TARGET = 5.0
SID = "bench-resume"

# The resumed session must find nothing changed, or the figure times something else.
RESUME = f"""
import sys
from ctxnb import Workspace
s = Workspace.open(sys.argv[1]).session({SID!r})
r = s.last_resume
assert r is not None and not r.updated and not r.deleted and not r.hashed, r
"""


def build(base: Path, env: dict[str, str]) -> Path:
    """The corpus under git, indexed, one session holding every file, saved and resumed."""
    root = copy_corpus(base / "stdlib")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    (root / ".git" / "info" / "exclude").write_text(".ctxnb/\n")
    time.sleep(2.1)  # past the racy-clean window, as a real tree is
    # In a process of its own, as a user's earlier run of the agent was.
    setup = f"""
import sys
from ctxnb import Workspace
ws = Workspace.open(sys.argv[1])
rep = ws.index(progress=False)
s = ws.session({SID!r})
for rel in sorted(rep.changed_paths):
    s.add(ws.object_id(rel), activate=False)
s.save()
ws.store.compact()
ws.session({SID!r})  # records the stat cache of every file
print(len(s.session_index))
"""
    out = subprocess.run(
        [sys.executable, "-c", setup, str(root)], check=True, capture_output=True, text=True
    )
    print(f"session with {out.stdout.strip()} files")
    return root


def once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of argv as its own process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[:3]} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def pairs(root: Path, env: dict[str, str], runs: int) -> tuple[float, float]:
    """One run: ``runs`` pairs in turn; prints and returns the (wall, cpu) ratios."""
    a = [sys.executable, "-c", RESUME, str(root)]
    b = ["git", "status"]
    once(a, root, env), once(b, root, env)  # warm-up: bytecode, the page cache
    rows = [(once(a, root, env), once(b, root, env)) for _ in range(runs)]
    med = statistics.median
    aw, bw = med(r[0][0] for r in rows), med(r[1][0] for r in rows)
    ac, bc = med(r[0][1] for r in rows), med(r[1][1] for r in rows)
    wr, cr = aw / bw, ac / max(bc, 1e-3)
    verdict = "meets" if wr <= TARGET else "misses"
    print(f"fresh process open + resume vs git status ({runs} pairs, medians)")
    print(f"    wall: {aw * 1e3:7.1f} ms vs {bw * 1e3:6.1f} ms  {wr:5.2f}x ({verdict} <= 5x)")
    print(f"    cpu:  {ac * 1e3:7.1f} ms vs {bc * 1e3:6.1f} ms  {cr:5.2f}x")
    return wr, cr


PARTS = f"""
import time, sys
t0 = time.perf_counter()
from ctxnb import Workspace
t1 = time.perf_counter()
ws = Workspace.open(sys.argv[1])
t2 = time.perf_counter()
s = ws.session({SID!r})
t3 = time.perf_counter()
print(f"{{(t1 - t0) * 1e3:.1f}} {{(t2 - t1) * 1e3:.1f}} {{(t3 - t2) * 1e3:.1f}}")
mods = sorted(m for m in ("numpy", "pyarrow", "pandas", "pydantic") if m in sys.modules)
print(" ".join(mods) or "-")
"""

PROFILE = f"""
import cProfile, pstats, sys
from ctxnb import Workspace
ws = Workspace.open(sys.argv[1])
p = cProfile.Profile()
p.enable()
ws.session({SID!r})
p.disable()
pstats.Stats(p).sort_stats("cumulative").print_stats(25)
"""


def breakdown(root: Path, env: dict[str, str]) -> None:
    """Where one fresh resume's time goes."""
    bare = statistics.median(once([sys.executable, "-c", "pass"], root, env)[0] for _ in range(5))
    print(f"python -c pass: {bare * 1e3:.1f} ms wall")
    parts = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", PARTS, str(root)], env=env, capture_output=True, text=True
        )
        first, mods = out.stdout.splitlines()[:2]
        parts.append([float(x) for x in first.split()])
    imp, opn, res = (statistics.median(p[i] for p in parts) for i in range(3))
    print(f"import Workspace {imp:.1f} ms, open {opn:.1f} ms, resume {res:.1f} ms (medians of 5)")
    print(f"heavy modules loaded by the end: {mods}")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", RESUME, str(root)],
        env=env,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        us_self, cumulative, name = line[len("import time:") :].split("|", 2)
        rows.append((int(cumulative), int(us_self), name.rstrip()))
    top = [r for r in rows if not r[2].startswith("  ")]
    print("top-level imports by cumulative time (us):")
    for cum, _s, name in sorted(top, reverse=True)[:12]:
        print(f"    {cum:8d}  {name}")
    prof = subprocess.run(
        [sys.executable, "-c", PROFILE, str(root)], env=env, capture_output=True, text=True
    )
    print(prof.stdout[-6000:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs (each prints its ratio)")
    ap.add_argument("--runs", type=int, default=7, help="pairs per run")
    ap.add_argument("--breakdown", action="store_true", help="time the parts of one resume")
    ap.add_argument("--keep", action="store_true", help="keep the built tree (prints it)")
    ap.add_argument("--root", help="time a tree kept by --keep instead of building one")
    args = ap.parse_args()
    env = git_env()
    import ctxnb as package

    compileall.compile_dir(Path(package.__file__).parent, quiet=1)
    if args.root:  # a tree built by an earlier --keep run
        root = Path(args.root)
        ratios = [pairs(root, env, args.runs) for _ in range(args.repeat)]
        if args.breakdown:
            breakdown(root, env)
        return
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-resume-cold-"))
    try:
        root = build(base, env)
        ratios = [pairs(root, env, args.runs) for _ in range(args.repeat)]
        walls = sorted(r[0] for r in ratios)
        cpus = sorted(r[1] for r in ratios)
        print(
            f"{args.repeat} runs: wall {walls[0]:.2f}-{walls[-1]:.2f}x, "
            f"cpu {cpus[0]:.2f}-{cpus[-1]:.2f}x git status (target <= {TARGET:g}x)"
        )
        if args.breakdown:
            breakdown(root, env)
    finally:
        if args.keep:
            print(f"kept: --root {root}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
