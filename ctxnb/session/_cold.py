"""A resume written down for the next process: a fresh process resumes from one file.

A resume that found every file of a session as the store holds it leaves behind, in
``.ctxnb/sessions/<digest>.cold.json``, what it derived from the store: the session
document, its chat turns and system prompt, the light file columns of the session's files
(paths, hashes, types, sizes: what :mod:`ctxnb.session._columns` reads from Parquet), the
stat-cache entry each file was found unchanged by, and the orphaned ids. The next resume
in a new process (:meth:`~ctxnb.session._resume.SessionResume.resume_cold`) reads that
file, ``lstat``\\s the session's files through the workspace's path policy and, if every
one is as recorded, fills the session from it without opening the store: no pyarrow,
numpy, pandas or pydantic, no Parquet read. File contents are never in it: a file the
prompt shows is read from the store, as of the recorded transaction, when first asked for.

What it trusts, and why:

- **Nothing about paths.** Every path is judged again by the path policy of this process
  (``stat_many``), as the full resume does: a path the rules refuse now, one behind a
  link, one gone or changed sends the resume down the full path, which orphans or
  re-reads it. A forged file cannot admit a path the rules would refuse.
- **The store's tip.** It is kept with the last committed transaction (id and time) read
  from the store's log without opening it (:func:`ctxnb.store._tip.read_tip`); any
  commit since, by any process, moves the tip and the full path runs (and writes a new
  one when it finds nothing changed). A log the tip reader cannot vouch for is a miss.
- **Its seal** (:mod:`ctxnb._util.seal`): it is believed only when it is reached
  without following a link, is a regular file of this user that no one else can write,
  and carries an HMAC-SHA256 under the workspace's secret (``.ctxnb/judgments.key``,
  0600), which also covers the key file's identity: a file forged without the secret
  (a right SHA-256 is not enough), and a ``.ctxnb/`` copied from another workspace, are
  misses. Then a strict check of every field's type and length; damage of any kind is a
  miss, never an error and never trusted in part.
- **Its key**: the format, the SHA-256 of the modules whose code decides what it holds
  (:func:`code_key`: an edited or upgraded ctxnb resumes in full), the session id, the
  workspace's root, its filesystem id, and a hash of the settings and mounts. Any
  difference is a miss.
- **ctxnb's own directory.** The file says "the store held these documents at this tip
  and these stats were seen with these hashes", as ``statcache.json`` and the resume
  block do; it lives in ``.ctxnb/``, which the path policy denies to agents and no
  sandbox makes writable, so no agent can write it or read the secret. A process of the
  user outside ctxnb can, as it can rewrite the store's log beside it.

A miss costs one small read: the resume runs the full path (:meth:`SessionResume.restore`
and :meth:`~SessionResume.reconcile`) as if the file were not there, and removes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat as stat_mod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util import seal
from .._util.jsoncache import loads_paused

if TYPE_CHECKING:
    from ..access.door import Access

__all__ = [
    "LIGHT_COLUMNS",
    "ColdState",
    "code_key",
    "cold_path",
    "current_tip",
    "drop",
    "is_current",
    "load",
    "read_sealed",
    "rules_walk_path",
    "save",
    "session_digest",
    "unchanged",
    "workspace_key",
    "write_sealed",
]

_FORMAT = 2  # 2: sealed by the workspace's secret, keyed by the code's hash
# Larger than any session's file (a hostile file is not read whole).
_BYTES_MAX = 1 << 28

#: The light columns of a stored file: all a resume needs of a file it does not show.
LIGHT_COLUMNS = (
    "xt_id",
    "source_type",
    "source_filesystem_id",
    "source_path",
    "identity_hash",
    "file_type",
    "char_count",
    "source_hash",
    "content_hash",
)
_INT_COLUMNS = frozenset({"char_count"})
_STR_OR_NONE = frozenset({str, type(None)})
_INT_OR_NONE = frozenset({int, type(None)})


def session_digest(session_id: str) -> str:
    """The name a session's files under ``.ctxnb/sessions`` take (its id may be any text)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def cold_path(root: str | os.PathLike[str], session_id: str) -> Path:
    """Where the cold-resume file of ``session_id`` lives."""
    return Path(root) / ".ctxnb" / "sessions" / f"{session_digest(session_id)}.cold.json"


