"""Run every tutorial and store its outputs, for ``make test``'s nbval output check.

Run it after a change that alters what a tutorial shows (a repr, a table, token
counts), then review the diff of the outputs like any other change::

    .venv/bin/python scripts/refresh_notebooks.py            # every tutorial
    .venv/bin/python scripts/refresh_notebooks.py 05 06      # the ones named

Each notebook runs in a fresh kernel from its own folder, as nbval runs it. What is
stored is what nbval compares and nothing of the machine that ran it: no widget state
(a reader would see widgets before anything ran; the outputs keep each view's static
HTML and text) and no run timings. tests/widgets/test_notebook_outputs.py checks both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=900,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
        record_timing=False,
    ).execute()
    strip(nb)
    nbformat.write(nb, path)
    print(f"refreshed {path.name}")


def strip(nb: nbformat.NotebookNode) -> None:
    """Remove widget state and run timings (left by an earlier run or an editor)."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def main(argv: list[str]) -> None:
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if argv:
        paths = [p for p in paths if any(p.name.startswith(a) for a in argv)]
    for p in paths:
        refresh(p)


if __name__ == "__main__":
    main(sys.argv[1:])
