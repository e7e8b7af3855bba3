"""The benchmark corpus: the running Python's standard library, copied to a temp dir.

About 2,450 files and 100 MB of real code on every machine (``site-packages`` and
``__pycache__`` are left out so the corpus does not depend on what is installed).
"""

from __future__ import annotations

import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

EXCLUDE = shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def copy_corpus(dest: Path | None = None) -> Path:
    """Copy the standard library into ``dest`` (a new temp dir by default) and return it."""
    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="ctxnb-corpus-")) / "stdlib"
    shutil.copytree(stdlib_dir(), dest, ignore=EXCLUDE, symlinks=True)
    return dest


def corpus_stats(root: Path) -> tuple[int, int]:
    """(files, bytes) under root."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def git_env() -> dict[str, str]:
    """The environment for git in benchmarks: an identity, so commits work anywhere."""
    who = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@ctxnb.invalid"}
    return {
        **os.environ,
        **who,
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@ctxnb.invalid",
    }
