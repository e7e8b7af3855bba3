"""Time rules discovery, tier-3 path checks and tier-2 queries on a large generated tree.

Builds, in a temporary directory, a workspace with ``--dirs`` rules files (a tree with
branching 8: the root, 8 children, 64 grandchildren, ...), each ``AGENTS.md`` holding
``--links`` markdown links to docs in its own folder, plus two code files per folder.
The defaults give 500 rules files and 5,000 links. Then it reports:

1. discovery: :meth:`ctxnb.instructions.RulesIndex.discover` over the tree;
2. tier 3, index side: ``index.for_path`` for random code files;
3. tier 3, tracker side, nothing new to load: ``tracker.on_tool_call`` with a
   ``read_file`` path and with a shell ``cat`` command, after every folder's rules are
   already loaded (the target is 0.2 ms per call);
4. tier 3 when a load happens: a fresh tracker, one call per folder not yet loaded
   (each new rules file is indexed and stored in its own store transaction);
5. tier 2: ``index.match`` for random three-word queries; ``tracker.refresh`` (the
   stat check of every loaded file that ``on_query`` starts with); ``tracker.on_query``
   while it loads links and once they are loaded.

Run: ``python bench/rules.py [--dirs 500] [--links 10] [--calls 10000]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ctxnb import Workspace  # noqa: E402
from ctxnb.instructions import RulesIndex, RulesTracker  # noqa: E402

TOPICS = """api auth billing cache cli config database deploy docs errors events export
flags forms i18n import jobs logging metrics migrations models network notifications
payments permissions plugins queue reports search security sessions storage streaming
sync templates testing tracing uploads users validation webhooks workers""".split()
ASPECTS = """style guide checklist conventions rules howto overview reference patterns
pitfalls limits naming layout review release rollout""".split()


def build_tree(root: Path, n_dirs: int, links_per_file: int, rng: random.Random) -> list[str]:
    """Write the tree; return the workspace-relative paths of its code files."""
    dirs = [""]
    i = 0
    while len(dirs) < n_dirs:
        parent = dirs[i]
        for c in range(8):
            if len(dirs) >= n_dirs:
                break
            dirs.append(f"{parent}/d{c}" if parent else f"d{c}")
        i += 1
    code: list[str] = []
    for n, d in enumerate(dirs):
        folder = root / d if d else root
        (folder / "docs").mkdir(parents=True, exist_ok=True)
        lines = [f"# Rules for {d or 'the project'}", ""]
        for k in range(links_per_file):
            topic, aspect = rng.choice(TOPICS), rng.choice(ASPECTS)
            doc = f"docs/{topic}-{aspect}-{k}.md"
            (folder / doc).write_text(f"# {topic.title()} {aspect}\n\nDetails for {d}.\n")
            lines.append(f"- Before changing {topic}, read the [{topic} {aspect}]({doc}).")
        (folder / "AGENTS.md").write_text("\n".join(lines) + "\n")
        for name in (f"mod{n}.py", f"util{n}.py"):
            (folder / name).write_text("X = 1\n")
            code.append(f"{d}/{name}" if d else name)
    return code


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call of ``fn`` over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=500, help="rules files (one per folder)")
    ap.add_argument("--links", type=int, default=10, help="links per rules file")
    ap.add_argument("--calls", type=int, default=10_000, help="tool calls to time")
    ap.add_argument("--queries", type=int, default=500, help="tier-2 queries to time")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="ctxnb-rules-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        code = build_tree(root, args.dirs, args.links, rng)
        print(
            f"tree: {args.dirs} AGENTS.md, {args.dirs * args.links} links, "
            f"{len(code)} code files (written in {time.perf_counter() - t0:.2f} s)"
        )

        ws = Workspace.open(root)
        t0 = time.perf_counter()
        index = RulesIndex.discover(ws)
        took = time.perf_counter() - t0
        print(
            f"discovery: {took * 1000:.0f} ms for {len(index.files)} rules files and "
            f"{len(index.links())} links"
        )

        paths = [rng.choice(code) for _ in range(args.calls)]
        it = iter(paths * 2)
        t = per_call(lambda: index.for_path(next(it)), args.calls)
        print(f"tier 3, index.for_path: {t * 1e6:.1f} us per call")

        # A fresh tracker: each call into a new folder loads its missing rules files.
        cold = RulesTracker(ws.session("bench-cold"), index, skills=False)
        leaves = [p for p in code if p.count("/") >= 3]
        rng.shuffle(leaves)
        samples = []
        for p in leaves[:100]:
            t0 = time.perf_counter()
            got = cold.on_tool_call("read_file", {"path": p})
            dt = time.perf_counter() - t0
            if got:
                samples.append((dt, len(got)))
        if samples:
            med = statistics.median(dt for dt, _ in samples)
            files = statistics.mean(n for _, n in samples)
            print(
                f"tier 3, a call that loads rules: median {med * 1000:.1f} ms "
                f"({len(samples)} calls, {files:.1f} new rules files each; each file is "
                "one store transaction)"
            )

        # Tracker with every folder's rules already loaded: checks find nothing new.
        session = ws.session("bench-warm")
        tracker = RulesTracker(session, index, skills=False)
        for p in code:
            tracker.on_tool_call("read_file", {"path": p})
        print(f"  (warm-up: {len(tracker.records)} rules files loaded)")

        it = iter(paths * 2)
        t = per_call(lambda: tracker.on_tool_call("read_file", {"path": next(it)}), args.calls)
        ok = "ok" if t <= 0.2e-3 else "OVER TARGET"
        print(
            f"tier 3, tracker.on_tool_call(read_file), nothing to load: "
            f"{t * 1e6:.1f} us per call [{ok}: target 200 us]"
        )
        cmds = [f"sed -n '1,40p' {p} | head -20" for p in paths]
        it = iter(cmds * 2)
        t = per_call(lambda: tracker.on_tool_call("bash", {"command": next(it)}), args.calls)
        ok = "ok" if t <= 0.2e-3 else "OVER TARGET"
        print(
            f"tier 3, tracker.on_tool_call(bash sed|head), nothing to load: "
            f"{t * 1e6:.1f} us per call [{ok}: target 200 us]"
        )
        t = per_call(lambda: index.paths_in_command(cmds[0]), 1000)
        print(f"  (a full parse of that command, when something may load: {t * 1e6:.0f} us)")

        queries = [
            f"{rng.choice(TOPICS)} {rng.choice(ASPECTS)} {rng.choice(TOPICS)}"
            for _ in range(args.queries)
        ]
        it = iter(queries * 2)
        t = per_call(lambda: index.match(next(it)), args.queries)
        print(f"tier 2, index.match: {t * 1000:.2f} ms per query over {len(index.links())} links")
        t = per_call(tracker.refresh, 20)
        print(f"tier 2, tracker.refresh (stat of {len(tracker.records)} files): {t * 1e3:.2f} ms")
        # Links load once; the first pass loads, later passes find them loaded.
        few = queries[:50]
        t0 = time.perf_counter()
        loads = sum(len(tracker.on_query(q)) for q in few)
        first = (time.perf_counter() - t0) / len(few)
        t = per_call(lambda: [tracker.on_query(q) for q in few], 1) / len(few)
        print(
            f"tier 2, tracker.on_query: {first * 1000:.1f} ms per query while loading "
            f"({loads} links over {len(few)} queries), {t * 1000:.1f} ms once loaded"
        )
        ws.close()


if __name__ == "__main__":
    main()
