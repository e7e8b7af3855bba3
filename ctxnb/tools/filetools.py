"""The file tools an agent calls: safe by construction, recorded, audited.

Every call goes through one path: the path policy (race-free access below the
workspace root), the hook engine when the workspace is governed, the tool itself,
then the records: a toolcall object in the session, a new version of every file it
touched, and a line in ``.ctxnb/audit.jsonl``.

Source precedence (the docPath rules): an *active* copy that a client registered with
:meth:`FileTools.set_active_copy` beats the stored or on-disk copy for reads and as the
base of :meth:`FileTools.write_patch`; a retrieval snippet (``rag-snippet``) is never a
base for an edit; every edit carries the SHA-256 of the copy it was computed from and
is refused with ``STALE_FILE`` when that is not the authoritative copy's hash now.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("x = 1\\n")
    >>> ws = Workspace.open(root)
    >>> tools = ws.tools(ws.session("demo"), caller="docs")
    >>> r = tools.read_file("app.py")
    >>> tools.write_file("app.py", "x = 2\\n", expected_sha256=r.sha256).success
    True
    >>> tools.dispatch("read_file", {"path": ".env"})["error_code"]
    'PATH_DENIED'
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ..access.docpath import find_document
from ..access.fdio import PathPolicy
from ..access.pathrules import SafePath
from ..errors import (
    CtxnbError,
    NotFoundError,
    PatchConflict,
    PatchError,
    PolicyError,
    StaleFileError,
)
from ..hashing import sha256_hex
from ..indexer import decode_bytes, is_deleted
from ..redaction import MARK as REDACTION_MARK
from ..redaction import line_redactor, redact, redact_data, redact_text
from ..resolver import doc_path as make_doc_path
from ..summaries import OutlineSummarizer, Summarizer, fit_tokens
from .audit import AuditLog
from .call import ToolCall, ToolHooks, ToolRunner
from .patching import (
    FilePatch,
    LineEdit,
    apply_file_patch,
    apply_line_edits,
    parse_patch,
    unified_diff,
)
from .results import DiffResult, PatchResult, ReadResult, SearchHits, VersionInfo
from .schemas import ToolInfo

if TYPE_CHECKING:
    from ..access.door import Access
    from ..session import Session

__all__ = ["FileTools"]

ALL_FILES_LOCK = "all-files.lock"
"""The workspace lock in ``.ctxnb/locks/``: every file write holds it shared, a sandbox
command's commit exclusive (one descriptor however many files it changes)."""

# A line that may belong to a PEM or OpenSSH key body (base64 only).
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}\r?$")


