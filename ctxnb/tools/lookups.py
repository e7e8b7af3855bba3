"""The file tools that look files up: listing, globs, search, history, diffs, outlines and
the registry.

Each function here is the body of one :class:`~ctxnb.tools.filetools.FileTools` tool,
run inside its tool call (``FileTools.run_call``), so the path policy, the hooks and the
audit line apply as to every other tool. Every name, line and text they return leaves
redacted. They are given the tools' :class:`~ctxnb.tools._filesources.FileSources` (the
workspace, the path policy, the session, the copies and locks), not the tools themselves,
and the settings they need as arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ..errors import CtxnbError, NotFoundError, PolicyError
from ..indexer import decode_bytes, is_deleted
from ..redaction.redactor import line_redactor, redact_data, redact_text
from ..resolver import doc_path as make_doc_path
from ..strategies.summaries import fit_tokens
from .call import ToolCall
from .patching import unified_diff
from .results import DiffResult, SearchHits, VersionInfo

if TYPE_CHECKING:
    from ..strategies.summaries import Summarizer
    from ._filesources import FileSources

__all__ = [
    "TAG_RULES",
    "SearchCursor",
    "agent_glob",
    "get_diff",
    "get_file_history",
    "glob",
    "list_files",
    "registry",
    "search",
    "summarize_file",
]

# A line that may belong to a PEM or OpenSSH key body (base64 only).
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}\r?$")
# A tab-separated row, or a comma-separated one with nothing of code in it.
_TABLE_ROW = re.compile(r"[^\t\n]*\t|[^\s=(){}\[\];:][^=(){}\[\];:\n]*,[^=(){}\[\];:\n]*\r?$")


TAG_RULES: list[tuple[str, Callable[[str], bool]]] = [
    ("test", lambda p: "/tests/" in f"/{p}" or p.rsplit("/", 1)[-1].startswith("test_")),
    ("doc", lambda p: p.endswith((".md", ".rst", ".txt")) or p.startswith("docs/")),
    (
        "config",
        lambda p: (
            p.endswith((".toml", ".yaml", ".yml", ".ini", ".cfg", ".json", ".env"))
            or p.rsplit("/", 1)[-1].startswith(".")
        ),
    ),
    (
        "code",
        lambda p: p.endswith(
            (".py", ".js", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".sh", ".sql")
        ),
    ),
]
"""The registry's built-in ``(tag, predicate(rel_path))`` rules."""


def agent_glob(files: FileSources, pattern: str) -> tuple[str, Callable[[str], str]]:
    """A glob as the agent wrote it (``/workspace/src/*.py``), anchored at the
    workspace root (``/src/*.py``), and how to name the files it matches the way the
    agent did: under the mount's agent prefix, or under the host directory when
    the glob named that. A relative glob, or one outside the workspace, is kept."""
    if not pattern.startswith("/"):
        return pattern, _as_is
    root = str(files.workspace.root)
    host = files.workspace.host_path(pattern)
    if not host.startswith(root + "/"):
        return pattern, _as_is
    anchored = host[len(root) :]
    if host == pattern:  # the host's own path
        return anchored, lambda rel: f"{root}/{rel}"
    mount = next(
        m
        for m in files.workspace.resolver.mounts
        if pattern == m.agent_prefix or pattern.startswith(m.agent_prefix.rstrip("/") + "/")
    )
    agent, canonical = mount.agent_prefix.rstrip("/"), mount.canonical_prefix.rstrip("/")

    def shown(rel: str) -> str:
        full = f"{root}/{rel}"
        return agent + full[len(canonical) :] if full.startswith(canonical + "/") else full

    return anchored, shown


def list_files(files: FileSources, call: ToolCall, globs: list[str] | None) -> list[str]:
    # A file name can hold a secret: names leave redacted like file text.
    if globs is None:
        return list(redact_data([sp.rel for sp in files.policy.iter_files(None)]))
    forms = [agent_glob(files, g) for g in globs]
    shown = forms[0][1] if len({f[1] for f in forms}) == 1 else _as_is
    rels = files.policy.iter_files([f[0] for f in forms])
    return list(redact_data([shown(sp.rel) for sp in rels]))


def glob(files: FileSources, call: ToolCall, pattern: str) -> list[str]:
    from .search import glob_files

    rel_pattern, shown = agent_glob(files, pattern)
    found = glob_files(files.workspace.root, rel_pattern, policy=files.policy)
    return list(redact_data([shown(r) for r in found]))


