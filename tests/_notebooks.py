"""What a tutorial cell should show, read from its source: plots and widgets.

Shared by the output checks (tests/widgets/test_notebook_outputs.py) and the real-browser
tests (tests/widgets/test_browser.py), so both expect the same plots and widgets whatever the
notebook has stored.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_NAMES = ("View(", "Panel(", ".compare(", "View.follow(")


def code(source: str) -> str:
    # IPython magics are not Python.
    return "\n".join("" if ln.startswith("%") else ln for ln in source.splitlines())


def ends_with_expression(source: str) -> bool:
    body = ast.parse(code(source)).body
    return bool(body) and isinstance(body[-1], ast.Expr)


def draws(source: str) -> bool:
    """The cell calls a ``plot_*`` function or ``plt.*``."""
    for node in ast.walk(ast.parse(code(source))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id.startswith("plot_"):
            return True
        if isinstance(f, ast.Attribute) and (
            f.attr.startswith("plot_") or (isinstance(f.value, ast.Name) and f.value.id == "plt")
        ):
            return True
    return False


def shows_widget(source: str, known: set[str]) -> bool:
    """Record names bound to a widget in ``known``; True when the cell shows one."""
    body = ast.parse(code(source)).body
    for node in body:
        if isinstance(node, ast.Assign) and any(w in ast.unparse(node.value) for w in WIDGET_NAMES):
            known.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    last = body[-1].value
    if isinstance(last, ast.Name):
        return last.id in known
    return isinstance(last, ast.Call) and any(w in ast.unparse(last) for w in WIDGET_NAMES)


def expected_outputs(path: Path) -> tuple[int, int]:
    """``(plots, widgets)``: how many cells of the notebook draw a plot, show a widget."""
    nb = nbformat.read(path, as_version=4)
    plots = widgets = 0
    known: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        plots += draws(cell.source)
        widgets += shows_widget(cell.source, known)
    return plots, widgets
