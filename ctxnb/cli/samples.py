"""``ctxnb demo`` and ``ctxnb tutorials``: the demo and the tutorials, from the installed
package alone.

``make demo`` and ``make lab`` run them in a checkout; after ``pip install ctxnb`` there is
no Makefile and no ``notebooks/``, so the command line offers the same demo
(:mod:`ctxnb.demo`) on the sample data the wheel ships, and copies the tutorial notebooks
the wheel ships to a folder of the user's (:func:`ctxnb.samples.copy_tutorials`). With
``--keep DIR`` the demo's workspace stays, store and ledger included, so the other
commands (``history``, ``why``, ``trace verify``) have something to show.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .app import _out, arg, command

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


@command(
    "tutorials", help="copy the tutorial notebooks to DIR/ctxnb-tutorials and say how to run them"
)
@arg("dir", nargs="?", default=None, help="where to make ctxnb-tutorials/ (default: current)")
def _cmd_tutorials(ns: argparse.Namespace) -> int:
    """The notebooks ``make lab`` opens in a checkout, copied from the installed package;
    they read only the sample data it ships. An existing copy is left alone."""
    from ..errors import ConfigError
    from ..samples import TUTORIAL_EXTRAS, TUTORIAL_PACKAGES, copy_tutorials

    dest = Path(os.path.abspath(ns.dir or os.getcwd()))
    if not dest.is_dir():
        raise ConfigError(f"{dest} is not a directory; create it first")
    if (dest / "ctxnb-tutorials").exists():
        raise ConfigError(
            f"{dest / 'ctxnb-tutorials'} exists already (your copy, perhaps edited); "
            "remove it or pass another directory"
        )
    target = copy_tutorials(dest)
    names = sorted(p.name for p in target.glob("*.ipynb"))
    _out(f"copied {len(names)} tutorials to {target}:")
    for name in names:
        needs = [f"ctxnb[{x}]" for x in TUTORIAL_EXTRAS.get(name[:2], ())]
        needs += TUTORIAL_PACKAGES.get(name[:2], ())
        also = f"  (also needs {' and '.join(needs)})" if needs else ""
        _out(f"  {name}{also}")
    _out("next:")
    _out("  pip install 'ctxnb[notebook]' jupyterlab")
    # Jupyter refuses to start as root without --allow-root (a container, a cloud machine).
    root = " --allow-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    _out(f"  jupyter lab{root} {target}    # start with {names[0]}")
    return 0
