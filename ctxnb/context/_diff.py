"""What changed between two contexts: by item, and inside one item's text.

One definition serves the analysis helpers, the replay comparison and the context
widget, so "changed" means the same thing everywhere: the item's rendered text (its
hash) differs.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from ._model import Context


def context_diff(a: Context, b: Context) -> dict[str, list[str]]:
    """What changed from context ``a`` to context ``b``, by item id.

    ``entered``: items in ``b`` only (in ``b``'s order); ``left``: items in ``a`` only
    (in ``a``'s order); ``changed``: items in both whose rendered text differs (item
    hash), in ``b``'s order.

    Example:
        >>> from ctxnb.context import Context, ContextItem, Section
        >>> def ctx(*items):
        ...     its = tuple(ContextItem(i, "file", i, 1, t, t) for i, t in items)
        ...     return Context((Section("active", "", len(its), its),), 0, {}, None)
        >>> context_diff(ctx(("a", "1"), ("b", "1")), ctx(("b", "2"), ("c", "1")))
        {'entered': ['c'], 'left': ['a'], 'changed': ['b']}
    """
    ha = {it.id: it.hash for it in a.items}
    hb = {it.id: it.hash for it in b.items}
    return {
        "entered": [i for i in hb if i not in ha],
        "left": [i for i in ha if i not in hb],
        "changed": [i for i in hb if i in ha and ha[i] != hb[i]],
    }


def item_text_diff(
    a: Context,
    b: Context,
    item_id: str,
    *,
    context_lines: int = 3,
    labels: Sequence[str] = ("a", "b"),
) -> str:
    """A unified diff of one item's rendered text between two contexts ('' if absent).

    The diff's file names are the item's label (its agent-visible path, or the tool
    call) under each context's label, never the object id.

    Example:
        >>> from ctxnb.context import Context, ContextItem, Section
        >>> def ctx(t):
        ...     it = ContextItem("9f2c", "file", "src/app.py", 1, t, t)
        ...     return Context((Section("active", "", 1, (it,)),), 0, {}, None)
        >>> item_text_diff(ctx("x\\n"), ctx("y\\n"), "9f2c").splitlines()[:2]
        ['--- a/src/app.py', '+++ b/src/app.py']
    """
    ia = next((it for it in a.items if it.id == item_id), None)
    ib = next((it for it in b.items if it.id == item_id), None)
    name = (ib or ia).label if (ib or ia) is not None else item_id  # type: ignore[union-attr]
    return "".join(
        difflib.unified_diff(
            (ia.text if ia else "").splitlines(keepends=True),
            (ib.text if ib else "").splitlines(keepends=True),
            fromfile=f"{labels[0]}/{name}",
            tofile=f"{labels[1]}/{name}",
            n=context_lines,
        )
    )
