"""Output checks nbval does not make, for the tutorials (``make test``).

nbval compares each cell's fresh outputs with the stored ones, after the patterns in
``sanitize.cfg``. It never compares images or widget views (their bytes and model ids
change from run to run), so on its own a plot that stopped rendering, or a widget
that became plain text, would pass. These hooks add, for every tutorial cell:

- **rich outputs are still there**: a stored ``image/png`` or ``image/svg+xml`` must be
  produced again, and must not be blank (one flat colour); a stored widget view
  (``application/vnd.jupyter.widget-view+json``) must be produced again, with a model.
- **cells whose numbers vary keep their shape**: a cell tagged ``nbval-ignore-output``
  (token counts there depend on random object ids inside item delimiters) is compared
  with every number and hash masked, so its tables keep their rows, columns and labels;
  an empty or reshaped table still fails.
"""

from __future__ import annotations

import base64
import io
import re
from typing import Any

import pytest

RICH = ("image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?(e[-+]?\d+)?")
_SPACES = re.compile(r"[ \t]+")
_TEXT_KEYS = ("text/plain", "text/html", "text/markdown")


def _mimetypes(outputs: list[Any]) -> list[str]:
    return [k for o in outputs for k in (o.get("data") or {})]


def _blank_png(data: str) -> bool:
    from matplotlib.image import imread

    pixels = imread(io.BytesIO(base64.b64decode(data)), format="png")
    return bool(pixels.size == 0 or (pixels == pixels.reshape(-1, pixels.shape[-1])[0]).all())


def _blank_svg(data: str) -> bool:
    # A drawing has paths or text; an empty figure has at most its background rectangle.
    return len(re.findall(r"<(path|text|use|image)\b", data)) < 2


def _check_rich(ref: list[Any], test: list[Any]) -> list[str]:
    problems = []
    have = _mimetypes(test)
    for kind in RICH:
        wanted = _mimetypes(ref).count(kind)
        if have.count(kind) < wanted:
            problems.append(
                f"the stored outputs have {wanted} {kind}, this run produced "
                f"{have.count(kind)} (outputs: {sorted(set(have)) or 'none'})"
            )
    for o in test:
        data = o.get("data") or {}
        if "image/png" in data and _blank_png(data["image/png"]):
            problems.append("a PNG plot is blank (one flat colour)")
        if "image/svg+xml" in data and _blank_svg(str(data["image/svg+xml"])):
            problems.append("an SVG plot is blank")
        view = data.get("application/vnd.jupyter.widget-view+json")
        if view is not None and not (isinstance(view, dict) and view.get("model_id")):
            problems.append(f"a widget view without a model: {view!r}")
    return problems


def _masked(item: Any, text: str) -> str:
    # Numbers become N and runs of spaces one space: a wider number must not count as a
    # change of shape when pandas re-aligns its columns.
    return _SPACES.sub(" ", _NUMBER.sub("N", item.sanitize(text)))


def _shape(item: Any, outputs: list[Any]) -> list[tuple[str, str]]:
    """Text outputs with sanitizing applied and every number masked."""
    out = []
    for o in outputs:
        if o.get("output_type") == "stream":
            out.append((f"stream:{o.get('name')}", _masked(item, o["text"])))
            continue
        for key in _TEXT_KEYS:
            value = (o.get("data") or {}).get(key)
            if value is not None:
                text = value if isinstance(value, str) else "".join(value)
                out.append((key, _masked(item, text)))
    return out


def _check_shape(item: Any, ref: list[Any], test: list[Any]) -> list[str]:
    a, b = _shape(item, ref), _shape(item, test)
    if a == b:
        return []
    for (ka, va), (kb, vb) in zip(a, b, strict=False):
        if (ka, va) != (kb, vb):
            at = next((n for n, (x, y) in enumerate(zip(va, vb, strict=False)) if x != y), 0)
            start = max(0, at - 300)
            return [
                f"{ka} changed shape (numbers masked) at character {at}:\n--- stored\n"
                f"{va[start : at + 700]}\n--- this run\n{vb[start : at + 700]}"
            ]
    return [f"stored outputs {[k for k, _ in a]}, this run {[k for k, _ in b]}"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    cell = getattr(item, "cell", None)
    test = getattr(item, "test_outputs", None)
    if cell is None or test is None or not hasattr(item, "sanitize"):
        return result  # not an nbval cell
    ref = list(cell.get("outputs") or [])
    problems = _check_rich(ref, test)
    if "nbval-ignore-output" in (cell.get("metadata", {}).get("tags") or []):
        problems += _check_shape(item, ref, test)
    if problems:
        pytest.fail(
            f"{item.name}: " + "\n".join(problems) + f"\n\nsource:\n{cell['source']}",
            pytrace=False,
        )
    return result