@dataclass(frozen=True)
class ColdState:
    """What a resume derived from the store, for a session whose files were unchanged.

    Attributes:
        session: the stored session document at the tip.
        turns: the chat's turns; ``toolcall_refs`` its tool-call ids.
        system_prompt: the system prompt's text.
        columns: :data:`LIGHT_COLUMNS`, each a list aligned with the session index
            (None on rows that are not stored files; ``xt_id`` is not written, as it
            is the session index's id on every stored file's row).
        found: per row, whether it is a stored file.
        stats: per row, ``[size, mtime_ns, ctime_ns, ino, source_hash]`` the file was
            found unchanged by (a clean stat-cache record), or None.
        orphaned: the ids that were orphaned (out of reach, or stored without a path).
        tip: the store's last transaction, ``[id, time in µs]``.
    """

    session: dict[str, Any]
    turns: list[Any]
    toolcall_refs: list[Any]
    system_prompt: str
    columns: dict[str, list[Any]]
    found: list[bool]
    stats: list[list[Any] | None]
    orphaned: list[str]
    tip: tuple[int, int]


def _key(ws: Access) -> dict[str, Any]:
    """What the derived state depends on besides the store and the disk."""
    res = ws.resolver
    settings = repr((ws.config, res.mounts, res.default_filesystem_id()))
    return {
        "format": _FORMAT,
        "root": str(ws.root),
        "filesystem_id": res.filesystem_of(str(ws.root)),
        "settings": hashlib.sha256(settings.encode("utf-8", "surrogatepass")).hexdigest(),
    }


def _file_key(ws: Access, session_id: str, tip: tuple[int, int]) -> dict[str, Any]:
    return {**_key(ws), "code": code_key(), "session_id": session_id, "tip": list(tip)}


def current_tip(ws: Access) -> tuple[int, int] | None:
    """The store's last transaction (id, time in µs) from its log, or None when the log
    alone cannot tell (no store, damage, another format)."""
    from ..store._tip import read_tip

    tip = read_tip(ws.store_dir)
    return None if tip is None else (tip.tx_id, tip.tx_time)


# What this process wrote last, by file: the tip it was for and the file's identity
# after the write (so that a process resuming again and again writes it once per tip).
_WRITTEN: dict[str, tuple[tuple[int, int], tuple[int, int, int]]] = {}


def is_current(ws: Access, session_id: str, tip: tuple[int, int]) -> bool:
    """Whether this process wrote the file for ``tip`` and it is still that file."""
    path = cold_path(ws.root, session_id)
    done = _WRITTEN.get(str(path))
    if done is None or done[0] != tip:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return done[1] == (st.st_ino, st.st_size, st.st_mtime_ns)


def save(ws: Access, session_id: str, state: ColdState) -> bool:
    """Write ``state`` for the next process (temp file, fsync, rename). False when the
    store's log does not show ``state.tip`` as its tip (something was committed since)
    or the file cannot be written; nothing is written then."""
    if current_tip(ws) != state.tip:
        return False
    path = cold_path(ws.root, session_id)
    ok = write_sealed(
        path,
        {
            "key": _file_key(ws, session_id, state.tip),
            "session": state.session,
            "turns": state.turns,
            "toolcall_refs": state.toolcall_refs,
            "system_prompt": state.system_prompt,
            "columns": {k: v for k, v in state.columns.items() if k != "xt_id"},
            "found": state.found,
            "stats": state.stats,
            "orphaned": state.orphaned,
        },
    )
    if ok:
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            _WRITTEN[str(path)] = (state.tip, (st.st_ino, st.st_size, st.st_mtime_ns))
    return ok


def _where(path: Path) -> tuple[Path, str]:
    """The workspace's ``.ctxnb`` and ``path``'s name below it (``sessions/<name>``)."""
    return path.parent.parent, f"{path.parent.name}/{path.name}"


def write_sealed(path: Path, value: Any) -> bool:
    """Write ``value`` as JSON at ``path`` (a file of ``.ctxnb/sessions``), sealed by
    the workspace's secret (:mod:`ctxnb._util.seal`: temp file, fsync, rename; a reader
    sees the whole old file or the whole new one). False when it cannot."""
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    state, name = _where(path)
    try:
        seal.write(state, name, body.encode("utf-8", "surrogatepass"))
    except (OSError, ValueError):
        return False
    return True


def read_sealed(path: Path) -> Any:
    """What :func:`write_sealed` wrote at ``path``, or None: missing, behind a link, not
    a file of this user that only it can write, too large, not sealed by this
    workspace's secret (forged, damaged, or copied from another workspace), not JSON."""
    state, name = _where(path)
    body = seal.read(state, name, limit=_BYTES_MAX)
    if body is None:
        return None
    try:
        # JSON makes no cycles: the collector's passes over tens of thousands of parsed
        # strings would cost about as much as the parse itself.
        return loads_paused(body)
    except (ValueError, RecursionError):
        return None


