"""The sample data that ships with ctxnb: a small workspace and recorded trajectories.

Example:
    >>> import tempfile
    >>> ws_dir = copy_sample_workspace(tempfile.mkdtemp())
    >>> (ws_dir / "AGENTS.md").is_file()
    True
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import NotFoundError

__all__ = ["copy_sample_workspace", "data_dir"]


def data_dir() -> Path:
    """The folder with ctxnb's sample data (``data/`` of a source checkout)."""
    env = os.environ.get("CTXNB_DATA_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    candidates += [here / "_sample_data", here.parent / "data"]
    for c in candidates:
        if (c / "sample_workspace").is_dir():
            return c
    raise NotFoundError(
        "ctxnb's sample data was not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); set CTXNB_DATA_DIR to the data/ folder of a ctxnb checkout"
    )


def copy_sample_workspace(dest: str | os.PathLike[str], *, name: str = "tinyinv") -> Path:
    """Copy the sample workspace to ``dest/name`` and return its path.

    The shipped copy is never modified: demos and tutorials work on a copy.
    """
    target = Path(dest) / name
    shutil.copytree(
        data_dir() / "sample_workspace",
        target,
        ignore=shutil.ignore_patterns("__pycache__", ".ctxnb", ".pytest_cache"),
    )
    return target
