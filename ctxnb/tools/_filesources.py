"""Which copy of a file a tool reads and edits, and the locks around an edit.

:class:`FileSources` is the part of :class:`~ctxnb.tools.filetools.FileTools` that
knows the files, and what the write helpers (``writing.py``, ``restore.py``) and the
lookups (``lookups.py``) are given: the workspace, the path policy, the session, the
source precedence of the docPath rules (a client's active copy beats the stored or
on-disk copy; a retrieval snippet is never an edit's base), resolving an agent's path
through the path policy, the per-file and workspace locks in ``.ctxnb/locks/``, and the
optimistic-lock check that refuses an edit computed from a copy that is no longer the
authoritative one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from ..access.docpath import find_document
from ..access.fdio import PathKind, PathPolicy
from ..access.pathrules import SafePath
from ..errors import NotFoundError, PolicyError, StaleFileError
from ..hashing import sha256_hex
from ..resolver import doc_path as make_doc_path
from .call import ToolCall

if TYPE_CHECKING:
    from ..access.door import Access
    from ..session.core import Session

ALL_FILES_LOCK = "all-files.lock"
"""The workspace lock in ``.ctxnb/locks/``: every file write holds it shared, a sandbox
command's commit exclusive (one descriptor however many files it changes)."""

_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
# The argument that names the copy an edit is based on, per tool that takes one (the
# fix a READ_BEFORE_WRITE refusal names).
_BASE_ARG = {
    "write_file": "expected_sha256",
    "apply_patch": "expected_sha256",
    "propose_merge": "base_sha256",
}