def code_key() -> list[str]:
    """The SHA-256 of the modules whose code decides what a cold-resume file holds and
    how it is read: an edited or upgraded ctxnb does not use an older one's file."""
    # By path: the state and columns modules load the store's libraries, which a cold
    # resume does without.
    here = os.path.dirname(__file__)
    names = ("_cold.py", "_columns.py", "_resume.py", "state.py")
    return seal.code_key(os.path.join(here, n) for n in names)


def workspace_key(ws: Access) -> str:
    """A digest of what state derived from a workspace's tree depends on besides the
    tree: the format, the root, its filesystem, settings and mounts (the code that
    derives such state adds its own hash: :func:`code_key`)."""
    text = json.dumps(_key(ws), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def rules_walk_path(root: str | os.PathLike[str]) -> Path:
    """Where the last rules-file walk of a workspace is kept for the next process."""
    return Path(root) / ".ctxnb" / "sessions" / "rules-walk.json"


def drop(root: str | os.PathLike[str], session_id: str) -> None:
    """Remove the cold-resume file of ``session_id`` (it no longer describes the disk)."""
    with contextlib.suppress(OSError):
        os.unlink(cold_path(root, session_id))


def load(ws: Access, session_id: str) -> ColdState | None:
    """The cold-resume file of ``session_id`` if it is whole, of this key and of the
    store's current tip; else None (and a damaged or stale file is removed)."""
    path = cold_path(ws.root, session_id)
    if not os.path.lexists(path):
        return None
    state = _parse(ws, session_id, read_sealed(path))
    if state is None:
        drop(ws.root, session_id)
    return state


def _parse(ws: Access, session_id: str, doc: Any) -> ColdState | None:
    if not isinstance(doc, dict):
        return None
    tip = current_tip(ws)
    key = doc.get("key")
    if tip is None or key != _file_key(ws, session_id, tip):
        return None
    sdoc, cols = doc.get("session"), doc.get("columns")
    found, stats = doc.get("found"), doc.get("stats")
    if not (isinstance(sdoc, dict) and sdoc.get("xt/id") == session_id):
        return None
    if sdoc.get("type") != "session":
        return None
    index = sdoc.get("session_index") or []
    if not (isinstance(index, list) and all(type(x) is str for x in index)):
        return None
    n = len(index)
    # The ids are the session index's: a stored file's row names that file.
    if not (isinstance(cols, dict) and set(cols) == set(LIGHT_COLUMNS) - {"xt_id"}):
        return None
    for name, col in cols.items():
        allowed = _INT_OR_NONE if name in _INT_COLUMNS else _STR_OR_NONE
        if not (isinstance(col, list) and len(col) == n and set(map(type, col)) <= allowed):
            return None
    if not (isinstance(found, list) and len(found) == n and set(map(type, found)) <= {bool}):
        return None
    cols["xt_id"] = [oid if f else None for oid, f in zip(index, found, strict=True)]
    # Each entry's fields are compared with a stat's ints (unchanged): a value of
    # another type is a difference there, so only the shape is checked here.
    if not (isinstance(stats, list) and len(stats) == n):
        return None
    if not set(map(type, stats)) <= {list, type(None)} or any(s and len(s) != 5 for s in stats):
        return None
    turns, refs, prompt = doc.get("turns"), doc.get("toolcall_refs"), doc.get("system_prompt")
    orphaned = doc.get("orphaned")
    if not (isinstance(turns, list) and all(isinstance(t, dict) for t in turns)):
        return None
    if not (isinstance(refs, list) and isinstance(prompt, str) and isinstance(orphaned, list)):
        return None
    if not set(orphaned) <= set(index) or not all(type(o) is str for o in orphaned):
        return None
    return ColdState(sdoc, turns, refs, prompt, cols, found, stats, orphaned, tip)


def unchanged(state: ColdState, rows: list[int], stats: Sequence[object]) -> bool:
    """Whether every file of ``rows`` is as ``state`` recorded it, by its new ``stats``
    (from ``stat_many``; in the order of ``rows``): the same regular file with the same
    size, times and inode, recorded with the stored version's hash; or, for a file whose
    latest version records its deletion, still nothing there (or a directory)."""
    hashes, sr = state.columns["source_hash"], os.stat_result
    for k, i in enumerate(rows):
        st, e, h = stats[k], state.stats[i], hashes[i]
        if type(st) is not sr:
            from ..errors import NotFoundError

            if not (h is None and type(st) is NotFoundError):
                return False
            continue
        if h is None:
            if not stat_mod.S_ISDIR(st.st_mode):
                return False
            continue
        if e is None or e[4] != h or not stat_mod.S_ISREG(st.st_mode):
            return False
        if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != (e[0], e[1], e[2], e[3]):
            return False
    return True
