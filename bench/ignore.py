"""Walking a tree with ignore files: ctxnb's matcher vs asking git, in the same run.

The corpus is the standard library with a typical Python project's ``.gitignore`` at
the root and small ones in a few packages. Prints the medians of:
- ``iter_tree`` (the access layer's walk with ctxnb's git-exact matcher);
- a plain ``os.scandir`` walk deciding with ctxnb's matcher, and the same walk deciding
  with pathspec's ``GitIgnoreSpec`` (the earlier matcher): the matchers compared alone;
- ``git ls-files --others --exclude-standard`` (git deciding for the whole walk, the
  fastest way to ask git; a ``git check-ignore --stdin`` per walk also needs the walk);
- ``git check-ignore --stdin`` fed every path of an unfiltered walk;
and the ratios to ``git ls-files`` (the baseline).

Usage: python bench/ignore.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pathspec  # noqa: E402
from _corpus import copy_corpus, corpus_stats, git_env  # noqa: E402

from ctxnb.access.ignore import ALWAYS_SKIP, IgnoreMatcher, iter_tree  # noqa: E402

ROOT_IGNORE = """\
__pycache__/
*.py[cod]
*$py.class
*.so
.Python
build/
develop-eggs/
dist/
downloads/
eggs/
.eggs/
lib64/
parts/
sdist/
var/
wheels/
*.egg-info/
.installed.cfg
*.egg
*.manifest
*.spec
pip-log.txt
htmlcov/
.tox/
.nox/
.coverage
.coverage.*
.cache
nosetests.xml
coverage.xml
*.cover
.hypothesis/
.pytest_cache/
*.mo
*.pot
*.log
instance/
.webassets-cache
.scrapy
docs/_build/
target/
.ipynb_checkpoints
.env
.venv
env/
venv/
ENV/
*.txt
!requirements*.txt
test/data/**
!test/data/**/
!test/data/**/*.py
"""
NESTED = {
    "email": "*.cfg\n!keep.cfg\n",
    "json": "/tool.py\n",
    "unittest": "test/*.txt\n",
}


def _plain_walk(root: str, matcher: str) -> list[str]:
    """A plain ``os.scandir`` walk deciding with ``"ctxnb"``'s matcher or ``"pathspec"``."""
    out: list[str] = []

    def level(rel_dir: str, text: str) -> Callable[[str, bool], bool | None]:
        if matcher == "ctxnb":
            return IgnoreMatcher(rel_dir, text.split("\n")).state
        spec = pathspec.GitIgnoreSpec.from_lines(text.split("\n"))

        def state(rel: str, is_dir: bool) -> bool | None:
            sub = rel[len(rel_dir) + 1 :] if rel_dir else rel
            return spec.check_file(sub + "/" if is_dir else sub).include

        return state

    def walk(rel_dir: str, levels: list[Callable[[str, bool], bool | None]]) -> None:
        directory = os.path.join(root, rel_dir) if rel_dir else root
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
        gi = os.path.join(directory, ".gitignore")
        if os.path.exists(gi):
            with open(gi) as f:
                levels = [*levels, level(rel_dir, f.read())]
        for e in entries:
            if e.name in ALWAYS_SKIP:
                continue
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            is_dir = e.is_dir(follow_symlinks=False)
            verdict = None
            for state in levels:
                res = state(rel, is_dir)
                if res is not None:
                    verdict = res
            if verdict:
                continue
            if is_dir:
                walk(rel, levels)
            elif e.is_file(follow_symlinks=False):
                out.append(rel)

    walk("", [])
    return out


def _median(fn: Callable[[], object], n: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-ignore-"))
    try:
        root = copy_corpus(base / "src")
        (root / ".gitignore").write_text(ROOT_IGNORE)
        for d, text in NESTED.items():
            (root / d / ".gitignore").write_text(text)
        files, size = corpus_stats(root)
        print(f"corpus: {files} files, {size / 1e6:.0f} MB, {1 + len(NESTED)} .gitignore files")
        env = {**git_env(), "HOME": str(base), "XDG_CONFIG_HOME": str(base)}
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)

        def git_ls() -> set[str]:
            out = subprocess.run(
                ["git", "ls-files", "-z", "--others", "--exclude-standard"],
                cwd=root, env=env, capture_output=True, check=True,
            ).stdout  # fmt: skip
            return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}

        def check_ignore() -> int:
            paths = [str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.parts]
            out = subprocess.run(
                ["git", "check-ignore", "--stdin", "-z"],
                cwd=root, env=env, input="\0".join(paths).encode(), capture_output=True,
            ).stdout  # fmt: skip
            return out.count(b"\0")

        t_tree, tree = _median(lambda: [rel for rel, _ in iter_tree(root)], args.repeat)
        t_ours, ours = _median(lambda: _plain_walk(str(root), "ctxnb"), args.repeat)
        t_spec, spec = _median(lambda: _plain_walk(str(root), "pathspec"), args.repeat)
        t_git, truth = _median(git_ls, args.repeat)
        t_check, _ = _median(check_ignore, args.repeat)
        agree = set(ours) == truth  # type: ignore[arg-type]
        spec_diff = len(set(spec) ^ truth)  # type: ignore[arg-type,operator]
        rows = [
            ("iter_tree (access-layer walk)", t_tree, f"agrees with git: {set(tree) == truth}"),
            ("walk + ctxnb matcher", t_ours, f"agrees with git: {agree}"),
            ("walk + pathspec GitIgnoreSpec", t_spec, f"files differing from git: {spec_diff}"),
            ("git ls-files -o --exclude-standard", t_git, "(baseline)"),
            ("walk + git check-ignore --stdin", t_check, ""),
        ]
        for label, t, note in rows:
            print(f"{label:36s} median {t * 1000:7.1f} ms  {note}")
        print(
            f"  ratios to git ls-files: iter_tree {t_tree / t_git:.2f}x, ctxnb matcher "
            f"{t_ours / t_git:.2f}x, "
            f"pathspec {t_spec / t_git:.2f}x, check-ignore {t_check / t_git:.2f}x"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
