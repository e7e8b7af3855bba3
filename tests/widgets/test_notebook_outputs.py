"""The tutorials store their outputs, and ``make test`` checks them.

``make test`` runs nbval on ``notebooks/`` with ``notebooks/sanitize.cfg`` and the
extra checks of ``notebooks/conftest.py``. These tests make sure that check has
something to compare with (every plot cell stored a PNG, every widget cell a widget
view) and that it really fails: a copy of a tutorial with a plot that no longer
renders, and with an empty table, must fail nbval, cell by cell.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _notebooks import WIDGET, draws, ends_with_expression, shows_widget
from _paths import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _mimetypes(cell: nbformat.NotebookNode) -> set[str]:
    return {k for o in cell.outputs for k in (o.get("data") or {})}


def test_there_are_tutorials() -> None:
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_tutorial_stores_outputs_to_check(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    problems: list[str] = []
    widgets: set[str] = set()
    for n, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{path.name} cell {n}"
        kinds = _mimetypes(cell)
        if any(o.output_type == "error" for o in cell.outputs):
            problems.append(f"{where}: stores an error")
        shows_something = ends_with_expression(cell.source) or "plt.show()" in cell.source
        if shows_something and not cell.outputs:
            problems.append(f"{where}: shows a value but stores no output (run and save it)")
        if draws(cell.source) and not kinds & {"image/png", "image/svg+xml"}:
            problems.append(f"{where}: draws a plot but stores no image ({sorted(kinds)})")
        text = "".join(str((o.get("data") or {}).get("text/plain", "")) for o in cell.outputs)
        if "<Figure size" in text and "image/png" not in kinds:
            problems.append(f"{where}: a figure shown as text, not as an image")
        if shows_widget(cell.source, widgets) and WIDGET not in kinds:
            problems.append(f"{where}: shows a widget but stores no widget view")
    assert not problems, "\n".join(problems)


def test_plots_do_not_force_a_backend() -> None:
    for path in NOTEBOOKS:
        source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        assert "matplotlib.use(" not in source, f"{path.name} forces a matplotlib backend"


def _nbval(folder: Path, notebook: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(folder / "sanitize.cfg"),
            "-rf",
            "-q",
            str(notebook),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_broken_plot_and_an_empty_table_fail_the_check(tmp_path: Path) -> None:
    """Tutorial 04 with its plot broken the way it used to be (Agg forced, so the cell
    shows ``<Figure size ...>`` text) and its first table emptied: nbval fails on
    exactly those two cells and passes the rest."""
    for name in ("conftest.py", "sanitize.cfg"):
        shutil.copy(REPO / "notebooks" / name, tmp_path / name)
    source = REPO / "notebooks" / "04-trace-analysis.ipynb"
    nb = nbformat.read(source, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    plot = next(n for n, c in enumerate(code) if "plot_mutations_per_intent(df)" in c.source)
    table = next(n for n, c in enumerate(code) if c.source.startswith("df = load_trace(ledger)"))
    code[0].source = code[0].source.replace(
        "%matplotlib inline\n", 'import matplotlib\n\nmatplotlib.use("Agg")\n'
    )
    assert "Agg" in code[0].source
    code[plot].source = code[plot].source.replace(
        "ax = plot_mutations_per_intent(df)", "ax = plot_mutations_per_intent(df)\nax.figure"
    )
    code[table].source = code[table].source.rstrip() + ".head(0)"
    broken = tmp_path / "broken.ipynb"
    nbformat.write(nb, broken)

    run = _nbval(tmp_path, broken)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    failed = sorted(
        int(line.split("::Cell ")[1].split()[0])
        for line in out.splitlines()
        if line.startswith("FAILED") and "::Cell " in line
    )
    assert failed == sorted([plot, table]), out
    assert "image/png" in out  # the plot cell: the image is missing
    assert "text/html" in out  # the table cell: the table differs

    # The unchanged tutorial passes the same check in the same folder.
    shutil.copy(source, tmp_path / "intact.ipynb")
    intact = _nbval(tmp_path, tmp_path / "intact.ipynb")
    assert intact.returncode == 0, intact.stdout + intact.stderr


# What a dependency or the machine prints, never what ctxnb shows: a stored output with
# any of these would make the check depend on the release of a library or on the
# machine that refreshed the notebook.
_CHATTER = {
    "litellm's provider banner": re.compile(r"Provider List|docs\.litellm\.ai|Give Feedback"),
    "a warning": re.compile(r"\b\w*Warning\b:|warnings\.warn\(|^\s*warn\(", re.MULTILINE),
    "a progress bar": re.compile(r"\d+%\|[^|\n]*\||\d+(\.\d+)?\s?(it|s)/(s|it)\b|\[\d+:\d+<"),
    "a traceback": re.compile(r"Traceback \(most recent call last\)"),
    "a path of the machine": re.compile(r"/(home|Users|root|work)/\w|site-packages|\.venv/"),
}


def _texts(cell: nbformat.NotebookNode) -> list[tuple[str, str]]:
    out = []
    for o in cell.outputs:
        if o.output_type == "stream":
            out.append((f"stream {o.name}", o.text))
        for key, value in (o.get("data") or {}).items():
            if key.startswith("text/"):
                out.append((key, value if isinstance(value, str) else "".join(value)))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_tutorial_stores_nothing_of_the_machine_or_a_dependency(path: Path) -> None:
    """No widget state (a reader would see widgets before anything ran), no run
    timings, no stderr, and no output that a dependency or the machine printed."""
    nb = nbformat.read(path, as_version=4)
    problems: list[str] = []
    if "widgets" in nb.metadata:
        problems.append("stores widget state (metadata.widgets): refresh it with the script")
    for n, cell in enumerate(nb.cells):
        where = f"{path.name} cell {n}"
        if "execution" in cell.get("metadata", {}):
            problems.append(f"{where}: stores run timings (metadata.execution)")
        if cell.cell_type != "code":
            continue
        for kind, text in _texts(cell):
            if kind == "stream stderr":
                problems.append(f"{where}: stores stderr: {text[:200]!r}")
            for what, pattern in _CHATTER.items():
                if m := pattern.search(text):
                    problems.append(f"{where}: {kind} stores {what}: {m.group(0)!r}")
    assert not problems, "\n".join(problems)


def test_the_check_finds_chatter_and_widget_state(tmp_path: Path) -> None:
    """The check above fails on each thing it looks for, in a copy of a tutorial."""
    source = REPO / "notebooks" / "01-quickstart.ipynb"
    samples = {
        "litellm's provider banner": "\nProvider List: https://docs.litellm.ai/docs/providers\n",
        "a warning": "x.py:3: FutureWarning: the default will change\n",
        "a progress bar": "indexing: 100%|██████| 21/21 [00:00<00:00, 312.5it/s]\n",
        "a traceback": "Traceback (most recent call last):\n",
        "a path of the machine": "/home/someone/.venv/lib/python3.12/site-packages/x.py\n",
    }
    for what, text in samples.items():
        nb = nbformat.read(source, as_version=4)
        code = next(c for c in nb.cells if c.cell_type == "code")
        code.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
        path = tmp_path / "copy.ipynb"
        nbformat.write(nb, path)
        with pytest.raises(AssertionError, match=re.escape(what)):
            test_tutorial_stores_nothing_of_the_machine_or_a_dependency(path)
    nb = nbformat.read(source, as_version=4)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs.append(nbformat.v4.new_output("stream", name="stderr", text="hello\n"))
    nbformat.write(nb, tmp_path / "state.ipynb")
    with pytest.raises(AssertionError, match=r"widget state(.|\n)*stores stderr"):
        test_tutorial_stores_nothing_of_the_machine_or_a_dependency(tmp_path / "state.ipynb")
