"""git's ignore sources from outside the workspace, and search deciding ignores itself.

The corpus is the standard library with bench/ignore.py's Python ``.gitignore``. Two
layouts of the same rules, in the same run:
- **inside**: the workspace is the repository's top and holds the ``.gitignore``
  (the baseline: what ``iter_tree`` read before git's other sources counted);
- **outside**: the workspace is ``pkg/ws`` of a repository; the same lines sit in the
  repository's top ``.gitignore`` (``**/`` before each anchored line, so that they mean
  the same), plus a line each in ``info/exclude`` and ``core.excludesFile``.
Prints the medians of ``iter_tree`` in both and of ``git ls-files -o --exclude-standard``,
whether each agrees with git, and the ratios. Then search: ``grep -rn`` (the baseline),
``rg`` run as the ripgrep backend ran it before (reading the ``.gitignore`` files
itself), the directory walk that now decides for it, and ``search(backend="ripgrep")``
and ``"python"`` as they are now, on the **outside** layout. With ``--against REV``,
also ``search(backend="ripgrep")`` of ``ctxnb/tools/search.py`` at that git revision
of this checkout (loaded beside the current one), on the **inside** layout where both
decide the same: the cost of deciding ignores for ripgrep, same run.

Usage: python bench/ignore_sources.py [--repeat N] [--against d0c70b7]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, corpus_stats, git_env  # noqa: E402
from ignore import NESTED, ROOT_IGNORE, _median  # noqa: E402

from ctxnb.access.ignore import iter_tree  # noqa: E402
from ctxnb.tools import _searchfiles as searchfiles  # noqa: E402
from ctxnb.tools import search as search_mod  # noqa: E402


def _paired(a: Callable[[], object], b: Callable[[], object], n: int) -> tuple[float, float]:
    """Medians of ``a`` and ``b`` timed in turn, so that a busy machine slows both alike."""
    ta, tb = [], []
    for _ in range(n):
        for fn, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def _load_search(rev: str) -> Any:
    """``ctxnb/tools/search.py`` as it was at ``rev``, imported as a separate module."""
    here = Path(__file__).resolve().parent.parent
    text = subprocess.run(
        ["git", "show", f"{rev}:ctxnb/tools/search.py"],
        cwd=here, capture_output=True, check=True,
    ).stdout  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="ctxnb-bench-old-search-")) / "old_search.py"
    tmp.write_bytes(text)
    spec = importlib.util.spec_from_file_location("old_search", tmp)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outside_lines() -> str:
    out = []
    for line in ROOT_IGNORE.splitlines():
        neg = line.startswith("!")
        body = line[1:] if neg else line
        if "/" in body.rstrip("/"):
            body = "**/" + body  # anchored in the workspace: the same, seen from the top
        out.append(("!" if neg else "") + body)
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", help="a git revision whose search.py to time as well")
    args = ap.parse_args()
    old_search = _load_search(args.against) if args.against else None
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-ignore-sources-"))
    saved = dict(os.environ)
    try:
        home = base / "home"
        (home / ".config" / "git").mkdir(parents=True)
        os.environ.update(
            {**git_env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
        )
        os.environ.pop("GIT_CONFIG_GLOBAL", None)
        inside = copy_corpus(base / "inside")
        (inside / ".gitignore").write_text(ROOT_IGNORE)
        top = base / "outside"
        ws = top / "pkg" / "ws"
        ws.parent.mkdir(parents=True)
        shutil.copytree(inside, ws, symlinks=True)
        (ws / ".gitignore").unlink()
        for d, text in NESTED.items():
            (inside / d / ".gitignore").write_text(text)
            (ws / d / ".gitignore").write_text(text)
        (top / ".gitignore").write_text(_outside_lines())
        for repo in (inside, top):
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (top / ".git" / "info" / "exclude").write_text("*.orig\n")
        (home / ".config" / "git" / "ignore").write_text("*.swp\n")
        files, size = corpus_stats(inside)
        print(f"corpus: {files} files, {size / 1e6:.0f} MB")

        def git_ls(root: Path) -> set[str]:
            out = subprocess.run(
                ["git", "ls-files", "-z", "--others", "--exclude-standard"],
                cwd=root, capture_output=True, check=True,
            ).stdout  # fmt: skip
            return {p for p in os.fsdecode(out).split("\0") if p}

        rows = []
        for label, root in (("inside", inside), ("outside", ws)):
            t_tree, tree = _median(lambda r=root: {rel for rel, _ in iter_tree(r)}, args.repeat)
            t_git, truth = _median(lambda r=root: git_ls(r), args.repeat)
            rows.append((label, t_tree, t_git, tree == truth, len(truth)))  # type: ignore[arg-type]
        t_in = rows[0][1]
        for label, t_tree, t_git, agree, n in rows:
            print(
                f"iter_tree {label:8s} median {t_tree * 1000:7.1f} ms ({t_tree / t_in:.2f}x "
                f"inside); git ls-files {t_git * 1000:6.1f} ms; {n} files; agrees: {agree}"
            )

        rg = search_mod.find_ripgrep()
        old_rg = [rg or "rg", "--no-heading", "--with-filename", "--line-number", "--column",
                  "--null", "--color", "never", "--no-config", "--hidden", "--no-require-git",
                  "--no-ignore-dot", "--no-ignore-exclude", "--no-ignore-global",
                  "--no-ignore-parent", "--encoding", "none", "--case-sensitive",
                  "--glob", "!.ctxnb", "--glob", "!.git"]  # fmt: skip
        walker = searchfiles._whole_tree(ws)
        no_globs = searchfiles._GlobFilter([])
        t_dirs, _ = _median(lambda: searchfiles._searchable_dirs(walker, ws, no_globs), args.repeat)
        print(f"search's directory walk (deciding for rg): {t_dirs * 1000:.1f} ms")
        print(f"{'pattern':<16}{'grep ms':>9}{'old rg':>9}{'rg now':>9}{'python':>9}  vs grep")
        for pattern in ("import", "NotImplementedError"):
            t_grep, _ = _median(
                lambda p=pattern: subprocess.run(
                    ["grep", "-rnE", "--binary-files=without-match", p, "."],
                    cwd=ws, capture_output=True,
                ),
                args.repeat,
            )  # fmt: skip
            t_old = float("nan")
            if rg is not None:
                t_old, _ = _median(
                    lambda p=pattern: subprocess.run(
                        [*old_rg, "--regexp", p, "--", "."], cwd=ws, capture_output=True
                    ),
                    args.repeat,
                )
            t_rg, _ = _median(lambda p=pattern: search_mod.search(ws, p, backend="ripgrep"),
                              args.repeat) if rg else (float("nan"), None)  # fmt: skip
            t_py, _ = _median(lambda p=pattern: search_mod.search(ws, p, backend="python"),
                              args.repeat)  # fmt: skip
            print(
                f"{pattern:<16}{t_grep * 1000:>9.1f}{t_old * 1000:>9.1f}{t_rg * 1000:>9.1f}"
                f"{t_py * 1000:>9.1f}  old rg {t_old / t_grep:.2f}x, rg now "
                f"{t_rg / t_grep:.2f}x, python {t_py / t_grep:.2f}x"
            )
        if old_search is not None and rg is not None:
            print(f"ripgrep backend, inside layout: now vs search.py at {args.against}")
            for pattern in ("import", "NotImplementedError", "zzqqxxnotfound"):
                t_then, t_now = _paired(
                    lambda p=pattern: old_search.search(inside, p, backend="ripgrep"),
                    lambda p=pattern: search_mod.search(inside, p, backend="ripgrep"),
                    args.repeat,
                )
                print(
                    f"{pattern:<16} then {t_then * 1000:7.1f} ms  now {t_now * 1000:7.1f} ms  "
                    f"ratio {t_now / t_then:.2f}x"
                )
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
