"""The Python environment ctxnb runs in, and where it lies inside a workspace.

ctxnb's own processes (the Claude Code hooks, ``ctxnb sandbox commit``, a notebook's
kernel) import their code from this environment. A project's ``.venv`` with ctxnb
installed often lies inside the workspace it governs; there, the environment is
governance like ``*.pth`` and ``sitecustomize.py``: a command may read it but not change
it (bound read-only in the sandbox), and no agent tool or commit writes it, whatever the
scope. Otherwise an intent owning ``**`` could rewrite a module the next hook imports.

Example:
    >>> import sys, tempfile
    >>> environment_globs(tempfile.mkdtemp())  # this environment is elsewhere
    ()
    >>> sys.prefix in own_environment() or os.path.realpath(sys.prefix) in own_environment()
    True
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["environment_globs", "own_environment", "within"]

_GLOB_SPECIAL = re.compile(r"([*?\[\\!#])")


def own_environment() -> list[str]:
    """The real paths of the environment ctxnb runs in: its prefixes, the directory of
    its interpreter, and the site directories on ``sys.path`` (a ``.pth`` may add
    another environment's)."""
    sites = {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    paths = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *sites,
    }
    return sorted({os.path.realpath(p) for p in paths if p})


def within(root: str | os.PathLike[str]) -> list[str]:
    """The paths of :func:`own_environment` strictly inside ``root`` (real paths), outermost
    only. The root itself is never one: a workspace that *is* an environment is
    governed as a workspace."""
    base = os.path.realpath(root)
    inside = [p for p in own_environment() if p.startswith(base + "/")]
    return [p for p in inside if not any(p.startswith(q + "/") for q in inside)]


def environment_globs(root: str | os.PathLike[str]) -> tuple[str, ...]:
    """Anchored gitignore globs (``/.venv/``) naming the environment's directories inside
    ``root``; empty when it lies elsewhere."""
    base = os.path.realpath(root)
    out = []
    for p in within(base):
        rel = _GLOB_SPECIAL.sub(r"\\\1", os.path.relpath(p, base))
        out.append(f"/{rel}/")
    return tuple(out)
