"""Undo from the store: put a file back as it was in one of its stored versions.

Any agent change — by a file tool or by a command (whose effects are stored too, see
:mod:`ctxnb.sandbox.commit`) — has the previous bytes in the store, so it can be taken
back. :meth:`ctxnb.tools.FileTools.restore_file` is the governed tool (a write: intent,
scope, trace record); ``ctxnb restore PATH [--version ID]`` is the same for a human.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.txt").write_text("one\\n")
    >>> ws = Workspace.open(root)
    >>> tools = ws.tools(ws.session("s"), caller="docs")
    >>> r = tools.read_file("a.txt")
    >>> _ = tools.write_file("a.txt", "two\\n", expected_sha256=r.sha256)
    >>> tools.restore_file("a.txt").success, (root / "a.txt").read_text()
    (True, 'one\\n')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, PolicyError
from ..hashing import source_hash
from ..indexer import is_deleted
from . import writing
from .results import PatchResult

if TYPE_CHECKING:
    from ..store.objectstore import ObjectStore, Version
    from ._filesources import FileSources
    from .call import ToolCall

__all__ = ["pick_version", "restore_file", "version_bytes"]


def pick_version(store: ObjectStore, oid: str, rel: str, version: str | None) -> Version:
    """The stored version to restore: ``version`` (``<id>@<tx>``, the id possibly
    shortened to a prefix, or a tx id), or by default the one before the latest (the
    state before the last change).

    Raises:
        NotFoundError: no such version, or nothing to go back to.
    """
    history = store.history(oid)
    if not history:
        raise NotFoundError(f"{rel} has no stored versions, so there is nothing to restore")
    if version is None:
        if len(history) < 2:
            raise NotFoundError(
                f"{rel} has one stored version only: there is no earlier state to go back to"
            )
        return history[-2]
    tx_text = version.rsplit("@", 1)[-1]
    # The id part may be shortened, as `ctxnb history` prints it; the file fixes the object.
    id_part = version.rsplit("@", 1)[0] if "@" in version else oid
    if not id_part or not oid.startswith(id_part):
        raise NotFoundError(f"version {version!r} belongs to another object than {rel}")
    try:
        tx = int(tx_text)
    except ValueError:
        raise PolicyError(
            "INVALID_ARGUMENTS",
            f"bad version id {version!r}; use one from get_file_history (`<id>@<tx>`)",
            required_action="Call get_file_history and pass one of its version_id values.",
        ) from None
    for v in history:
        if v.tx_id == tx:
            return v
    known = ", ".join(str(v.tx_id) for v in history)
    raise NotFoundError(f"{rel} has no version at transaction {tx}; its versions: {known}")


def version_bytes(doc: dict[str, Any], rel: str) -> bytes | None:
    """The exact bytes of a stored version; None for a deletion version.

    Raises:
        PolicyError: ``BINARY_VERSION`` when the store kept no text for it.
    """
    if is_deleted(doc):
        return None
    content = doc.get("content")
    data = content.encode("utf-8") if isinstance(content, str) else None
    if data is None or (doc.get("source_hash") not in (None, source_hash(data))):
        raise PolicyError(
            "BINARY_VERSION",
            f"the chosen version of {rel} is binary; the store keeps its hash, not its bytes",
            recoverable=False,
            required_action="Restore a binary file from version control instead.",
        )
    return data


def restore_file(files: FileSources, call: ToolCall, path: str, version: str | None) -> PatchResult:
    """Write the chosen version of ``path`` back (or remove the file for a deletion version).

    Runs inside ``FileTools.run_call``: the hook engine has already checked the intent and the
    scope; the write goes through the path policy, under the file's lock, and is stored
    and traced like any write.
    """
    sp = files.resolve(path, for_write=True)
    rel = sp.rel
    call.paths = [rel]
    oid = files.workspace.object_id(rel)
    chosen = pick_version(files.session.store, oid, rel, version)
    data = version_bytes(chosen.doc, rel)
    with files.locked(rel):
        try:
            current: bytes | None = files.policy.read_bytes(rel)
        except NotFoundError:
            current = None
        if data is None:
            if current is None:
                return PatchResult(
                    success=True, message=f"{rel} is already absent", path=rel, version_id=None
                )
            from ..indexer import decode_bytes

            call.old_text = decode_bytes(current) or ""
            call.new_text = ""
            vid = writing.delete_stored_first(files, rel)
            return PatchResult(
                success=True,
                message=f"removed {rel} (restored version {chosen.version_id}: deleted)",
                path=rel,
                version_id=vid,
            )
        text = data.decode("utf-8")
        result = writing.write(files, call, rel, current, text)
    result.message = f"restored {rel} to version {chosen.version_id} ({len(data)} bytes)"
    return result
