"""Benchmark the mutation class of a one-line edit: the whole file against its region.

For a small (20 lines), a medium (~500 lines, ``textwrap``) and a large (~4,600 lines,
``tkinter``) Python file from this interpreter's standard library, a one-line edit in
the middle of a function is classified, and for an ``INTENT_EVOLUTION`` its touched
symbols are named, as the recorder does after every governed write:

- whole file: the comparison as it was before the region (both texts parsed whole);
- region, cold: nothing known about the old text, as in a one-shot hook process (one
  parse of the old text, then only the changed statements of the new one);
- region, warm: the old text was the previous write's new text, as in a long-lived
  process (only the changed statements are parsed).

``--check`` also compares the two answers (class and touched symbols) on random edits of
the standard library's modules and on every Python file each commit of this repository
changed, and fails on the first that differs.

Run with::

    python bench/mutation.py [--repeat 15] [--check] [--edits 4000] [--commits 300]
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import ctxnb.govern._regions as regions
import ctxnb.govern.mutation as mutation
from ctxnb.govern.mutation import classify_mutation, touched_symbols

STDLIB = Path(ast.__file__).parent
REPO = Path(__file__).resolve().parent.parent


def _reset() -> None:
    mutation._forget()


def _record(old: str, new: str) -> tuple[str, list[str]]:
    """What the recorder asks of a change."""
    mclass = classify_mutation("m.py", old, new)
    symbols = touched_symbols("m.py", old, new) if mclass == "INTENT_EVOLUTION" else []
    return mclass, symbols


def _whole(old: str, new: str) -> tuple[str, list[str]]:
    saved = mutation._region
    mutation._region = lambda old, new: None  # type: ignore[assignment]
    try:
        return _record(old, new)
    finally:
        mutation._region = saved


def _small() -> str:
    return (
        "".join(f"def f{n}(x):\n    y = x + {n}\n    return y\n\n\n" for n in range(4))
        + "LIMIT = 1\n"
    )


def _edits(text: str) -> tuple[str, str]:
    """A comment added to, and the meaning changed of, one line in the middle."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    for i in sorted(range(len(lines)), key=lambda i: abs(i - middle)):
        if re.match(r"^ +return [\w.]+\n$", lines[i]):
            break
    else:
        raise SystemExit("no one-line return statement to edit")
    comment = [*lines[:i], lines[i].rstrip("\n") + "  # why\n", *lines[i + 1 :]]
    meaning = [*lines[:i], lines[i].replace("return ", "return not ", 1), *lines[i + 1 :]]
    return "".join(comment), "".join(meaning)


def _time(fn: Callable[[], object], prepare: Callable[[], object], repeat: int) -> float:
    spent = []
    for _ in range(repeat):
        prepare()
        start = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent) * 1000


def bench_sizes(repeat: int) -> None:
    files = [
        ("small", _small()),
        ("medium", (STDLIB / "textwrap.py").read_text()),
        ("large", (STDLIB / "tkinter" / "__init__.py").read_text()),
    ]
    print("one-line edit: mutation class (+ touched symbols when it is an evolution), median ms")
    print(
        f"    {'file':<8} {'lines':>6} {'edit':<9} {'whole':>8} {'cold':>8} {'warm':>8} "
        f"{'whole/cold':>10} {'whole/warm':>10}"
    )
    for label, old in files:
        for kind, new in zip(("comment", "meaning"), _edits(old), strict=True):
            expected = _whole(old, new)
            assert _record(old, new) == expected, (label, kind)
            whole = _time(lambda o=old, n=new: _whole(o, n), _reset, repeat)
            cold = _time(lambda o=old, n=new: _record(o, n), _reset, repeat)

            def warm_up(old: str = old) -> None:
                _reset()
                regions._pieces_of(old)

            warm = _time(lambda o=old, n=new: _record(o, n), warm_up, repeat)
            print(
                f"    {label:<8} {old.count(chr(10)):>6} {kind:<9} {whole:8.3f} {cold:8.3f} "
                f"{warm:8.3f} {whole / cold:9.1f}x {whole / warm:9.1f}x  ({expected[0]})"
            )