def _version_doc(files: FileSources, oid: str, version: str) -> tuple[dict[str, Any], int]:
    tx_text = version.rsplit("@", 1)[-1]
    try:
        tx = int(tx_text)
    except ValueError:
        raise PolicyError(
            "INVALID_ARGUMENTS",
            f"bad version id {version!r}; use one from get_file_history (`<id>@<tx>`)",
        ) from None
    doc = files.session.store.as_of(oid, tx)
    if doc is None:
        raise NotFoundError(f"no version {version!r} of this file")
    return doc, tx


def get_diff(
    files: FileSources, call: ToolCall, path: str, version1: str | None, version2: str | None
) -> DiffResult:
    sp = call.resolved.get("path") or files.resolve(path)
    rel = sp.rel
    call.paths = [rel]
    oid = files.workspace.object_id(rel)
    hist = files.session.store.history(oid)
    if not hist:
        raise NotFoundError(f"{rel} has no stored versions; read it first")
    if version1 is None and version2 is None:
        latest = hist[-1]
        a_text = latest.doc.get("content") or ""
        a_name = latest.version_id
        try:
            b_text = decode_bytes(files.policy.read_bytes(rel)) or ""
        except NotFoundError:
            b_text = ""
        b_name = "working tree"
    else:
        if version1 is not None:
            a_doc, _ = _version_doc(files, oid, version1)
        else:
            a_doc = hist[0].doc
        a_text, a_name = a_doc.get("content") or "", version1 or hist[0].version_id
        if version2 is not None:
            b_doc, _ = _version_doc(files, oid, version2)
        else:
            b_doc = hist[-1].doc
        b_text, b_name = b_doc.get("content") or "", version2 or hist[-1].version_id
    diff = unified_diff(
        redact_text(a_text),
        redact_text(b_text),
        fromfile=f"{rel}@{a_name}",
        tofile=f"{rel}@{b_name}",
    )
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    return DiffResult(
        path=rel, from_version=a_name, to_version=b_name, diff=diff, added=added,
        removed=removed,
    )  # fmt: skip


def get_file_history(files: FileSources, call: ToolCall, path: str) -> list[VersionInfo]:
    sp = call.resolved.get("path") or files.resolve(path)
    call.paths = [sp.rel]
    out = []
    prev = None
    for v in files.session.store.history(files.workspace.object_id(sp.rel)):
        d = v.doc
        action = "deleted" if is_deleted(d) else ("created" if prev is None else "updated")
        out.append(
            VersionInfo(
                version_id=v.version_id, tx_id=v.tx_id, tx_time=v.tx_time.isoformat(),
                action=action, source_hash=d.get("source_hash"),
                char_count=int(d.get("char_count") or 0),
            )
        )  # fmt: skip
        prev = d
    return out


def summarize_file(
    files: FileSources,
    call: ToolCall,
    path: str,
    max_tokens: int | None,
    *,
    summarizer: Summarizer,
    default_tokens: int,
) -> str:
    """An outline of a file within ``max_tokens`` (else ``default_tokens``, the profile's)."""
    sp = call.resolved.get("path") or files.resolve(path)
    call.paths = [sp.rel]
    data = files.policy.read_bytes(sp)
    files.index_bytes(sp.rel, data)
    text = decode_bytes(data)
    if text is None:
        return f"{sp.rel}: binary file, {len(data)} bytes"
    budget = max_tokens or default_tokens
    summary = summarizer(sp.rel, redact_text(text), budget)
    # Whatever summarizer is plugged in, the budget holds in the session's tokens.
    return fit_tokens(summary, budget, files.session.token_counter.count)


def search(
    files: FileSources,
    call: ToolCall,
    pattern: str,
    globs: list[str] | None,
    regex: bool,
    limit: int,
    start: SearchCursor,
    *,
    backend: Literal["auto", "ripgrep", "python"],
) -> SearchHits:
    from .search import search as do_search

    forms = [agent_glob(files, g) for g in globs or ()]
    shown = forms[0][1] if len({f[1] for f in forms}) == 1 else _as_is
    # Read through the policy: denied files, links and directories swapped
    # for links during the search never contribute a byte.
    hits = do_search(
        files.policy.roots[0],
        pattern,
        globs=[f[0] for f in forms] if globs is not None else None,
        regex=regex,
        backend=backend,
        policy=files.policy,
        max_results=start.skip + limit + 1,
        after=start.after,
    )
    more = len(hits) > start.skip + limit
    page = hits[start.skip : start.skip + limit]
    lines = _hit_lines(files, page)
    shown_paths = [redact_text(shown(m.path)) for m in page]
    return SearchHits(
        [
            {"path": p, "line_number": m.line_number, "line": line}
            for m, p, line in zip(page, shown_paths, lines, strict=True)
        ],
        truncated=more,
        cursor=start.next(page, limit).text() if more else None,
    )


