"""``ctxnb demo``: the scripted demo, from the installed package alone.

``make demo`` runs it in a checkout; after ``pip install ctxnb`` there is no Makefile, so
the command line offers the same demo (:mod:`ctxnb.demo`) on the sample data the wheel
ships. With ``--keep DIR`` the demo's workspace stays, store and ledger included, so the
other commands (``history``, ``why``, ``trace verify``) have something to show.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .app import arg, command

if TYPE_CHECKING:
    import argparse

__all__: list[str] = []


@command("demo", help="run a scripted, governed agent session over a copy of the sample workspace")
@arg(
    "--keep",
    metavar="DIR",
    default=None,
    help="make the copy in DIR/tinyinv and leave it there (default: a temporary directory)",
)
def _cmd_demo(ns: argparse.Namespace) -> int:
    """The same session as ``make demo``: index, govern, a scripted agent refused and
    allowed, the context under two strategies, the Agent Trace ledger."""
    from ..demo import main
    from ..errors import ConfigError

    keep = None
    if ns.keep is not None:
        keep = Path(os.path.abspath(ns.keep))
        if not keep.is_dir():
            raise ConfigError(f"--keep {ns.keep}: not a directory; create it first")
        if (keep / "tinyinv").exists():
            raise ConfigError(
                f"--keep {ns.keep}: {keep / 'tinyinv'} exists already (a demo kept before?); "
                "remove it or pass another directory"
            )
    return main(keep)