class FileSources:
    """Source precedence, path resolution and locks of one :class:`FileTools` (see the module).

    Args:
        workspace: the workspace whose files the tools touch.
        policy: the path policy every read and write goes through.
        session: the session that holds what the agent saw.
    """

    def __init__(self, workspace: Access, policy: PathPolicy, session: Session) -> None:
        self.workspace = workspace
        self.policy = policy
        self.session = session
        # Keyed by the real workspace-relative path (two files whose names differ only in
        # case are two files, whatever their shared docPath key).
        self.read_hashes: dict[str, str] = {}  # the hash of the copy last read
        self.active: dict[str, str] = {}  # clients' active copies
        self.snippets: dict[str, str] = {}  # retrieval snippets, never an edit's base

    def object_id(self, rel: str) -> str:
        """The object id of a workspace file."""
        return self.workspace.object_id(rel)

    # -- source precedence ----------------------------------------------------------------
    def set_active_copy(
        self,
        doc_path: str,
        content: str,
        *,
        source: Literal["active", "rag-snippet"] = "active",
    ) -> str:
        """:meth:`ctxnb.tools.FileTools.set_active_copy`: the copy's SHA-256."""
        rel = self.rel_for_doc_path(doc_path)
        if source == "rag-snippet":
            self.snippets[rel] = content
        else:
            self.active[rel] = content
            self.show_active_copy(rel, content)
        return sha256_hex(content.encode("utf-8"))

    def clear_active_copy(self, doc_path: str) -> None:
        rel = self.rel_for_doc_path(doc_path)
        self.snippets.pop(rel, None)
        if self.active.pop(rel, None) is not None:
            self.show_active_copy(rel, None)

    def show_active_copy(self, rel: str, content: str | None) -> None:
        """The session's prompt shows the active copy of a file it holds (or stops)."""
        oid = self.workspace.object_id(rel)
        if not self.session.in_index(oid) and content is not None:
            try:
                self.index_bytes(rel, self.policy.read_bytes(rel))
            except NotFoundError:
                return  # a new, unsaved file: nothing on disk to hold it yet
        if self.session.in_index(oid):
            self.session.set_active_copy(oid, content)

    def active_file_sha256(self, doc_path: str) -> str:
        """SHA-256 of the authoritative copy: the active copy if any, else the file on disk."""
        rel = self.rel_for_doc_path(doc_path)
        active = self.active.get(rel)
        if active is not None:
            return sha256_hex(active.encode("utf-8"))
        return sha256_hex(self.policy.read_bytes(rel))

    def rel_for_doc_path(self, doc_path: str) -> str:
        """The real file a docPath names (see :meth:`resolve`)."""
        return self.resolve(doc_path).rel

    def path_as_given(self, given: str, rel: str) -> str:
        """``rel`` as the agent's path when ``given`` came through a mount (see
        :meth:`ctxnb.tools.call.ToolRunner.path_as_given`)."""
        if not given.startswith("/") or rel.startswith("/"):
            return rel
        ws = self.workspace
        return ws.resolver.as_seen_through(given, f"{ws.root}/{rel}") or rel

    def resolve(self, path: str | SafePath, *, for_write: bool = False) -> SafePath:
        """The agent's path through the resolver (mount prefixes), the policy, and the
        docPath key: a case or Unicode variant of an existing file's name is that file.
        (The path policy of a governed workspace calls it once per path argument and
        hands the result on in ``call.resolved``.)

        Raises:
            PolicyError: ``PATH_DENIED``; ``AMBIGUOUS_DOC_PATH`` when several files share
                the key (``README.md`` and ``readme.md``) and none is named exactly.
        """
        return self.resolve_kind(path, for_write=for_write)[0]

    def resolve_kind(
        self, path: str | SafePath, *, for_write: bool = False
    ) -> tuple[SafePath, PathKind]:
        """:meth:`resolve`, and what the policy's look found there (see
        :meth:`PathPolicy.check_kind <ctxnb.access.fdio.PathPolicy.check_kind>`): one walk
        answers both "which file" and "is it there" for the rest of one call."""
        sp, kind = self.policy.check_kind(self.workspace.host_path(path), for_write=for_write)
        found = find_document(self.policy, sp, kind)
        if found is sp:
            return sp, kind
        return self.policy.check_kind(found, for_write=for_write)

    # -- helpers ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, rel: str) -> Iterator[None]:
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
        changes). Never call :meth:`locked` while holding it (the same process would
        wait for itself)."""
        with self._flock(ALL_FILES_LOCK, fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def _flock(self, name: str, how: int) -> Iterator[None]:
        lock_dir = f"{self.workspace.root}/.ctxnb/locks"
        try:
            fd = os.open(f"{lock_dir}/{name}", _LOCK_FLAGS, 0o644)
        except FileNotFoundError:
            # The directory is made when missing, not checked on every write: someone
            # may have removed it (or .ctxnb) since; then the open is tried again.
            os.makedirs(lock_dir, exist_ok=True)
            fd = os.open(f"{lock_dir}/{name}", _LOCK_FLAGS, 0o644)
        try:
            fcntl.flock(fd, how)
            yield
        finally:
            os.close(fd)

    def index_bytes(
        self, rel: str, data: bytes | None, call: ToolCall | None = None
    ) -> tuple[str, str | None]:
        """Observe the file's current bytes (a new version only when they changed).

        With a ``call`` whose ``attach`` gives a trace record, the record is committed
        in the version's transaction, and ``call.logged_tx`` names it.
        """
        attached, named = None, None
        if call is not None and call.attach is not None and data is not None:
            named = self.object_id(rel)
            attached = call.attach(named)
        waits = call.durable_waits if call is not None and attached is not None else None
        before = len(waits) if waits is not None else 0
        obs = self.workspace.observe(
            [rel],
            data=[data],
            attached=[attached] if attached is not None else None,
            # The log line's fsync overlaps the call's recording; the record policy
            # appends the ledger line once it is durable (see RecordPolicy).
            durable_waits=waits,
            walked=True,  # every caller read, wrote or deleted it through self.policy
        )[0]
        if call is not None and waits is not None and len(waits) > before:
            # The ledger line asks for it first: it is written only if the line is durable.
            call.context["_log_durable"] = waits[-1]
        oid = obs.object_id
        # Logged only when this transaction wrote the version the record names (else the
        # record policy appends it as before; a restore refuses a record whose object
        # is not in its transaction, so it is never written twice).
        if attached is not None and obs.doc is not None and oid == named and call is not None:
            call.logged_tx = obs.tx_id
        if obs.tx_id is None:  # gone, and never stored: nothing to add
            return oid, None
        self.session.took_version(oid)
        return oid, obs.version_id

    def authoritative(self, rel: str) -> tuple[bytes | None, str]:
        """(bytes, source) of the copy edits must be based on; bytes None if no file."""
        active = self.active.get(rel)
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
        wanted = expected or self.read_hashes.get(rel)
        if wanted is None:
            # The fix is in the message itself, not only in required_action: a Python
            # caller sees str(error), and every door (dispatch, MCP, the hook) hands on
            # this one text, so each names the same fix.
            base = _BASE_ARG.get(tool)
            fix = f"read it first (read_file({rel!r}))" + (
                f", or pass the sha256 of the copy the edit is based on as {base}" if base else ""
            )
            raise PolicyError(
                "READ_BEFORE_WRITE",
                f"{tool} on {rel}: the file exists and this session has not read it, so the "
                f"edit cannot be checked against its current content; {fix}",
                required_action=f"{fix[0].upper()}{fix[1:]}.",
            )
        return wanted

    def check_lock(self, rel: str, current: bytes | None, expected: str | None, tool: str) -> None:
        snippet = self.snippets.get(rel)
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
