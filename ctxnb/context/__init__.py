"""The context: what the model sees at one turn, and how it is assembled (DESIGN §6).

- :class:`Context` (with :class:`Section` and :class:`ContextItem`): an assembled
  context, rendered as text, chat messages or HTML.
- :class:`Assembler` and :func:`context_at`: from a session's state (or from the
  store's history) to a context.
- :func:`render_block`, :func:`delimiter_nonce` and :func:`inline`: the framing that
  content cannot forge; :func:`unframe` takes it off again.
- :func:`to_messages`: a context as an OpenAI or Anthropic transcript, with cache
  breakpoints.
- :func:`context_diff` and :func:`item_text_diff`: what changed between two contexts,
  by item and inside one item's text.
- :func:`prefix_reuse`: the tokens a prompt shares with the previous one (what a
  provider's prefix cache serves) and the new ones.
- :func:`usage_report`: tokens per section and per item as text (``ctxnb context``).
- :class:`ContextChange` and :func:`changes_frame`: what each assembly did to each
  item (kept, masked, truncated, summarized, evicted), for audit and restore.

Sessions call into this package (``session.assemble()``, ``session.context_at(turn)``);
this package never imports the session.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> s = Workspace.open(root).session("demo", system_prompt="Be brief.")
    >>> _ = s.add_path("a.py")
    >>> ctx = s.assemble()
    >>> ctx.section("system").text
    'Be brief.'
"""

from __future__ import annotations

from ._assembly import Assembler, AssemblyState, MetaEntry, context_at, meta_for
from ._changes import ContextChange, changes_frame
from ._diff import context_diff, item_text_diff
from ._framing import delimiter_nonce, inline, render_block, unframe
from ._messages import to_messages
from ._model import SECTION_ORDER, Context, ContextItem, Section, Segment
from ._report import usage_report
from ._reuse import PrefixReuse, prefix_reuse

__all__ = [
    "SECTION_ORDER",
    "Assembler",
    "AssemblyState",
    "Context",
    "ContextChange",
    "ContextItem",
    "MetaEntry",
    "PrefixReuse",
    "Section",
    "Segment",
    "changes_frame",
    "context_at",
    "context_diff",
    "delimiter_nonce",
    "inline",
    "item_text_diff",
    "meta_for",
    "prefix_reuse",
    "render_block",
    "to_messages",
    "unframe",
    "usage_report",
]
