"""HistoryView: every stored version of one file, who wrote it, and a diff between any two."""

from __future__ import annotations

import difflib
import os
from typing import TYPE_CHECKING, Any

from .._util.text import visible
from ..errors import NotFoundError
from ..redaction.redactor import redact_text
from ._ipw import widgets
from .static import diff_html, esc, html_table

if TYPE_CHECKING:
    from ..govern.authors import AuthoredVersion as Version
    from ..workspace import Workspace

__all__ = ["HistoryView"]


def _text(v: Version) -> str:
    """A version's text, redacted whole (so that its diffs are redacted as files)."""
    content = v.doc.get("content")
    return redact_text(content) if isinstance(content, str) else ""


def _author(v: Version) -> str:
    """Who wrote a version, as ``ctxnb history`` prints it.

    The name comes from a trace record, text anyone who can write the ledger could have
    chosen: redacted, with its control and bidirectional characters made visible.
    """
    who = v.author if v.record_id is None else f"{v.author} ({v.contributor_label})"
    return visible(redact_text(who))


def _label(n: int, v: Version) -> str:
    content = v.doc.get("content")
    size = "deleted" if content is None else f"{len(content):,} chars"
    return f"v{n + 1} · tx {v.tx_id} · {v.tx_time:%Y-%m-%d %H:%M:%S} · {size} · {_author(v)}"


class HistoryView(widgets.VBox):
    """The versions of one file in a workspace's store, who wrote each, and a diff of any two.

    Each version is labelled with its author as ``ctxnb history`` prints it: the caller
    and contributor of its trace record, ``index`` or ``outside edit``.

    Args:
        workspace: the workspace whose store holds the versions.
        path: the file, workspace-relative or absolute.
        context: lines of context around each change in the diff.

    Raises:
        NotFoundError: when the file has no stored version.

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.py").write_text("x = 1\\n")
        >>> ws = Workspace.open(root)
        >>> _ = ws.index()
        >>> _ = (root / "a.py").write_text("x = 2\\n")
        >>> _ = ws.index()
        >>> view = HistoryView(ws, "a.py")
        >>> [ln for ln in view.diff_text.splitlines() if ln[:1] in "+-"][2:]
        ['-x = 1', '+x = 2']
    """

    def __init__(
        self,
        workspace: Workspace,
        path: str | os.PathLike[str],
        *,
        context: int = 3,
        **kwargs: Any,
    ) -> None:
        self.workspace = workspace
        self.path = os.fspath(path)
        self.versions = workspace.history(path)
        if not self.versions:
            raise NotFoundError(f"{self.path!r} has no stored version; index it first (ws.index())")
        options = [(_label(n, v), n) for n, v in enumerate(self.versions)]
        last = len(self.versions) - 1
        self.header = widgets.HTML(
            f"<b>History</b> {esc(self.path)}: {len(self.versions)} version(s)"
        )
        self.from_version = widgets.Dropdown(
            options=options,
            value=max(0, last - 1),
            description="From",
            layout=widgets.Layout(width="48%"),
        )
        self.to_version = widgets.Dropdown(
            options=options, value=last, description="To", layout=widgets.Layout(width="48%")
        )
        self.context = widgets.BoundedIntText(value=context, min=0, max=1000, description="Context")
        self.output = widgets.HTML()
        for w in (self.from_version, self.to_version, self.context):
            w.observe(lambda _: self._render(), names="value")
        super().__init__(
            [
                self.header,
                widgets.HBox([self.from_version, self.to_version]),
                self.context,
                self.output,
            ],
            **kwargs,
        )
        self._render()

    def diff(self, a: int, b: int, *, context: int | None = None) -> str:
        """A unified diff from version ``a`` to version ``b`` (0-based, oldest first)."""
        va, vb = self.versions[a], self.versions[b]
        n = self.context.value if context is None else context
        return "".join(
            difflib.unified_diff(
                _text(va).splitlines(keepends=True),
                _text(vb).splitlines(keepends=True),
                fromfile=f"{self.path}@v{a + 1} (tx {va.tx_id})",
                tofile=f"{self.path}@v{b + 1} (tx {vb.tx_id})",
                n=n,
            )
        )

    @property
    def diff_text(self) -> str:
        """The diff between the two chosen versions."""
        return self.diff(self.from_version.value, self.to_version.value)

    def _render(self) -> None:
        self.output.value = diff_html(self.diff_text)

    def _repr_html_(self) -> str:
        rows = [
            {
                "version": f"v{n + 1}",
                "tx": v.tx_id,
                "time": f"{v.tx_time:%Y-%m-%d %H:%M:%S}",
                "chars": "deleted" if v.doc.get("content") is None else len(_text(v)),
                "author": _author(v),
            }
            for n, v in enumerate(self.versions)
        ]
        last = len(self.versions) - 1
        return (
            f"<div><b>History</b> {esc(self.path)}"
            + html_table(rows[-50:], ["version", "tx", "time", "chars", "author"])
            + diff_html(self.diff(max(0, last - 1), last), limit=5_000)
            + "</div>"
        )

    def __repr__(self) -> str:
        return f"<HistoryView {self.path!r} versions={len(self.versions)}>"