_TAG_RULES: list[tuple[str, Callable[[str], bool]]] = [
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


class FileTools(ToolRunner):
    """The governed file tools of one session. Create with ``ws.tools(session)``.

    Args:
        workspace: the workspace whose files the tools touch.
        session: the session that records every call.
        caller: who is calling (an agent name, ``mcp``, ``claude-code`` …), for the audit.
        policy: the path policy; built from the workspace's ``[policy]`` settings.
        profile: ``local`` or ``cloud`` (or one from the config): caps what one read
            returns.
        summarizer: outlines large files (no LLM by default; pass your own).
        hooks: the hook engine of a governed workspace.
        audit: the audit log (``.ctxnb/audit.jsonl`` by default).
        tag_rules: extra ``(tag, predicate(rel_path))`` rules for :meth:`registry`.
        search_backend: ``auto`` (ripgrep when installed), ``ripgrep`` or ``python``.
        clock: returns the current time, timezone-aware (the audit lines).
    """

    def __init__(
        self,
        workspace: Access,
        session: Session,
        *,
        caller: str = "agent",
        policy: PathPolicy | None = None,
        profile: str | None = None,
        summarizer: Summarizer | None = None,
        hooks: ToolHooks | None = None,
        audit: AuditLog | None = None,
        tag_rules: Sequence[tuple[str, Callable[[str], bool]]] = (),
        search_backend: Literal["auto", "ripgrep", "python"] = "auto",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.workspace = workspace
        self.session = session
        self.caller = caller
        cfg = workspace.config
        self.policy = policy or workspace.agent_policy
        self.profile = cfg.active_profile(profile)
        # Summaries are measured with the session's token counter, the one that counts
        # the context they enter.
        self.summarizer: Summarizer = summarizer or OutlineSummarizer(
            count_tokens=session.token_counter.count
        )
        self.hooks = hooks
        self.audit_log = audit or AuditLog(workspace.root / ".ctxnb" / "audit.jsonl")
        self.tag_rules = [*tag_rules, *_TAG_RULES]
        self.search_backend = search_backend
        self.clock = clock or (lambda: datetime.now(UTC))
        # Keyed by the real workspace-relative path (two files whose names differ only in
        # case are two files, whatever their shared docPath key).
        self._read_hashes: dict[str, str] = {}
        self._active: dict[str, str] = {}
        self._snippets: dict[str, str] = {}
        self._extra_tools: dict[str, tuple[ToolInfo, Callable[..., Any]]] = {}

    # -- source precedence ----------------------------------------------------------------
    def set_active_copy(
        self,
        doc_path: str,
        content: str,
        *,
        source: Literal["active", "rag-snippet"] = "active",
    ) -> str:
        """Register the client-side copy of a file (e.g. an unsaved editor buffer).

        An ``active`` copy beats the disk for reads, is the base of ``write_patch`` and is
        what the session's prompt shows for the file. A ``rag-snippet`` is remembered
        only to refuse it as an edit base; it never displaces an active copy.

        Returns:
            The SHA-256 of the copy.
        """
        rel = self._rel_for_doc_path(doc_path)
        if source == "rag-snippet":
            self._snippets[rel] = content
        else:
            self._active[rel] = content
            self._show_active_copy(rel, content)
        return sha256_hex(content.encode("utf-8"))

    def clear_active_copy(self, doc_path: str) -> None:
        rel = self._rel_for_doc_path(doc_path)
        self._snippets.pop(rel, None)
        if self._active.pop(rel, None) is not None:
            self._show_active_copy(rel, None)

    def _show_active_copy(self, rel: str, content: str | None) -> None:
        """The session's prompt shows the active copy of a file it holds (or stops)."""
        oid = self.workspace.object_id(rel)
        if oid not in self.session._index_set and content is not None:
            try:
                self._index_bytes(rel, self.policy.read_bytes(rel))
            except NotFoundError:
                return  # a new, unsaved file: nothing on disk to hold it yet
        if oid in self.session._index_set:
            self.session.set_active_copy(oid, content)

    def active_file_sha256(self, doc_path: str) -> str:
        """SHA-256 of the authoritative copy: the active copy if any, else the file on disk."""
        rel = self._rel_for_doc_path(doc_path)
        active = self._active.get(rel)
        if active is not None:
            return sha256_hex(active.encode("utf-8"))
        return sha256_hex(self.policy.read_bytes(rel))

    def _rel_for_doc_path(self, doc_path: str) -> str:
        """The real file a docPath names (see :meth:`resolve`)."""
        return self.resolve(doc_path).rel

    def resolve(self, path: str | SafePath, *, for_write: bool = False) -> SafePath:
        """The agent's path through the resolver (mount prefixes), the policy, and the
        docPath key: a case or Unicode variant of an existing file's name is that file.
        (The path policy of a governed workspace calls it once per path argument and
        hands the result on in ``call.resolved``.)

        Raises:
            PolicyError: ``PATH_DENIED``; ``AMBIGUOUS_DOC_PATH`` when several files share
                the key (``README.md`` and ``readme.md``) and none is named exactly.
        """
        sp = self.policy.check(self.workspace.host_path(path), for_write=for_write)
        found = find_document(self.policy, sp)
        if found is sp:
            return sp
        return self.policy.check(found, for_write=for_write)

    def _agent_glob(self, pattern: str) -> tuple[str, Callable[[str], str]]:
        """A glob as the agent wrote it (``/workspace/src/*.py``), anchored at the
        workspace root (``/src/*.py``), and how to name the files it matches the way the
        agent did: under the mount's agent prefix, or under the host directory when
        the glob named that. A relative glob, or one outside the workspace, is kept."""
        if not pattern.startswith("/"):
            return pattern, _as_is
        root = str(self.workspace.root)
        host = self.workspace.host_path(pattern)
        if not host.startswith(root + "/"):
            return pattern, _as_is
        anchored = host[len(root) :]
        if host == pattern:  # the host's own path
            return anchored, lambda rel: f"{root}/{rel}"
        mount = next(
            m
            for m in self.workspace.resolver.mounts
            if pattern == m.agent_prefix or pattern.startswith(m.agent_prefix.rstrip("/") + "/")
        )
        agent, canonical = mount.agent_prefix.rstrip("/"), mount.canonical_prefix.rstrip("/")

        def shown(rel: str) -> str:
            full = f"{root}/{rel}"
            return agent + full[len(canonical) :] if full.startswith(canonical + "/") else full

        return anchored, shown

    # -- helpers ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, rel: str) -> Iterator[None]:
        """Hold the file's write lock: compare-and-swap across threads and processes.

        The hash check and the write happen under one ``flock`` on a lock file in
        ``.ctxnb/locks/``, so two writers that read the same version cannot both win.
        The writer also holds the workspace lock shared, so that :meth:`locked_all`
        excludes it.
        """
        name = sha256_hex(make_doc_path(rel))[:32] + ".lock"
        with self._flock(ALL_FILES_LOCK, fcntl.LOCK_SH), self._flock(name, fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def locked_all(self) -> Iterator[None]:
        """Hold the write lock of every file at once, with one descriptor: the
        workspace lock, exclusive (a sandbox command's commit, however many files it
        changes). Never call :meth:`_locked` while holding it (the same process would
        wait for itself)."""
        with self._flock(ALL_FILES_LOCK, fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def _flock(self, name: str, how: int) -> Iterator[None]:
        lock_dir = self.workspace.root / ".ctxnb" / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(lock_dir / name, flags, 0o644)
        try:
            fcntl.flock(fd, how)
            yield
        finally:
            os.close(fd)

    def _index_bytes(self, rel: str, data: bytes | None) -> tuple[str, str | None]:
        """Observe the file's current bytes (a new version only when they changed)."""
        obs = self.workspace.observe([rel], data=[data])[0]
        oid = obs.object_id
        if obs.tx_id is None:  # gone, and never stored: nothing to add
            return oid, None
        self.session.took_version(oid)
        return oid, obs.version_id

    def _authoritative(self, rel: str) -> tuple[bytes | None, str]:
        """(bytes, source) of the copy edits must be based on; bytes None if no file."""
        active = self._active.get(rel)
        if active is not None:
            return active.encode("utf-8"), "active"
        try:
            return self.policy.read_bytes(rel), "disk"
        except NotFoundError:
            return None, "disk"

    def lock_base(self, rel: str, expected: str | None, tool: str) -> str:
        """The hash an edit of an existing file is based on: the caller's, else the last read.

        Raises:
            PolicyError: ``READ_BEFORE_WRITE`` when there is neither.
        """
        wanted = expected or self._read_hashes.get(rel)
        if wanted is None:
            raise PolicyError(
                "READ_BEFORE_WRITE",
                f"{tool} on {rel}: the file exists and this session has not read it, so the "
                "edit cannot be checked against its current content",
                required_action=f"Call read_file on {rel!r} first (or pass expected_sha256).",
            )
        return wanted

    def _check_lock(self, rel: str, current: bytes | None, expected: str | None, tool: str) -> None:
        snippet = self._snippets.get(rel)
        if snippet is not None and expected is not None:
            # A snippet equal to the whole authoritative copy is that copy: an edit based
            # on it is based on the file.
            whole = current is not None and expected == sha256_hex(current)
            if expected == sha256_hex(snippet.encode("utf-8")) and not whole:
                raise PolicyError(
                    "SNIPPET_NOT_EDIT_BASE",
                    f"{rel}: the hash given is that of a retrieval snippet, which is never a "
                    "base for an edit",
                    required_action="Read the whole file with read_file and edit that copy.",
                )
        if current is None:
            if expected is not None:
                raise StaleFileError(
                    f"{rel} does not exist any more, but the edit was computed from a copy "
                    f"with sha256 {expected[:12]}…",
                    expected=expected,
                    actual=None,
                )
            return
        actual = sha256_hex(current)
        wanted = self.lock_base(rel, expected, tool)
        if wanted != actual:
            raise StaleFileError(
                f"{rel} changed since it was read: the edit was computed from sha256 "
                f"{wanted[:12]}…, the file is now {actual[:12]}…; nothing was written",
                expected=wanted,
                actual=actual,
            )

    def _write(
        self,
        call: ToolCall,
        rel: str,
        old: bytes | None,
        new_text: str,
        *,
        mode: Literal["truncate", "append", "create"] = "truncate",
    ) -> PatchResult:
        old_text = decode_bytes(old) if old is not None else ""
        if REDACTION_MARK in new_text and REDACTION_MARK not in (old_text or ""):
            raise PolicyError(
                "REDACTED_CONTENT",
                f"the new content of {rel} contains a redaction marker ({REDACTION_MARK}…]); "
                "it was computed from redacted text and would overwrite a secret",
                required_action="Edit only the lines around the secret (write_patch or "
                "apply_patch) and leave the redacted lines out of the edit.",
            )
        call.old_text, call.new_text = old_text, new_text
        call.before_sha256 = sha256_hex(old) if old is not None else None
        data = new_text.encode("utf-8")
        _refuse_tool_ctxnb(rel, old, data)
        try:
            # The rename's directory fsync overlaps with the store commit below; the
            # call waits for it before it returns (see _run).
            self.policy.write_bytes_atomic(
                rel,
                data,
                mode="create" if mode == "create" else "truncate",
                make_parents=old is None,
                durable_waits=call.durable_waits,
                # An active (unsaved) copy is not what is on disk: only its identity
                # could be checked, so the check is left to the next read.
                check_replaced=rel not in self._active,
                expected_sha256=call.before_sha256,
            )
        except StaleFileError as exc:
            # Another program saved the file during this write: its version is kept on
            # disk, and in the store, and the edit is refused as stale.
            if exc.outside is not None:
                self._index_bytes(rel, exc.outside)
            raise
        except FileExistsError:
            raise PolicyError(
                "FILE_EXISTS",
                f"{rel} already exists; mode='create' only makes new files",
                required_action="Read it and use mode='truncate' with expected_sha256.",
            ) from None
        call.after_sha256 = sha256_hex(data)
        self._read_hashes[rel] = call.after_sha256
        if rel in self._active:
            self._active[rel] = new_text
            self._show_active_copy(rel, new_text)
        oid, version = self._index_bytes(rel, data)
        self.session.activate(oid)
        # A diff of the redacted texts (same lines, same numbers): a hunk that shows only
        # part of a key block is redacted as the whole file would be.
        diff = unified_diff(
            redact_text(old_text or ""),
            redact_text(new_text),
            fromfile=f"a/{rel}",
            tofile=f"b/{rel}",
        )
        return PatchResult(
            success=True,
            message=f"wrote {len(data)} bytes to {rel}",
            path=rel,
            diff=diff,
            version_id=version,
            sha256=call.after_sha256,
        )

    def _shape(
        self, rel: str, text: str, start: int, end: int | None
    ) -> tuple[str, int, int, bool, str]:
        """Cap what one read returns; large files become excerpt + outline + how to read more."""
        lines = text.splitlines(keepends=True)
        total = len(lines)
        stop = total if end is None else min(end, total)
        chosen = "".join(lines[start - 1 : stop])
        limit = self.profile.max_read_chars
        if len(chosen) <= limit:
            return chosen, start, stop, False, ""
        keep = max(1, min(self.profile.excerpt_lines, stop - start + 1))
        excerpt_lines = lines[start - 1 : start - 1 + keep]
        excerpt = "".join(excerpt_lines)
        if len(excerpt) > limit:
            excerpt = excerpt[:limit]
        shown_end = start + len(excerpt_lines) - 1
        summary = self.summarizer(rel, text, self.profile.summary_tokens)
        note = (
            f"{rel} has {total} lines ({len(text)} chars), more than one read returns "
            f"({limit} chars). Shown: lines {start}-{shown_end}, then an outline. Read more "
            f"with read_lines(path={rel!r}, start={shown_end + 1}, end=…)."
        )
        body = f"{excerpt}\n[… excerpt ends at line {shown_end} of {total} …]\n\n{summary}\n"
        return body, start, shown_end, True, note

    # -- tools ----------------------------------------------------------------------------------
    def list_files(self, globs: list[str] | None = None) -> list[str]:
        """Workspace files the policy allows, optionally filtered by gitignore-style globs."""

        def run(call: ToolCall) -> list[str]:
            # A file name can hold a secret: names leave redacted like file text.
            if globs is None:
                return list(redact_data([sp.rel for sp in self.policy.iter_files(None)]))
            forms = [self._agent_glob(g) for g in globs]
            shown = forms[0][1] if len({f[1] for f in forms}) == 1 else _as_is
            rels = self.policy.iter_files([f[0] for f in forms])
            return list(redact_data([shown(sp.rel) for sp in rels]))

        return self.run_call("list_files", {"globs": globs}, run)

    def glob(self, pattern: str) -> list[str]:
        """Files whose workspace-relative path matches a glob (``**`` crosses directories)."""
        from .search import glob_files

        def run(call: ToolCall) -> list[str]:
            rel_pattern, shown = self._agent_glob(pattern)
            found = glob_files(self.workspace.root, rel_pattern, policy=self.policy)
            return list(redact_data([shown(r) for r in found]))

        return self.run_call("glob", {"pattern": pattern}, run)

    def _read(
        self, call: ToolCall, path: str, start: int = 1, end: int | None = None
    ) -> ReadResult:
        sp = call.resolved.get("path") or self.resolve(path)
        rel = sp.rel
        call.paths = [rel]
        data = self.policy.read_bytes(sp)
        disk_sha = sha256_hex(data)
        _, version = self._index_bytes(rel, data)
        key = make_doc_path(rel)
        active = self._active.get(rel)
        source = "disk"
        sha = disk_sha
        text = decode_bytes(data)
        if active is not None:
            text, source = active, "active"
            sha = sha256_hex(text.encode("utf-8"))
        self._read_hashes[rel] = sha
        call.before_sha256 = sha
        oid = self.workspace.object_id(rel)
        if text is None:
            self.session.activate(oid)
            return ReadResult(
                path=rel, doc_path=key, content=None, sha256=sha, version_id=version,
                source=source, binary=True, total_chars=len(data),
                note=f"{rel} is a binary file ({len(data)} bytes); it has no text to show",
            )  # fmt: skip
        total_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if start > max(total_lines, 1):
            raise PolicyError(
                "BAD_RANGE",
                f"{rel} has {total_lines} lines; line {start} does not exist",
                required_action=f"Ask for lines between 1 and {total_lines}.",
            )
        # The whole file is redacted, then cut: a range that starts below a key's BEGIN
        # line still loses the key's body (redaction keeps line numbers).
        red = redact(text)
        shown, first, last, truncated, note = self._shape(rel, red.text, start, end)
        if first == 1 and last >= total_lines and not truncated:
            self.session.activate(oid)  # the whole file was read: it is in the context
        count = sum(
            1
            for f in red.findings
            if f.line <= last and f.line + text.count("\n", f.start, f.end) >= first
        )
        if count:
            note = (note + " " if note else "") + (
                f"{count} secret(s) were replaced by [REDACTED:…] markers; the file on "
                "disk is unchanged. Do not copy the markers into an edit."
            )
        return ReadResult(
            path=rel, doc_path=key, content=shown, sha256=sha, version_id=version,
            source=source, start_line=first, end_line=last, total_lines=total_lines,
            total_chars=len(text), truncated=truncated, redactions=count, note=note,
        )  # fmt: skip

    def read_file(self, path: str) -> ReadResult:
        """Read a file: text (shaped and redacted), sha256 of its exact bytes, version id."""
        return self.run_call("read_file", {"path": path}, lambda call: self._read(call, path))

    def read_lines(self, path: str, start: int, end: int) -> ReadResult:
        """Read lines ``start``..``end`` (1-based, inclusive)."""
        if start < 1 or end < start:
            raise PolicyError(
                "BAD_RANGE",
                f"bad line range {start}-{end}: start must be >= 1 and end >= start",
                required_action="Pass 1 <= start <= end.",
            )
        return self.run_call(
            "read_lines",
            {"path": path, "start": start, "end": end},
            lambda call: self._read(call, path, start, end),
        )

    def get_excerpt(self, path: str, max_lines: int = 80) -> ReadResult:
        """The first ``max_lines`` lines of a file and how big it is."""
        return self.run_call(
            "get_excerpt",
            {"path": path, "max_lines": max_lines},
            lambda call: self._read(call, path, 1, max_lines),
        )

    def write_file(
        self,
        path: str,
        content: str,
        mode: Literal["truncate", "append", "create"] = "truncate",
        expected_sha256: str | None = None,
    ) -> PatchResult:
        """Write a file atomically (temp file + rename in the same directory, mode kept).

        Args:
            path: workspace-relative path.
            content: the text.
            mode: ``truncate`` replaces, ``append`` adds at the end, ``create`` makes a
                new file only.
            expected_sha256: the hash of the file as last read; when omitted, the hash
                this session last read is used (an unread existing file is refused).
        """
        if mode not in ("truncate", "append", "create"):
            raise PolicyError(
                "INVALID_ARGUMENTS",
                f"unknown write mode {mode!r}",
                required_action="Use mode 'truncate', 'append' or 'create'.",
            )

        def run(call: ToolCall) -> PatchResult:
            sp = call.resolved.get("path") or self.resolve(path, for_write=True)
            rel = sp.rel
            call.paths = [rel]
            with self._locked(rel):
                return write_locked(call, rel)

        def write_locked(call: ToolCall, rel: str) -> PatchResult:
            current, _ = self._authoritative(rel)
            if mode == "create":
                if current is not None:
                    raise PolicyError(
                        "FILE_EXISTS",
                        f"{rel} already exists; mode='create' only makes new files",
                        required_action="Read it and use mode='truncate' with expected_sha256.",
                    )
                return self._write(call, rel, None, content, mode="create")
            self._check_lock(rel, current, expected_sha256, "write_file")
            old_text = decode_bytes(current) if current is not None else ""
            if old_text is None:
                raise PolicyError(
                    "BINARY_FILE",
                    f"{rel} is binary; the file tools write text only",
                    recoverable=False,
                    required_action="Leave binary files to other tools.",
                )
            new_text = old_text + content if mode == "append" else content
            return self._write(call, rel, current, new_text)

        return self.run_call(
            "write_file",
            {"path": path, "content": content, "mode": mode, "expected_sha256": expected_sha256},
            run,
        )

    def _patch(
        self,
        call: ToolCall,
        rel: str,
        expected: str | None,
        transform: Callable[[str], str],
        *,
        delete: bool = False,
        move_to: str | None = None,
    ) -> PatchResult:
        """Check, transform and write one file under its lock; a conflict writes nothing.

        With ``delete`` the transform must empty the file, which is then deleted; with
        ``move_to`` the result is written there and the file deleted (a rename).
        """
        sp = self.resolve(rel, for_write=True)
        rel = sp.rel
        call.paths = [rel] if move_to is None else [move_to, rel]
        with self._locked(rel):
            current, _ = self._authoritative(rel)
            if current is None:
                raise NotFoundError(f"{rel} does not exist; create it with write_file")
            self._check_lock(rel, current, expected, call.tool)
            old_text = decode_bytes(current)
            if old_text is None:
                raise PolicyError("BINARY_FILE", f"{rel} is binary", recoverable=False)
            # The patch and a conflict quote the file's lines (context, expected, found,
            # the reason): they are redacted as the whole file is, so a key body line cut
            # from its header is recognised, in the result, the context and the logs.
            scrub = call.context["scrub"] = line_redactor(old_text)
            try:
                new_text = transform(old_text)
            except PatchConflict as e:
                return PatchResult(
                    success=False,
                    message=scrub(str(e)),
                    path=rel,
                    conflict=True,
                    failed_hunks=scrub(e.failed_hunks),
                    sha256=sha256_hex(current),
                )
            if delete:
                return self._delete(call, rel, current, old_text)
            if move_to is None:
                return self._write(call, rel, current, new_text)
            result = self._write(call, move_to, None, new_text, mode="create")
            self._delete(call, rel, current, old_text)
            call.new_text = new_text  # the trace records the new file against the old text
            call.after_sha256 = result.sha256
            result.message = f"renamed {rel} to {move_to}; " + result.message
            return result

    def apply_patch(
        self, path: str, unified_diff: str, expected_sha256: str | None = None
    ) -> PatchResult:
        """Apply a one-file unified diff as ``git apply`` would, to the byte.

        A modification patches ``path``. A diff from ``/dev/null`` creates ``path``
        (which must not exist); a diff to ``/dev/null`` deletes it, after checking that
        its hunks remove the whole file (a versioned, traced deletion, never an empty
        file); a rename diff (``rename from``/``rename to``) patches ``path`` and moves
        it to the new name, which must not exist and must pass the same path rules and
        intent scope. A diff that covers several files is refused.

        On conflict nothing is written and the result has ``conflict=True`` and the
        failed hunks. A malformed patch raises :class:`~ctxnb.errors.PatchError`.
        """
        # Parsed before the call so a rename's destination is governed like ``path``; a
        # malformed diff is raised inside the call so that it is recorded and audited.
        fp: FilePatch | None = None
        problem: PatchError | None = None
        try:
            files = parse_patch(unified_diff)
            if len(files) > 1:
                names = ", ".join(repr(f.path) for f in files)
                raise PatchError(
                    f"the diff covers {len(files)} files ({names}); apply_patch takes one "
                    "file's diff per call: split it at its 'diff --git' lines"
                )
            fp = files[0]
        except PatchError as e:
            problem = e

        def run(call: ToolCall) -> PatchResult:
            if fp is None:
                assert problem is not None
                raise problem
            return self._apply_file_patch(call, path, fp, expected_sha256)

        rename_to = fp.new_path if fp is not None and fp.kind == "rename" else None
        return self.run_call(
            "apply_patch",
            {"path": path, "unified_diff": unified_diff, "expected_sha256": expected_sha256},
            run,
            targets=[rename_to] if rename_to else (),
        )

    def _apply_file_patch(
        self, call: ToolCall, path: str, fp: FilePatch, expected: str | None
    ) -> PatchResult:
        rel = self.resolve(path, for_write=True).rel
        named = fp.new_path if fp.kind == "create" else fp.old_path
        if named is not None and fp.kind != "modify" and make_doc_path(named) != make_doc_path(rel):
            raise PatchError(
                f"the diff {'creates' if fp.kind == 'create' else fp.kind + 's'} {named!r} "
                f"but path is {rel!r}; pass path={named!r}"
            )
        if fp.kind == "modify":
            return self._patch(call, rel, expected, lambda old: _patched(old, fp))
        if fp.kind == "create":
            call.paths = [rel]
            with self._locked(rel):
                current, _ = self._authoritative(rel)
                if current is not None:
                    return _conflict(rel, current, f"the diff creates {rel}, which exists")
                return self._write(call, rel, None, _patched("", fp), mode="create")
        if fp.kind == "delete":
            return self._patch(call, rel, expected, lambda old: _patched(old, fp), delete=True)
        dest = self.resolve(fp.new_path or "", for_write=True).rel
        with self._locked(dest):
            if self._authoritative(dest)[0] is not None:
                return _conflict(rel, None, f"the rename target {dest} exists")
            result = self._patch(call, rel, expected, lambda old: _patched(old, fp), move_to=dest)
        return result

    def _delete(self, call: ToolCall, rel: str, old: bytes, old_text: str) -> PatchResult:
        """Delete a file: a deletion version in the store, a trace of what was removed."""
        call.old_text, call.new_text = old_text, ""
        call.before_sha256 = sha256_hex(old)
        _refuse_tool_ctxnb(rel, old, None)
        self.policy.delete(rel)
        self._read_hashes.pop(rel, None)
        self._active.pop(rel, None)
        _, version = self._index_bytes(rel, None)
        diff = redact(unified_diff(old_text, "", fromfile=f"a/{rel}", tofile="/dev/null")).text
        return PatchResult(
            success=True,
            message=f"deleted {rel} ({len(old)} bytes)",
            path=rel,
            diff=diff,
            version_id=version,
        )

    def write_patch(
        self,
        doc_path: str,
        original_sha256: str,
        edits: Sequence[LineEdit | dict[str, Any]],
    ) -> PatchResult:
        """Replace line ranges of a file (the line-level patch of the docPath rules).

        The edits are computed from the copy whose hash is ``original_sha256``: the
        active copy when one is registered, else the file on disk.
        """
        parsed = [e if isinstance(e, LineEdit) else LineEdit.model_validate(e) for e in edits]
        return self.run_call(
            "write_patch",
            {
                "doc_path": doc_path,
                "original_sha256": original_sha256,
                "edits": [e.model_dump() for e in parsed],
            },
            lambda call: self._patch(
                call,
                self._rel_for_doc_path(doc_path),
                original_sha256,
                lambda old: apply_line_edits(old, parsed),
            ),
        )

    def _version_doc(self, oid: str, version: str) -> tuple[dict[str, Any], int]:
        tx_text = version.rsplit("@", 1)[-1]
        try:
            tx = int(tx_text)
        except ValueError:
            raise PolicyError(
                "INVALID_ARGUMENTS",
                f"bad version id {version!r}; use one from get_file_history (`<id>@<tx>`)",
            ) from None
        doc = self.session.store.as_of(oid, tx)
        if doc is None:
            raise NotFoundError(f"no version {version!r} of this file")
        return doc, tx

    def get_diff(
        self, path: str, version1: str | None = None, version2: str | None = None
    ) -> DiffResult:
        """Diff two stored versions, or the file on disk against its latest stored version."""

        def run(call: ToolCall) -> DiffResult:
            sp = call.resolved.get("path") or self.resolve(path)
            rel = sp.rel
            call.paths = [rel]
            oid = self.workspace.object_id(rel)
            hist = self.session.store.history(oid)
            if not hist:
                raise NotFoundError(f"{rel} has no stored versions; read it first")
            if version1 is None and version2 is None:
                latest = hist[-1]
                a_text = latest.doc.get("content") or ""
                a_name = latest.version_id
                try:
                    b_text = decode_bytes(self.policy.read_bytes(rel)) or ""
                except NotFoundError:
                    b_text = ""
                b_name = "working tree"
            else:
                if version1 is not None:
                    a_doc, _ = self._version_doc(oid, version1)
                else:
                    a_doc = hist[0].doc
                a_text, a_name = a_doc.get("content") or "", version1 or hist[0].version_id
                if version2 is not None:
                    b_doc, _ = self._version_doc(oid, version2)
                else:
                    b_doc = hist[-1].doc
                b_text, b_name = b_doc.get("content") or "", version2 or hist[-1].version_id
            diff = unified_diff(
                redact_text(a_text),
                redact_text(b_text),
                fromfile=f"{rel}@{a_name}",
                tofile=f"{rel}@{b_name}",
            )
            added = sum(
                1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")
            )
            removed = sum(
                1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")
            )
            return DiffResult(
                path=rel, from_version=a_name, to_version=b_name, diff=diff, added=added,
                removed=removed,
            )  # fmt: skip

        return self.run_call(
            "get_diff", {"path": path, "version1": version1, "version2": version2}, run
        )

    def restore_file(self, path: str, version: str | None = None) -> PatchResult:
        """Put a file back as it was in a stored version (a governed write; see
        :mod:`ctxnb.tools.restore`). ``version`` defaults to the one before the last change."""
        from .restore import restore_file

        return self.run_call(
            "restore_file",
            {"path": path, "version": version},
            lambda call: restore_file(self, call, path, version),
        )

    def get_file_history(self, path: str) -> list[VersionInfo]:
        """The stored versions of a file, oldest first."""

        def run(call: ToolCall) -> list[VersionInfo]:
            sp = call.resolved.get("path") or self.resolve(path)
            call.paths = [sp.rel]
            out = []
            prev = None
            for v in self.session.store.history(self.workspace.object_id(sp.rel)):
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

        return self.run_call("get_file_history", {"path": path}, run)

    def summarize_file(self, path: str, max_tokens: int | None = None) -> str:
        """An outline of a file (no LLM) within ``max_tokens``."""

        def run(call: ToolCall) -> str:
            sp = call.resolved.get("path") or self.resolve(path)
            call.paths = [sp.rel]
            data = self.policy.read_bytes(sp)
            self._index_bytes(sp.rel, data)
            text = decode_bytes(data)
            if text is None:
                return f"{sp.rel}: binary file, {len(data)} bytes"
            budget = max_tokens or self.profile.summary_tokens
            summary = self.summarizer(sp.rel, redact_text(text), budget)
            # Whatever summarizer is plugged in, the budget holds in the session's tokens.
            return fit_tokens(summary, budget, self.session.token_counter.count)

        return self.run_call("summarize_file", {"path": path, "max_tokens": max_tokens}, run)

    def search(
        self,
        pattern: str,
        globs: list[str] | None = None,
        regex: bool = True,
        limit: int = 200,
        cursor: str | None = None,
    ) -> SearchHits:
        """Grep-like search (ripgrep when installed); denied files are never searched.

        At most ``limit`` hits come back, in path and line order; when there are more,
        the answer's ``truncated`` is True and its ``cursor`` continues after it.
        """
        from .search import search as do_search

        if limit < 1:
            raise PolicyError(
                "INVALID_ARGUMENTS",
                f"search limit must be at least 1, got {limit}",
                required_action="Pass limit >= 1 (200 by default).",
            )
        start = _cursor_offset(cursor)

        def run(call: ToolCall) -> SearchHits:
            forms = [self._agent_glob(g) for g in globs or ()]
            shown = forms[0][1] if len({f[1] for f in forms}) == 1 else _as_is
            # Read through the policy: denied files, links and directories swapped
            # for links during the search never contribute a byte.
            hits = do_search(
                self.policy.roots[0],
                pattern,
                globs=[f[0] for f in forms] if globs is not None else None,
                regex=regex,
                backend=self.search_backend,
                policy=self.policy,
                max_results=start + limit + 1,
            )
            more = len(hits) > start + limit
            page = hits[start : start + limit]
            lines = self._hit_lines(page)
            return SearchHits(
                [
                    {"path": redact_text(shown(m.path)), "line_number": m.line_number, "line": line}
                    for m, line in zip(page, lines, strict=True)
                ],
                truncated=more,
                cursor=str(start + limit) if more else None,
            )

        return self.run_call(
            "search",
            {"pattern": pattern, "globs": globs, "regex": regex, "limit": limit, "cursor": cursor},
            run,
        )

    def _hit_lines(self, hits: list[Any]) -> list[str]:
        """The hits' lines, redacted. A line that could be part of a key body, or that is
        indented (a YAML block scalar's line, a value under a Secret's ``data:``), is
        redacted as its whole file would be, where its header, its key or its
        neighbours make it recognisable; any other line on its own."""
        scrubbers: dict[str, Callable[[Any], Any]] = {}
        out = []
        for hit in hits:
            if not _KEY_BODY_LINE.match(hit.line) and not hit.line[:1].isspace():
                out.append(redact_text(hit.line))
                continue
            if hit.path not in scrubbers:
                try:
                    text = decode_bytes(self.policy.read_bytes(hit.path)) or ""
                except CtxnbError:
                    text = ""
                scrubbers[hit.path] = line_redactor(text)
            out.append(scrubbers[hit.path](hit.line))
        return out

    # -- registry, audit, schemas, dispatch -----------------------------------------------------
    def registry(self) -> Any:
        """Every allowed file: path, size, hash, mtime, version, tags, sensitivity (DataFrame)."""
        import pandas as pd

        from ..redaction import has_secrets

        rows = []
        store = self.session.store
        for sp in self.policy.iter_files():
            rel = sp.rel
            st = self.policy.stat(sp)
            oid = self.workspace.object_id(rel)
            doc = store.get(oid)
            hist_tx = store.latest_tx_of(oid)
            tags = [tag for tag, rule in self.tag_rules if rule(rel)]
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
                    "binary": bool(doc and doc.get("file_type") == "binary"),
                }
            )
        return pd.DataFrame(rows)

    def object_id(self, rel: str) -> str:
        return self.workspace.object_id(rel)

    def __repr__(self) -> str:
        gov = " governed" if self.hooks is not None else ""
        return f"<FileTools{gov} session={self.session.session_id!r} caller={self.caller!r}>"


def _as_is(rel: str) -> str:
    return rel


def _cursor_offset(cursor: str | None) -> int:
    """The offset a search cursor stands for (None: the first page)."""
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise PolicyError(
            "INVALID_ARGUMENTS",
            f"bad search cursor {cursor!r}",
            required_action="Pass the cursor of a truncated search answer unchanged.",
        )
    return int(cursor)


def _refuse_tool_ctxnb(rel: str, old: bytes | None, new: bytes | None) -> None:
    """``[tool.ctxnb]`` in ``pyproject.toml`` is governance: no agent tool changes it."""
    if rel.lower() != "pyproject.toml":
        return
    from ..config import tool_ctxnb_changed

    if tool_ctxnb_changed(old, new):
        raise PolicyError(
            "PATH_DENIED",
            f"{rel}: the change adds, alters or removes [tool.ctxnb], ctxnb's settings, "
            "which no agent tool changes",
            recoverable=False,
            required_action="Leave [tool.ctxnb] as it is; a human edits ctxnb's settings.",
            details={"path": rel, "rule": "governance:[tool.ctxnb]"},
        )


def _patched(old: str, fp: FilePatch) -> str:
    """The text a patch leaves; a deletion leaves ``""`` (checked by apply_file_patch)."""
    return apply_file_patch(None if fp.created else old, fp) or ""


def _conflict(rel: str, current: bytes | None, message: str) -> PatchResult:
    return PatchResult(
        success=False,
        message=f"{message}; nothing was written",
        path=rel,
        conflict=True,
        sha256=sha256_hex(current) if current is not None else None,
    )