# --------------------------------------------------------------------------- checking


def _random_edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or ["\n"]
    i = rng.randrange(len(lines))
    line = lines[i]
    names = re.findall(r"\b[A-Za-z_]\w*\b", line)
    choice = rng.randrange(8)
    if choice == 0 and names:  # rename, in the line, nearby or everywhere
        name = rng.choice(names)
        lo, hi = rng.choice([(i, i + 1), (max(0, i - 10), i + 10), (0, len(lines))])
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        for j in range(lo, min(hi, len(lines))):
            lines[j] = pattern.sub(name + "_2", lines[j])
    elif choice == 1:
        lines[i] = re.sub(r"\d+", lambda m: str(int(m.group()) + 1), line, count=1)
    elif choice == 2:
        lines.insert(i, rng.choice(["", "    ", "        "]) + "# note\n")
    elif choice == 3:
        lines[i] = line.replace(" = ", "=").replace(", ", ",")
    elif choice == 4:
        del lines[i : i + rng.choice([1, 2, 6])]
    elif choice == 5:
        lines.insert(i, rng.choice(['"""\n', "(\n", "\\\n", "@wrap\n", "x = 1\n", "\tpass\n"]))
    elif choice == 6:
        lines[i] = rng.choice(["    ", ""]) + line.lstrip(" ")
    else:
        lines.insert(i, line)
    return "".join(lines)


def _stdlib_pairs(edits: int, rng: random.Random) -> Iterator[tuple[str, str, str]]:
    sources = sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts)
    per_file = 10
    for path in rng.sample(sources, min(len(sources), edits // per_file)):
        text = path.read_text("utf-8", errors="replace")
        for _ in range(per_file):
            yield str(path.relative_to(STDLIB)), text, _random_edit(text, rng)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout


def _history_pairs(commits: int) -> Iterator[tuple[str, str, str]]:
    """(label, before, after) of every Python file each of the last commits changed."""
    for commit in _git("log", "--no-merges", f"-{commits}", "--format=%H").split():
        changed = _git("diff-tree", "-r", "--no-commit-id", "--name-status", commit)
        for line in changed.splitlines():
            status, _, path = line.partition("\t")
            if status == "M" and path.endswith(".py"):
                yield (
                    f"{commit[:9]}:{path}",
                    _git("show", f"{commit}^:{path}"),
                    _git("show", f"{commit}:{path}"),
                )


def check(edits: int, commits: int) -> None:
    rng = random.Random(31)
    for label, pairs in (
        ("random edits of the standard library", _stdlib_pairs(edits, rng)),
        ("this repository's commits", _history_pairs(commits)),
    ):
        total = regions = 0
        classes: dict[str, int] = {}
        for name, old, new in pairs:
            if old == new:
                continue
            _reset()
            expected = _whole(old, new)
            _reset()
            got = _record(old, new)
            if got != expected:
                raise SystemExit(f"{name}: region {got} != whole file {expected}")
            try:
                regions += mutation._region(old, new) is not None
            except (SyntaxError, ValueError):
                pass
            total += 1
            classes[expected[0]] = classes.get(expected[0], 0) + 1
        print(
            f"check, {label}: {total} pairs, all identical to the whole-file answer "
            f"({regions} answered from their region; {classes})"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per figure")
    parser.add_argument("--check", action="store_true", help="compare answers, region vs whole")
    parser.add_argument("--edits", type=int, default=4000, help="random edits to check")
    parser.add_argument("--commits", type=int, default=300, help="commits to check")
    args = parser.parse_args(argv)
    bench_sizes(args.repeat)
    if args.check:
        check(args.edits, args.commits)


if __name__ == "__main__":
    main()
