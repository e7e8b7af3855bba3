"""The write internals of the file tools: one file written, patched, renamed or deleted.

:class:`~ctxnb.tools.filetools.FileTools`' mutating tools (``write_file``,
``apply_patch``, ``write_patch``, ``restore_file``) run these inside their tool call,
under the file's lock: the base hash is checked against the authoritative copy, a
conflict writes nothing, the bytes go through the path policy's atomic write, and the
new version is stored before the result (with its redacted diff) is returned. They are
given the tools' :class:`~ctxnb.tools._filesources.FileSources` (the copies, the locks,
the policy), not the tools themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ..errors import (
    CtxnbError,
    NotFoundError,
    PatchConflict,
    PatchError,
    PolicyError,
    StaleFileError,
    StoreError,
)
from ..hashing import sha256_hex
from ..indexer import decode_bytes
from ..redaction.redactor import MARK as REDACTION_MARK
from ..redaction.redactor import line_redactor, redact, redact_text
from ..resolver import doc_path as make_doc_path
from .call import ToolCall
from .patching import FilePatch, apply_file_patch, unified_diff
from .results import PatchResult

if TYPE_CHECKING:
    from ._filesources import FileSources

__all__ = ["apply_one_patch", "delete_file", "delete_stored_first", "patch", "write"]


def write(
    files: FileSources,
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
    attach = call.attach
    stored: list[tuple[str, str | None]] = []

    def commit() -> None:
        # The store version and its trace record are made durable before the rename:
        # a write the store cannot keep leaves the file as it was (docs/store-format.md).
        call.context.pop("_log_durable", None)
        stored.append(files.index_bytes(rel, data, call))
        durable = call.context.get("_log_durable")
        if durable is not None:
            durable()  # raises StoreError if the log's fsync failed: nothing is renamed

    try:
        # The rename's directory fsync overlaps with the recording of the call; the
        # call waits for it before it returns (see _run).
        files.policy.write_bytes_atomic(
            rel,
            data,
            mode="create" if mode == "create" else "truncate",
            make_parents=old is None,
            durable_waits=call.durable_waits,
            # An active (unsaved) copy is not what is on disk: only its identity
            # could be checked, so the check is left to the next read.
            check_replaced=rel not in files.active,
            expected_sha256=call.before_sha256,
            # The trace record to commit with the store version is made from the texts
            # alone: prepared while the new data is fsynced (dropped if the write fails).
            while_syncing=(lambda: attach(files.object_id(rel))) if attach else None,
            before_replace=commit,
        )
    except StaleFileError as exc:
        # Another program saved the file during this write: its version is kept on
        # disk, and in the store (after this edit's, if that was committed already),
        # and the edit is refused as stale.
        if exc.outside is not None:
            files.index_bytes(rel, exc.outside)
        raise
    except FileExistsError:
        raise PolicyError(
            "FILE_EXISTS",
            f"{rel} already exists; mode='create' only makes new files",
            required_action="Read it and use mode='truncate' with expected_sha256.",
        ) from None
    except (OSError, StoreError) as exc:
        if stored:
            # Committed (or its durability unknown), then not renamed: the store's
            # latest version must be the file's, so what is on disk is observed again.
            _observe_again(files, rel)
        if isinstance(exc, StoreError):
            raise
        # A full disk is no internal error: the agent is told, and nothing changed.
        raise PolicyError(
            "WRITE_FAILED",
            f"cannot write {rel}: {exc.strerror or exc}; the file was left as it was",
            required_action="Free space on the disk (or fix the error named) and retry.",
            details={"path": rel},
        ) from exc
    call.after_sha256 = sha256_hex(data)
    files.read_hashes[rel] = call.after_sha256
    if rel in files.active:
        files.active[rel] = new_text
        files.show_active_copy(rel, new_text)
    oid, version = stored[0]
    files.session.activate(oid)
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


def patch(
    files: FileSources,
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
    sp = files.resolve(rel, for_write=True)
    rel = sp.rel
    call.paths = [rel] if move_to is None else [move_to, rel]
    with files.locked(rel):
        current, _ = files.authoritative(rel)
        if current is None:
            raise NotFoundError(f"{rel} does not exist; create it with write_file")
        files.check_lock(rel, current, expected, call.tool)
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
            return delete_file(files, call, rel, current, old_text)
        if move_to is None:
            return write(files, call, rel, current, new_text)
        result = write(files, call, move_to, None, new_text, mode="create")
        delete_file(files, call, rel, current, old_text)
        call.new_text = new_text  # the trace records the new file against the old text
        call.after_sha256 = result.sha256
        result.message = f"renamed {rel} to {move_to}; " + result.message
        return result


def apply_one_patch(
    files: FileSources, call: ToolCall, path: str, fp: FilePatch, expected: str | None
) -> PatchResult:
    rel = files.resolve(path, for_write=True).rel
    named = fp.new_path if fp.kind == "create" else fp.old_path
    if named is not None and fp.kind != "modify" and make_doc_path(named) != make_doc_path(rel):
        raise PatchError(
            f"the diff {'creates' if fp.kind == 'create' else fp.kind + 's'} {named!r} "
            f"but path is {rel!r}; pass path={named!r}"
        )
    if fp.kind == "modify":
        return patch(files, call, rel, expected, lambda old: _patched(old, fp))
    if fp.kind == "create":
        call.paths = [rel]
        with files.locked(rel):
            current, _ = files.authoritative(rel)
            if current is not None:
                return _conflict(rel, current, f"the diff creates {rel}, which exists")
            return write(files, call, rel, None, _patched("", fp), mode="create")
    if fp.kind == "delete":
        return patch(files, call, rel, expected, lambda old: _patched(old, fp), delete=True)
    dest = files.resolve(fp.new_path or "", for_write=True).rel
    with files.locked(dest):
        if files.authoritative(dest)[0] is not None:
            return _conflict(rel, None, f"the rename target {dest} exists")
        result = patch(files, call, rel, expected, lambda old: _patched(old, fp), move_to=dest)
    return result


def delete_file(
    files: FileSources, call: ToolCall, rel: str, old: bytes, old_text: str
) -> PatchResult:
    """Delete a file: a deletion version in the store, a trace of what was removed."""
    call.old_text, call.new_text = old_text, ""
    call.before_sha256 = sha256_hex(old)
    _refuse_tool_ctxnb(rel, old, None)
    version = delete_stored_first(files, rel)
    files.read_hashes.pop(rel, None)
    files.active.pop(rel, None)
    diff = redact(unified_diff(old_text, "", fromfile=f"a/{rel}", tofile="/dev/null")).text
    return PatchResult(
        success=True,
        message=f"deleted {rel} ({len(old)} bytes)",
        path=rel,
        diff=diff,
        version_id=version,
    )


def delete_stored_first(files: FileSources, rel: str) -> str | None:
    """Delete ``rel`` once its deletion version is durable; returns that version's id.

    A deletion the store cannot keep leaves the file in place (and the error raised).
    """
    stored: list[tuple[str, str | None]] = []
    try:
        files.policy.delete(rel, before_unlink=lambda: stored.append(files.index_bytes(rel, None)))
    except (OSError, CtxnbError):
        if stored:
            _observe_again(files, rel)  # committed, then not removed: the file is stored again
        raise
    return stored[0][1]


def _observe_again(files: FileSources, rel: str) -> None:
    """Store what is on disk now (a version committed for bytes never renamed there
    is followed by the file's own); best effort on a failing disk."""
    try:
        try:
            current: bytes | None = files.policy.read_bytes(rel)
        except NotFoundError:
            current = None
        files.index_bytes(rel, current)
    except (OSError, CtxnbError):
        pass  # the next read or index of the file observes it


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
