"""The context: what the model sees at one turn, and how it is assembled (DESIGN §6).

- :class:`Context` (with :class:`Section` and :class:`ContextItem`): an assembled
  context, rendered as text, chat messages or HTML.
- :class:`Assembler` and :func:`context_at`: from a session's state (or from the
  store's history) to a context.
- :func:`render_block` and :func:`delimiter_nonce`: the framing that content cannot
  forge.

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
from ._framing import delimiter_nonce, inline, render_block
from ._model import Context, ContextItem, Section

__all__ = [
    "Assembler",
    "AssemblyState",
    "Context",
    "ContextItem",
    "MetaEntry",
    "Section",
    "context_at",
    "delimiter_nonce",
    "inline",
    "meta_for",
    "render_block",
]
