"""Benchmark ctxnb.tools.search against ``grep -rn`` on a copy of the standard library.

Copies the Python standard library (``sysconfig.get_paths()["stdlib"]``) to a
temporary directory, then times, for each pattern, ``grep -rn`` and
``ctxnb.tools.search.search`` with the ripgrep backend and the pure-Python backend,
and the governed ``FileTools.search`` an agent calls (capped at its default 200 hits,
the backend ``auto`` picks), all in the same run. Prints the median of several runs
and the ratio to grep.

Then paging: page 50 of a query with more than 10,000 hits (``self``, 200 hits a page)
against page 1 of it, in turn (target <= 1.5x): page 50 with the cursor page 49 gave
(it names the last hit, so only the files from there on are read again) and with the
offset cursor of before (``"9800"``: every earlier hit found and re-read again).

Run with::

    python bench/tools_search.py [--repeat 5]

The ripgrep figures are skipped when ``rg`` is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ctxnb import Workspace
from ctxnb.tools.search import ripgrep_available, search

PATTERNS: list[tuple[str, str]] = [
    # (label, pattern) — patterns in the dialect both grep -E and ctxnb accept
    ("rare literal", "NotImplementedError"),
    ("common literal", "import"),
    ("regex", r"def [a-z_]+\(self"),
    ("no match", "zzqqxxnotfound"),
]


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _copy_stdlib(dest: Path) -> Path:
    src = Path(sysconfig.get_paths()["stdlib"])
    target = dest / "stdlib"
    # site-packages and caches are not the standard library and would dominate.
    shutil.copytree(
        src,
        target,
        symlinks=True,
        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc"),
    )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = _copy_stdlib(Path(tmp))
        n_files = sum(1 for p in root.rglob("*") if p.is_file())
        print(f"corpus: {root} ({n_files} files)")
        have_rg = ripgrep_available()
        ws = Workspace.open(root)
        tools = ws.tools(ws.session("bench", rules=False))
        header = f"{'pattern':<16}{'hits':>7}{'grep s':>9}{'rg s':>9}{'rg/grep':>9}"
        print(header + f"{'py s':>9}{'py/grep':>9}{'tool s':>9}{'tool/grep':>10}")
        for label, pattern in PATTERNS:
            cmd = ["grep", "-rnE", "--binary-files=without-match", pattern, "."]

            def run_grep(cmd: list[str] = cmd) -> object:
                return subprocess.run(cmd, cwd=root, capture_output=True, check=False)

            grep_s = _median_seconds(run_grep, args.repeat)
            hits = len(search(root, pattern, backend="python"))
            rg_s = (
                _median_seconds(lambda p=pattern: search(root, p, backend="ripgrep"), args.repeat)
                if have_rg
                else float("nan")
            )
            py_s = _median_seconds(lambda p=pattern: search(root, p, backend="python"), args.repeat)
            tool_s = _median_seconds(lambda p=pattern: tools.search(p), args.repeat)
            print(
                f"{label:<16}{hits:>7}{grep_s:>9.3f}{rg_s:>9.3f}{rg_s / grep_s:>9.2f}"
                f"{py_s:>9.3f}{py_s / grep_s:>9.2f}{tool_s:>9.3f}{tool_s / grep_s:>10.2f}"
            )
        print("target: rg/grep <= 1.5; tool/grep <= 1.5 for many-hit patterns")
        _pages(tools, args.repeat)
        ws.close()


def _pages(tools: object, repeat: int) -> None:
    """Page 50 against page 1 of a query with over 10,000 hits, timed in turn."""
    search = tools.search  # type: ignore[attr-defined]
    cursor = None
    for _ in range(49):
        cursor = search("self", cursor=cursor).cursor
    assert cursor is not None, "fewer than 10,000 hits of 'self'"
    rows: list[tuple[float, float, float]] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        search("self")
        t1 = time.perf_counter()
        search("self", cursor=cursor)
        t2 = time.perf_counter()
        search("self", cursor="9800")
        rows.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
    med = statistics.median
    first, fiftieth, offset = (med(r[k] for r in rows) for k in range(3))
    ratio = med(r[1] / r[0] for r in rows)
    print(f"search 'self', 200 a page: page 1 {first:.3f} s, page 50 {fiftieth:.3f} s")
    print(f"    page 50 / page 1: {ratio:.2f}x (target <= 1.5x)")
    print(f"    page 50 by offset (as before): {offset:.3f} s, {offset / first:.2f}x page 1")


if __name__ == "__main__":
    main()