def _hit_lines(files: FileSources, hits: list[Any]) -> list[str]:
    """The hits' lines, redacted. A line that could be part of a key body, that is
    indented (a YAML block scalar's line, a value under a Secret's ``data:``), or that
    could be a table's row (its header names the secret column) is redacted as its
    whole file would be, where its header, its key or its neighbours make it
    recognisable; any other line on its own."""
    scrubbers: dict[str, Callable[[Any], Any]] = {}
    out = []
    for hit in hits:
        if (
            not _KEY_BODY_LINE.match(hit.line)
            and not hit.line[:1].isspace()
            and not _TABLE_ROW.match(hit.line)
        ):
            out.append(redact_text(hit.line))
            continue
        if hit.path not in scrubbers:
            try:
                text = decode_bytes(files.policy.read_bytes(hit.path)) or ""
            except CtxnbError:
                text = ""
            scrubbers[hit.path] = line_redactor(text)
        out.append(scrubbers[hit.path](hit.line))
    return out


class SearchCursor:
    """Where the next page of a search starts: after the hit at ``after`` (a path and a
    line number; None: the first hit), then ``skip`` hits more.

    The next page searches only the files from the position on, so page 50 costs
    about what page 1 does, and a file changed before the position moves no hit after
    it. As text: ``PATH:LINE`` (``+SKIP`` when hits whose path redaction changes came
    after it: such a path is never written into a cursor, they are counted instead),
    or a plain number of hits to skip from the first.
    """

    __slots__ = ("after", "skip")

    def __init__(self, after: tuple[str, int] | None = None, skip: int = 0) -> None:
        self.after = after
        self.skip = skip

    @classmethod
    def parse(cls, cursor: str | None) -> SearchCursor:
        """The cursor a search answer gave (None: the first page).

        Raises:
            PolicyError: ``INVALID_ARGUMENTS``, the text is not a cursor.

        Example:
            >>> c = SearchCursor.parse("src/a:b.py:12+3")
            >>> c.after, c.skip, c.text()
            (('src/a:b.py', 12), 3, 'src/a:b.py:12+3')
        """
        if cursor is None:
            return cls()
        if cursor.isdigit():
            return cls(None, int(cursor))
        path, _, rest = cursor.rpartition(":")
        line, _, skip = rest.partition("+")
        if not path or not line.isdigit() or not (skip == "" or skip.isdigit()):
            raise PolicyError(
                "INVALID_ARGUMENTS",
                f"bad search cursor {cursor!r}",
                required_action="Pass the cursor of a truncated search answer unchanged.",
            )
        return cls((path, int(line)), int(skip or 0))

    def next(self, page: Sequence[Any], limit: int) -> SearchCursor:
        """The cursor after ``page`` (the hits this one gave, ``limit`` of them)."""
        for k in range(len(page) - 1, -1, -1):
            m = page[k]
            if redact_text(m.path) == m.path:
                return SearchCursor((m.path, m.line_number), len(page) - 1 - k)
        return SearchCursor(self.after, self.skip + limit)

    def text(self) -> str:
        if self.after is None:
            return str(self.skip)
        path, line = self.after
        return f"{path}:{line}" + (f"+{self.skip}" if self.skip else "")


def registry(files: FileSources, tag_rules: Sequence[tuple[str, Callable[[str], bool]]]) -> Any:
    """Every allowed file: path, size, hash, mtime, version, tags, sensitivity (DataFrame)."""
    import pandas as pd

    from .._util.wildmatch import GlobList
    from ..redaction.redactor import has_secrets

    # The opt-in flag: [policy] sensitive globs (reads and writes wait for a human).
    marked = [g for g in files.workspace.config.policy.sensitive if g.strip()]
    sensitive = GlobList(marked) if marked else None
    rows = []
    store = files.session.store
    for sp in files.policy.iter_files():
        rel = sp.rel
        st = files.policy.stat(sp)
        oid = files.workspace.object_id(rel)
        doc = store.get(oid)
        hist_tx = store.latest_tx_of(oid)
        tags = [tag for tag, rule in tag_rules if rule(rel)]
        content = doc.get("content") if doc else None
        rows.append(
            {
                "path": rel,
                "doc_path": make_doc_path(rel),
                "size": st.st_size,
                "sha256": doc.get("source_hash") if doc else None,
                "mtime": datetime.fromtimestamp(st.st_mtime, UTC),
                "version_id": f"{oid}@{hist_tx}" if hist_tx else None,
                "tags": tags,
                "may_contain_secrets": bool(content and has_secrets(content)),
                "sensitive": bool(sensitive is not None and sensitive.match_file(rel)),
                "binary": bool(doc and doc.get("file_type") == "binary"),
            }
        )
    return pd.DataFrame(rows)


def _as_is(rel: str) -> str:
    return rel
