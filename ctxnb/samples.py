"""The sample data that ships with ctxnb: a small workspace, recorded trajectories, a real
git history to mine tasks from, and the tutorial notebooks that use them.

Everything here is read from the installed package (``ctxnb/_sample_data``, which the
wheel's build copies from the repository's ``data/`` and ``notebooks/``) or, in a
checkout, from those folders themselves; nothing is downloaded.

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

__all__ = [
    "TUTORIAL_EXTRAS",
    "TUTORIAL_PACKAGES",
    "copy_sample_workspace",
    "copy_tutorials",
    "data_dir",
    "tutorials_dir",
]


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


# The extras each tutorial needs beyond ``ctxnb[notebook]`` (and a Jupyter front end), by
# the number its file name starts with: 06 and 07 run an agent live (mini-swe-agent and
# litellm), 08 serves one over ACP. tests/test_samples.py checks it against their imports.
TUTORIAL_EXTRAS: dict[str, tuple[str, ...]] = {"06": ("live",), "07": ("live",), "08": ("acp",)}
# Packages no extra brings: 07 mines and grades tasks, whose tests run under pytest.
TUTORIAL_PACKAGES: dict[str, tuple[str, ...]] = {"07": ("pytest",)}


def tutorials_dir() -> Path:
    """The folder with the tutorial notebooks (``notebooks/`` of a source checkout)."""
    data = data_dir()
    candidates = [data / "notebooks", data.parent / "notebooks"]
    for c in candidates:
        if any(c.glob("*.ipynb")):
            return c
    raise NotFoundError(
        "ctxnb's tutorials were not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); reinstall ctxnb, or open notebooks/ of a ctxnb checkout"
    )


def copy_tutorials(dest: str | os.PathLike[str], *, name: str = "ctxnb-tutorials") -> Path:
    """Copy the tutorial notebooks to ``dest/name`` and return its path.

    The notebooks read only what the package ships (the sample workspace, trajectories and
    tasks, through :func:`data_dir`), so the copy runs anywhere ctxnb is installed. An
    existing ``dest/name`` is refused (:class:`FileExistsError`): a copy someone has run
    and edited is theirs.
    """
    source = tutorials_dir()
    target = Path(dest) / name
    target.mkdir(parents=False)
    for nb in sorted(source.glob("*.ipynb")):
        shutil.copyfile(nb, target / nb.name)
    return target
