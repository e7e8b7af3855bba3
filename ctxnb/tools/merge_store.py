"""Merge proposals kept on disk, so that a human can approve one from another process.

A proposal (:mod:`ctxnb.tools.merging`) is made by the session whose edit was refused as
stale; the human who approves it may be at a terminal (``ctxnb merge``), not in that
session's process. Each proposal is one JSON file, ``.ctxnb/merges/<id>.json`` (a folder
no agent tool may touch), mode 0600 (it holds the merged file, secrets included),
written whole or not at all (a temporary file, fsynced, renamed over) and never opened
through a link. It names the session that made it and the intent it was made under;
it is removed once written or rejected, or after :data:`MERGE_TTL` unanswered.

A file that cannot be read as a proposal (cut short, edited by hand, a field of the
wrong type) is refused with one clear error naming the fix (``ctxnb merge reject ID``),
never taken for a proposal: what ``apply_merge`` writes is exactly what was proposed.

Example:
    >>> import tempfile
    >>> from ctxnb.tools.merging import MergeProposal
    >>> root = tempfile.mkdtemp()
    >>> p = MergeProposal("0123456789ab", "a.txt", "b" * 64, "o" * 64, "t" * 64, 0,
    ...                   "merge", "x\\n", merged="x\\n", theirs=b"y\\n")
    >>> save_proposal(root, p, session_id="s", intent_id=None)
    >>> kept = load_proposal(root, "0123456789ab")
    >>> kept.proposal.merged, kept.proposal.theirs, kept.session_id
    ('x\\n', b'y\\n', 's')
    >>> [k.proposal.id for k in list_proposals(root)], discard_proposal(root, p.id)
    (['0123456789ab'], True)
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from .._util.jsoncache import write_json_atomic
from ..errors import NotFoundError, StoreError
from .merging import MergeProposal

__all__ = [
    "MERGE_TTL",
    "KeptProposal",
    "discard_proposal",
    "list_proposals",
    "load_proposal",
    "merges_dir",
    "save_proposal",
]

MERGE_TTL = 7 * 24 * 3600.0
"""Seconds a proposal nobody accepted or rejected is kept (a week): by then the file has
usually moved on, and a stale proposal is refused anyway."""

_ID = re.compile(r"[0-9a-f]{12}")
_MAX = 64 * 1024 * 1024  # a proposal holds one text file twice; more is not one


class KeptProposal(NamedTuple):
    """A proposal as kept on disk, with who made it and under which intent."""

    proposal: MergeProposal
    session_id: str
    intent_id: str | None
    created: float


def merges_dir(root: str | os.PathLike[str]) -> Path:
    """Where the workspace at ``root`` keeps its merge proposals."""
    return Path(root, ".ctxnb", "merges")


def _file(root: str | os.PathLike[str], proposal_id: str) -> Path:
    if not isinstance(proposal_id, str) or not _ID.fullmatch(proposal_id):
        raise NotFoundError(
            f"{proposal_id!r} is not a merge proposal's id (12 hexadecimal digits); "
            "`ctxnb merge list` shows the proposals"
        )
    return merges_dir(root) / f"{proposal_id}.json"


def save_proposal(
    root: str | os.PathLike[str],
    proposal: MergeProposal,
    *,
    session_id: str,
    intent_id: str | None,
) -> None:
    """Keep ``proposal`` (made by ``session_id`` under ``intent_id``) on disk, atomically."""
    path = _file(root, proposal.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "id": proposal.id,
        "path": proposal.path,
        "base_sha256": proposal.base_sha256,
        "ours_sha256": proposal.ours_sha256,
        "theirs_sha256": proposal.theirs_sha256,
        "conflicts": proposal.conflicts,
        "resolved_by": proposal.resolved_by,
        "shown": proposal.shown,
        "review_refused": proposal.review_refused,
        "merged": proposal.merged,
        "theirs": base64.b64encode(proposal.theirs).decode("ascii"),
        "session_id": session_id,
        "intent_id": intent_id,
        "created": time.time(),
    }
    write_json_atomic(path, record, private=True)


_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "path": (str,),
    "base_sha256": (str,),
    "ours_sha256": (str,),
    "theirs_sha256": (str,),
    "conflicts": (int,),
    "resolved_by": (str, type(None)),
    "shown": (str,),
    "review_refused": (str, type(None)),
    "merged": (str, type(None)),
    "theirs": (str,),
    "session_id": (str,),
    "intent_id": (str, type(None)),
    "created": (int, float),
}


def load_proposal(root: str | os.PathLike[str], proposal_id: str) -> KeptProposal:
    """The proposal ``proposal_id`` kept in the workspace at ``root``.

    Raises:
        NotFoundError: not an id, or no such proposal (written, rejected, never made).
        StoreError: the file is not a whole proposal (damaged): nothing is taken from it.
    """
    path = _file(root, proposal_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(
            f"no merge proposal {proposal_id} in {root}: it was written, rejected or never "
            "made; `ctxnb merge list` shows the proposals"
        ) from None
    except OSError as e:
        raise StoreError(
            f"the merge proposal {path} cannot be opened ({e.strerror}); it must be a plain "
            f"file. Run `ctxnb merge reject {proposal_id}` and ask for a new proposal"
        ) from None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(_MAX + 1)
    kept = _parse(raw, proposal_id, path)
    if time.time() - kept.created > MERGE_TTL:
        discard_proposal(root, proposal_id)
        raise NotFoundError(
            f"the merge proposal {proposal_id} expired ({MERGE_TTL / 86400:.0f} days) and was "
            "removed; ask for a new proposal"
        )
    return kept


def _parse(raw: bytes, proposal_id: str, path: Path) -> KeptProposal:
    data: Any = None
    try:
        data = json.loads(raw) if len(raw) <= _MAX else None
        fields = {k: data[k] for k in _TYPES}
        theirs = base64.b64decode(fields.pop("theirs"), validate=True)
    except (ValueError, TypeError, KeyError):
        fields = None
    if (
        fields is None
        or any(not isinstance(v, _TYPES[k]) or isinstance(v, bool) for k, v in fields.items())
        or fields["id"] != proposal_id
    ):
        raise StoreError(
            f"the merge proposal {path} is damaged (not a whole proposal); nothing was "
            f"written. Run `ctxnb merge reject {proposal_id}` and ask for a new proposal"
        )
    session_id = fields.pop("session_id")
    intent_id = fields.pop("intent_id")
    created = float(fields.pop("created"))
    return KeptProposal(MergeProposal(**fields, theirs=theirs), session_id, intent_id, created)


def list_proposals(
    root: str | os.PathLike[str], *, damaged: list[str] | None = None
) -> list[KeptProposal]:
    """Every whole proposal kept in the workspace at ``root``, oldest first; a damaged
    one is left out, its error appended to ``damaged`` when given."""
    out: list[KeptProposal] = []
    try:
        names = sorted(p.name for p in merges_dir(root).iterdir())
    except OSError:
        return out
    for name in names:
        pid = name.removesuffix(".json")
        if not name.endswith(".json") or not _ID.fullmatch(pid):
            continue
        try:
            out.append(load_proposal(root, pid))
        except NotFoundError:
            continue  # written or rejected meanwhile
        except StoreError as e:
            if damaged is not None:
                damaged.append(str(e))
    return sorted(out, key=lambda k: k.created)


def discard_proposal(root: str | os.PathLike[str], proposal_id: str) -> bool:
    """Remove the proposal ``proposal_id``; False when there was none."""
    try:
        os.unlink(_file(root, proposal_id))
    except FileNotFoundError:
        return False
    return True
