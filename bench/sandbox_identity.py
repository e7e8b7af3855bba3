"""Benchmark what denying by identity costs: git's object stores, and hard links.

(a) The plan of one command (``plan_sandbox``: the deny-list walk, the git object
stores' check, the hard links of denied files) on the sample workspace as a git
repository whose history holds ``.env``: with the store answer cached (every command
but the first after a change), cold (the cache removed: ``git rev-list`` runs), and
with ``git = "read"`` (no store check at all), in the same run.

(b) The cold store check alone (``git rev-list --objects`` read until a denied path) on a
generated repository of ``--commits`` commits over ``--files`` files, with a ``.env``
added and removed again in the first commits (``early``), in the last ones (``late``:
rev-list lists newest first, so this is the quickest answer) and nowhere (``none``:
every object is listed, the worst case and the common one).

(c) The file tools' policy on a copy of the standard library with one hard link of
``.env``: the first read of a file with several links (one walk of the denied names),
the next reads (remembered), and a read of a file with one link (nothing more).

Run with::

    python bench/sandbox_identity.py [--runs 20] [--commits 2000] [--files 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ctxnb.access.fdio import PathPolicy
from ctxnb.samples import copy_sample_workspace
from ctxnb.sandbox.plan import plan_sandbox

GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b.invalid", "-c", "init.defaultBranch=main"]


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, input=stdin)


def _median_ms(
    fn: Callable[[], object], runs: int, before: Callable[[], object] = lambda: None
) -> float:
    times = []
    for _ in range(runs):
        before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def bench_plan(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_sample_workspace(Path(tmp))
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "initial")  # the sample's .env is in the history
        cache = root / ".ctxnb" / "cache" / "git-stores.json"
        plan_sandbox(root)
        warm = _median_ms(lambda: plan_sandbox(root), runs)
        cold = _median_ms(lambda: plan_sandbox(root), runs, lambda: cache.unlink(missing_ok=True))
        read = _median_ms(lambda: plan_sandbox(root, git="read"), runs)
        os.link(root / ".env", root / "notes.txt")
        linked = _median_ms(lambda: plan_sandbox(root), runs)
        assert "notes.txt" in plan_sandbox(root).masked_files
    print("(a) plan_sandbox on the sample workspace (median ms)")
    print(f"    git = 'read' (no store check)      {read:8.2f}")
    print(f"    store answer cached                {warm:8.2f}   (+{warm - read:.2f})")
    print(f"    store answer cold (rev-list)       {cold:8.2f}   (+{cold - read:.2f})")
    print(f"    cached, and a hard link of .env    {linked:8.2f}   (+{linked - warm:.2f})")


def _history(root: Path, commits: int, files: int, env_at: int) -> None:
    """A fast-import stream: ``commits`` commits, each changing 5 of ``files`` files."""
    lines: list[bytes] = []
    for c in range(commits):
        lines.append(b"commit refs/heads/main")
        lines.append(b"committer b <b@b.invalid> %d +0000" % (1_700_000_000 + c))
        msg = b"c%d" % c
        lines.append(b"data %d" % len(msg))
        lines.append(msg)
        if c == 0:
            todo = range(files)
        else:
            todo = range(c * 5 % files, c * 5 % files + 5)
        for f in todo:
            body = b"file %d version %d\n" % (f, c)
            lines.append(b"M 100644 inline src/d%d/f%d.txt" % (f % 50, f))
            lines.append(b"data %d" % len(body))
            lines.append(body)
        if c == env_at:
            body = b"NOTE=secret\n"
            lines.append(b"M 100644 inline .env")
            lines.append(b"data %d" % len(body))
            lines.append(body)
        if c == env_at + 1:
            lines.append(b"D .env")
    _git(root, "fast-import", "--quiet", stdin=b"\n".join(lines) + b"\n")


def bench_history(commits: int, files: int) -> None:
    from ctxnb.sandbox.gitstores import stores_to_hide
    from ctxnb.sandbox.plan import _deny_matcher

    denied = _deny_matcher([".git", ".env*", "**/*.pem", "**/id_*", ".ctxnb/"])
    print(f"(b) cold store check, {commits} commits over {files} files (ms)")
    for label, env_at in (("early", 0), ("late", commits - 2), ("none", -5)):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            _git(root, "init", "-q")
            _history(root, commits, files, env_at)
            t = time.perf_counter()
            hidden = stores_to_hide(
                root,
                [".git"],
                denied=lambda p: denied(p, None),
                deny=[],
                denied_files=lambda: iter(()),
                cache_dir=None,
            )
            ms = (time.perf_counter() - t) * 1000
            listed = subprocess.run(
                ["git", "rev-list", "--objects", "--all"], cwd=root, capture_output=True
            ).stdout.count(b"\n")
        print(f"    .env {label:<6} hidden={bool(hidden)!s:<5} {ms:9.1f}   ({listed} objects)")


def bench_policy(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "stdlib"
        src = Path(sysconfig.get_paths()["stdlib"])
        shutil.copytree(src, root, symlinks=True,
                        ignore=shutil.ignore_patterns("site-packages", "__pycache__"))  # fmt: skip
        (root / ".env").write_text("NOTE=secret\n")
        (root / "one.txt").write_text("one\n")
        (root / "a.txt").write_text("a\n")
        os.link(root / "a.txt", root / "b.txt")
        n = sum(1 for _ in root.rglob("*"))
        first = []
        for _ in range(max(3, runs // 4)):
            policy = PathPolicy([root])
            t = time.perf_counter()
            policy.read_bytes("a.txt")
            first.append(time.perf_counter() - t)
        policy = PathPolicy([root])
        policy.read_bytes("a.txt")
        again = _median_ms(lambda: policy.read_bytes("a.txt"), runs)
        single = _median_ms(lambda: policy.read_bytes("one.txt"), runs)
    print(f"(c) PathPolicy.read_bytes on the standard library ({n} entries, median ms)")
    print(f"    a file with one link                {single:8.3f}")
    print(f"    several links, first read           {statistics.median(first) * 1000:8.1f}")
    print(f"    several links, next reads           {again:8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    bench_plan(args.runs)
    bench_history(args.commits, args.files)
    bench_policy(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
