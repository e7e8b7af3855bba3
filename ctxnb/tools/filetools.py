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
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ..access.fdio import PathKind, PathPolicy
from ..access.pathrules import SafePath
from ..errors import CtxnbError, NotFoundError, PatchError, PolicyError
from ..hashing import sha256_hex
from ..indexer import decode_bytes
from ..redaction.redactor import redact
from ..resolver import doc_path as make_doc_path
from ..strategies.summaries import OutlineSummarizer, Summarizer
from . import lookups, writing
from ._filesources import ALL_FILES_LOCK as ALL_FILES_LOCK
from ._filesources import FileSources
from .audit import AuditLog
from .call import ToolCall, ToolHooks, ToolRunner
from .patching import (
    FilePatch,
    LineEdit,
    apply_file_patch,
    apply_line_edits,
    parse_patch,
)
from .results import DiffResult, PatchResult, ReadResult, SearchHits, VersionInfo
from .schemas import ToolInfo

if TYPE_CHECKING:
    from ..access.door import Access
    from ..session.core import Session
    from .merging import MergeProposal, MergeReviewer

__all__ = ["FileTools"]


def _configured_reviewer(cfg: Any) -> MergeReviewer | None:
    """The ``[merge]`` review model as a review backend (litellm is imported at its
    first call, never here)."""
    if not cfg.review_model:
        return None
    import os

    from ..llm.merge_review import LiteLLMMergeReviewer

    key = os.environ.get(cfg.review_api_key_env) if cfg.review_api_key_env else None
    return LiteLLMMergeReviewer(cfg.review_model, api_base=cfg.review_api_base, api_key=key)


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
        # The files' part: what the tools read and write, through which policy, for
        # which session, and the copies and locks (the helpers modules are given it).
        self._files = FileSources(workspace, policy or workspace.agent_policy, session)
        self.caller = caller
        cfg = workspace.config
        self.profile = cfg.active_profile(profile)
        # Summaries are measured with the session's token counter, the one that counts
        # the context they enter.
        self.summarizer: Summarizer = summarizer or OutlineSummarizer(
            count_tokens=session.token_counter.count
        )
        self.hooks = hooks
        self.audit_log = audit or AuditLog(workspace.root / ".ctxnb" / "audit.jsonl")
        self.tag_rules = [*tag_rules, *lookups.TAG_RULES]
        self.search_backend = search_backend
        self.clock = clock or (lambda: datetime.now(UTC))
        self._extra_tools: dict[str, tuple[ToolInfo, Callable[..., Any]]] = {}
        self.budget_limits = cfg.budget
        #: The review backend of merge proposals' conflicts (None: clean merges only);
        #: by default the ``[merge] review_model`` of the settings, if set.
        self.merge_reviewer: MergeReviewer | None = _configured_reviewer(cfg.merge)
        self._proposals: dict[str, MergeProposal] = {}
        #: Another session whose kept merge proposals these tools may apply: the human's
        #: ``ctxnb merge accept`` acts for the session that proposed the merge.
        self.merge_for: str | None = None

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
        return self.run_call(
            "list_files",
            {"globs": globs},
            lambda call: lookups.list_files(self._files, call, globs),
        )

    def glob(self, pattern: str) -> list[str]:
        """Files whose workspace-relative path matches a glob (``**`` crosses directories)."""
        return self.run_call(
            "glob", {"pattern": pattern}, lambda call: lookups.glob(self._files, call, pattern)
        )

    def _read(
        self, call: ToolCall, path: str, start: int = 1, end: int | None = None
    ) -> ReadResult:
        sp = call.resolved.get("path") or self.resolve(path)
        rel = sp.rel
        call.paths = [rel]
        data = self.policy.read_bytes(sp)
        disk_sha = sha256_hex(data)
        _, version = self._files.index_bytes(rel, data)
        key = make_doc_path(rel)
        active = self._files.active.get(rel)
        source = "disk"
        sha = disk_sha
        text = decode_bytes(data)
        if active is not None:
            text, source = active, "active"
            sha = sha256_hex(text.encode("utf-8"))
        call.before_sha256 = sha
        oid = self.workspace.object_id(rel)
        if text is None:
            self._files.read_hashes[rel] = sha
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
        # Past the budget, the read ends here: no content returned, none in the context,
        # and no read hash for an edit to be based on.
        self.check_read_budget(call, rel, shown)
        self._files.read_hashes[rel] = sha
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
            with self._files.locked(rel):
                return write_locked(call, rel)

        def write_locked(call: ToolCall, rel: str) -> PatchResult:
            current, _ = self._files.authoritative(rel)
            if mode == "create":
                if current is not None:
                    raise PolicyError(
                        "FILE_EXISTS",
                        f"{rel} already exists; mode='create' only makes new files",
                        required_action="Read it and use mode='truncate' with expected_sha256.",
                    )
                return writing.write(self._files, call, rel, None, content, mode="create")
            self._files.check_lock(rel, current, expected_sha256, "write_file")
            old_text = decode_bytes(current) if current is not None else ""
            if old_text is None:
                raise PolicyError(
                    "BINARY_FILE",
                    f"{rel} is binary; the file tools write text only",
                    recoverable=False,
                    required_action="Leave binary files to other tools.",
                )
            new_text = old_text + content if mode == "append" else content
            return writing.write(self._files, call, rel, current, new_text)

        return self.run_call(
            "write_file",
            {"path": path, "content": content, "mode": mode, "expected_sha256": expected_sha256},
            run,
        )

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
            return writing.apply_one_patch(self._files, call, path, fp, expected_sha256)

        rename_to = fp.new_path if fp is not None and fp.kind == "rename" else None
        return self.run_call(
            "apply_patch",
            {"path": path, "unified_diff": unified_diff, "expected_sha256": expected_sha256},
            run,
            targets=[rename_to] if rename_to else (),
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
            lambda call: writing.patch(
                self._files,
                call,
                self._files.rel_for_doc_path(doc_path),
                original_sha256,
                lambda old: apply_line_edits(old, parsed),
            ),
        )

    def propose_merge(
        self,
        path: str,
        content: str | None = None,
        base_sha256: str | None = None,
        unified_diff: str | None = None,
        *,
        reviewer: MergeReviewer | None = None,
    ) -> MergeProposal:
        """A merge proposal for an edit refused as stale (see :mod:`ctxnb.tools.merging`).

        Args:
            path: the file.
            content: the edited text (what the refused write would have written).
            base_sha256: the hash of the copy the edit was computed from; by default the
                hash this session last read.
            unified_diff: instead of ``content``, the refused patch: the edited text is
                the patch applied to the base.
            reviewer: resolves conflicts (default: :attr:`merge_reviewer`); without one,
                a proposal with conflicts shows them and cannot be written.

        Raises:
            PolicyError: ``MERGE_BASE_UNKNOWN`` when the store does not hold the base;
                ``NOT_STALE`` when the file is still the base; ``INVALID_ARGUMENTS``
                unless exactly one of ``content`` and ``unified_diff`` is given.
            PatchConflict: the patch does not apply to the base it names.
        """
        from . import merge_store, merging

        def run(call: ToolCall) -> MergeProposal:
            sp = call.resolved.get("path") or self.resolve(path)
            rel = sp.rel
            call.paths = [rel]
            if (content is None) == (unified_diff is None):
                raise PolicyError(
                    "INVALID_ARGUMENTS",
                    "propose_merge takes the edit as content or as unified_diff, exactly one",
                    required_action="Pass the refused write's content, or the refused patch "
                    "as unified_diff.",
                )
            base = base_sha256 or self.lock_base(rel, None, "propose_merge")
            ours = content
            if unified_diff is not None:
                files = parse_patch(unified_diff)
                if len(files) != 1 or files[0].kind != "modify":
                    raise PatchError("a merge takes one file's diff that modifies it")
                base_text = decode_bytes(merging.find_base(self._files, rel, base)) or ""
                ours = apply_file_patch(base_text, files[0]) or ""
            assert ours is not None
            proposal = merging.build(self._files, rel, ours, base, reviewer or self.merge_reviewer)
            # Kept on disk too: the human may approve it from a terminal (ctxnb merge).
            merge_store.save_proposal(
                self._files.workspace.root,
                proposal,
                session_id=self.session.session_id,
                intent_id=getattr(self.hooks, "active_intent_id", None),
            )
            self._proposals[proposal.id] = proposal
            return proposal

        args = {"path": path, "content": content, "base_sha256": base_sha256}
        if unified_diff is not None:
            args["unified_diff"] = unified_diff
        return self.run_call("propose_merge", args, run)

    def merge_proposal(self, proposal_id: str) -> MergeProposal:
        """A proposal :meth:`propose_merge` made in this session.

        Raises:
            NotFoundError: no proposal by that id.
        """
        found = self._proposals.get(proposal_id)
        if found is not None:
            return found
        from .merge_store import load_proposal

        try:
            kept = load_proposal(self._files.workspace.root, proposal_id)
        except NotFoundError:
            raise NotFoundError(
                f"no merge proposal {proposal_id!r} in this session; make one with propose_merge"
            ) from None
        if kept.session_id not in (self.session.session_id, self.merge_for):
            # Each session writes only its own merges: another's was never its edit.
            raise NotFoundError(
                f"no merge proposal {proposal_id!r} in this session (it is session "
                f"{kept.session_id}'s); make one with propose_merge"
            )
        self._proposals[proposal_id] = kept.proposal
        return kept.proposal

    def apply_merge(self, proposal_id: str) -> PatchResult:
        """Write a ready merge proposal (a governed write, traced as ``MERGE``).

        In a governed workspace the human approves the diff from the file now to the
        merged text first. The file must still be the proposal's *theirs*: otherwise it
        is ``STALE_FILE`` and nothing is written; a proposal with unresolved conflicts
        is ``MERGE_UNRESOLVED``.
        """
        try:
            proposal: MergeProposal | None = self.merge_proposal(proposal_id)
        except CtxnbError:
            proposal = None  # refused inside the call, where it is audited

        def run(call: ToolCall) -> PatchResult:
            p = self.merge_proposal(proposal_id)
            if p.merged is None:
                raise PolicyError(
                    "MERGE_UNRESOLVED",
                    f"merge proposal {p.id} of {p.path} has {p.conflicts} unresolved "
                    "conflict(s); it is never written",
                    required_action="Read the file again and redo the edit, or ask the user.",
                )
            rel = p.path
            call.paths = [rel]
            call.context["mutation_class"] = "MERGE"
            call.context["merged_from"] = p.merged_from
            with self._files.locked(rel):
                current, _ = self._files.authoritative(rel)
                # The file the human saw the diff against, or nothing is written.
                self._files.check_lock(rel, current, p.theirs_sha256, "apply_merge")
                result = writing.write(self._files, call, rel, current, p.merged)
            self._proposals.pop(p.id, None)
            from .merge_store import discard_proposal

            discard_proposal(self._files.workspace.root, p.id)
            result.message = f"merged {rel} (proposal {p.id}); " + result.message
            return result

        args: dict[str, Any] = {"proposal_id": proposal_id}
        if proposal is not None:
            args["path"] = proposal.path  # governed as the write it is: policy, scope
        return self.run_call("apply_merge", args, run)

    def get_diff(
        self, path: str, version1: str | None = None, version2: str | None = None
    ) -> DiffResult:
        """Diff two stored versions, or the file on disk against its latest stored version."""
        return self.run_call(
            "get_diff",
            {"path": path, "version1": version1, "version2": version2},
            lambda call: lookups.get_diff(self._files, call, path, version1, version2),
        )

    def restore_file(self, path: str, version: str | None = None) -> PatchResult:
        """Put a file back as it was in a stored version (a governed write; see
        :mod:`ctxnb.tools.restore`). ``version`` defaults to the one before the last change."""
        from .restore import restore_file

        return self.run_call(
            "restore_file",
            {"path": path, "version": version},
            lambda call: restore_file(self._files, call, path, version),
        )

    def get_file_history(self, path: str) -> list[VersionInfo]:
        """The stored versions of a file, oldest first."""
        return self.run_call(
            "get_file_history",
            {"path": path},
            lambda call: lookups.get_file_history(self._files, call, path),
        )

    def summarize_file(self, path: str, max_tokens: int | None = None) -> str:
        """An outline of a file (no LLM) within ``max_tokens``."""
        return self.run_call(
            "summarize_file",
            {"path": path, "max_tokens": max_tokens},
            lambda call: lookups.summarize_file(
                self._files,
                call,
                path,
                max_tokens,
                summarizer=self.summarizer,
                default_tokens=self.profile.summary_tokens,
            ),
        )

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
        if limit < 1:
            raise PolicyError(
                "INVALID_ARGUMENTS",
                f"search limit must be at least 1, got {limit}",
                required_action="Pass limit >= 1 (200 by default).",
            )
        start = lookups.SearchCursor.parse(cursor)
        return self.run_call(
            "search",
            {"pattern": pattern, "globs": globs, "regex": regex, "limit": limit, "cursor": cursor},
            lambda call: lookups.search(
                self._files, call, pattern, globs, regex, limit, start, backend=self.search_backend
            ),
        )

    # -- registry, audit, schemas, dispatch -----------------------------------------------------
    def registry(self) -> Any:
        """Every allowed file: path, size, hash, mtime, version, tags, sensitivity (DataFrame)."""
        return lookups.registry(self._files, self.tag_rules)

    def object_id(self, rel: str) -> str:
        return self.workspace.object_id(rel)

    # -- the files' part (see FileSources) ---------------------------------------------------
    @property
    def workspace(self) -> Access:
        """The workspace whose files the tools touch."""
        return self._files.workspace

    @workspace.setter
    def workspace(self, value: Access) -> None:
        self._files.workspace = value

    @property
    def policy(self) -> PathPolicy:
        """The path policy every read and write goes through."""
        return self._files.policy

    @policy.setter
    def policy(self, value: PathPolicy) -> None:
        self._files.policy = value

    @property
    def session(self) -> Session:
        """The session that records every call."""
        return self._files.session

    @session.setter
    def session(self, value: Session) -> None:
        self._files.session = value

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
        return self._files.set_active_copy(doc_path, content, source=source)

    def clear_active_copy(self, doc_path: str) -> None:
        self._files.clear_active_copy(doc_path)

    def active_file_sha256(self, doc_path: str) -> str:
        """SHA-256 of the authoritative copy: the active copy if any, else the file on disk."""
        return self._files.active_file_sha256(doc_path)

    def answer_in_agent_terms(self, name: str, answer: dict[str, Any]) -> dict[str, Any]:
        """A command's answer (its result, refusal or error) when a mount covers the root:
        the command ran at the agent's path (:mod:`ctxnb.sandbox`), so every string of
        the answer names the agent's paths, never the host directory."""
        if name != "run_command" or self.workspace.agent_root() is None:
            return answer
        out: dict[str, Any] = self.workspace.in_agent_terms(answer)
        return out

    def path_as_given(self, given: str, rel: str) -> str:
        """``rel`` as the agent's path when ``given`` came through a mount (see
        :meth:`ToolRunner.path_as_given`)."""
        return self._files.path_as_given(given, rel)

    def resolve(self, path: str | SafePath, *, for_write: bool = False) -> SafePath:
        """The agent's path through the resolver (mount prefixes), the policy, and the
        docPath key: a case or Unicode variant of an existing file's name is that file.
        (The path policy of a governed workspace calls it once per path argument and
        hands the result on in ``call.resolved``.)

        Raises:
            PolicyError: ``PATH_DENIED``; ``AMBIGUOUS_DOC_PATH`` when several files share
                the key (``README.md`` and ``readme.md``) and none is named exactly.
        """
        return self._files.resolve(path, for_write=for_write)

    def resolve_kind(
        self, path: str | SafePath, *, for_write: bool = False
    ) -> tuple[SafePath, PathKind]:
        """:meth:`resolve`, and what the policy's look found there (see
        :meth:`PathPolicy.check_kind <ctxnb.access.fdio.PathPolicy.check_kind>`): one walk
        answers both "which file" and "is it there" for the rest of one call."""
        return self._files.resolve_kind(path, for_write=for_write)

    def locked_all(self) -> contextlib.AbstractContextManager[None]:
        """Hold the write lock of every file at once, with one descriptor: the
        workspace lock, exclusive (a sandbox command's commit, however many files it
        changes). Never call :meth:`_locked` while holding it (the same process would
        wait for itself)."""
        return self._files.locked_all()

    def lock_base(self, rel: str, expected: str | None, tool: str) -> str:
        """The hash an edit of an existing file is based on: the caller's, else the last read.

        Raises:
            PolicyError: ``READ_BEFORE_WRITE`` when there is neither.
        """
        return self._files.lock_base(rel, expected, tool)

    def __repr__(self) -> str:
        gov = " governed" if self.hooks is not None else ""
        return f"<FileTools{gov} session={self.session.session_id!r} caller={self.caller!r}>"
