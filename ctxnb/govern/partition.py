"""Write partitioning: two live sessions never hold intents whose scopes overlap.

Many agents may work on one tree as long as each writes its own files. A session that
selects an intent takes a *lease* on its scope; selecting an intent whose scope overlaps
the scope leased by another live session is refused (``SCOPE_OVERLAP``, or asked when
``[governance] overlap = "ask"``), naming both intents and both sessions.

- **Live session.** A lease is a JSON file per session under ``.ctxnb/leases/`` (a
  folder no agent tool may touch): the session, its intent, its scope, its supervisors
  (a worker's) and when it was last refreshed. Every governed call refreshes
  it; closing the session releases it, and so does collecting a session dropped
  without closing it (:func:`release_own_lease`). A lease dies with the process that holds it:
  a lease whose process is gone (killed, crashed; a pid now used by another process
  or a zombie counts as gone) no longer counts. A lease not bound to one process (a
  Claude Code session's, taken by its short-lived hook processes) and one whose
  process ctxnb cannot see (another pid namespace or machine) lives until it is not
  refreshed for ``[governance] lease_minutes`` (30 by default), or until its session
  says it ended (Claude Code's ``SessionEnd``: :func:`release_session_lease`).
- **One at a time.** Checking the live leases and writing one's own happen under an
  exclusive lock (``.ctxnb/leases/.lock``), so two sessions that select overlapping
  intents at the same moment cannot both pass the check.
- **Overlap.** Decided on the globs first, conservatively: two globs may overlap unless
  their literal leading directories diverge (``src/a/**`` and ``src/b/**`` cannot; a
  glob without ``/`` matches at any depth and may overlap anything). Globs that may
  overlap are then confirmed on the indexed files and the files on disk (the index may
  lag the tree): they overlap when one file matches both. Globs that could overlap but
  share no existing file are not an overlap, unless ``[governance] overlap_strict =
  true``. A session selects again and again on a tree that mostly did not change: the
  directory listings of the walk are kept while each directory is unchanged (its inode
  and timestamps, :func:`_listing`), and the match results while the files they came
  from are exactly the same.
- **Subset.** A worker's scope (:meth:`ctxnb.session.Session.spawn_worker`) must lie
  inside its supervisor's: each worker glob must be provably contained in a supervisor
  glob (:func:`glob_contains`: exact for the usual shapes, ``*.py`` ⊇ ``src/*.py``,
  refused when it cannot tell), and every indexed file the worker's globs match must be
  in the supervisor's scope.

This module imports nothing heavy: the Claude Code hooks use it.

Example:
    >>> globs_may_overlap("src/a/**", "src/b/**"), globs_may_overlap("src/**", "*.py")
    (False, True)
    >>> print(scope_overlap(["src/**"], ["*.md"], ["src/app.py", "docs/x.md"]))
    None
    >>> scope_overlap(["src/**"], ["*.md"], ["src/app.py", "docs/x.md"], strict=True)
    []
    >>> scope_overlap(["src/**"], ["*.py"], ["src/app.py", "docs/x.md"])
    ['src/app.py']
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..errors import PolicyError, StoreError
from ..hashing import sha256_hex
from .core import files_in_scope, in_scope

if TYPE_CHECKING:
    from ..access.door import Access
    from ..store.objectstore import ObjectStore

__all__ = [
    "DEFAULT_LEASE_MINUTES",
    "Lease",
    "check_partition",
    "check_subset",
    "glob_contains",
    "globs_may_overlap",
    "holder_alive",
    "indexed_files",
    "indexed_files_at",
    "lease_age",
    "lease_lock",
    "live_leases",
    "release_lease",
    "release_own_lease",
    "release_session_lease",
    "scope_overlap",
    "tree_files",
    "write_lease",
]

DEFAULT_LEASE_MINUTES = 30.0
"""Minutes a lease stays live without activity."""

_LEASES = (".ctxnb", "leases")
_WILD = re.compile(r"[*?\[\\]")


class Lease(NamedTuple):
    """One session's hold on the scope of its intent (a named tuple: the Claude Code
    hook refreshes leases on its tool calls and does not load dataclasses)."""

    session_id: str
    intent_id: str
    scope: list[str]
    refreshed: float  # seconds since the epoch
    parent: str | None = None  # the supervisor's session, for a worker
    pid: int | None = None
    # The holding process, told apart from a later one with the same pid: its start
    # time (clock ticks after boot) and where its pid means something (boot, pid ns).
    started: int | None = None
    where: str | None = None
    # Whether the lease dies with its process (False: a Claude Code session's, whose
    # hook processes end after each call while the session goes on).
    bound: bool = True
    # A worker's chain of supervisors, the first one first (its parent is the last):
    # a worker of a worker conflicts with none of them, nor they with it.
    supervisors: Sequence[str] = ()


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time from /proc; None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _here() -> str | None:
    """Where this process's pids mean something: the boot and the pid namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def holder_alive(lease: Lease) -> bool | None:
    """Whether the process holding ``lease`` still runs; None when ctxnb cannot tell
    (an unbound lease, another pid namespace or boot, no /proc): then only its age counts.

    Example:
        >>> print(holder_alive(Lease("cc-1", "INT-1", ["src/**"], 0.0, pid=1, bound=False)))
        None
    """
    if not lease.bound or lease.pid is None or lease.started is None:
        return None
    here = _here()
    if here is None or lease.where != here:
        return None
    stat = _proc_stat(lease.pid)
    if stat is None:
        return False  # no such process: it ended
    state, started = stat
    # A zombie has ended (killed, not yet reaped); a different start time is another
    # process that got the same pid.
    return state not in ("Z", "X") and started == lease.started


def _holder() -> tuple[int, int | None, str | None]:
    pid = os.getpid()
    stat = _proc_stat(pid)
    return pid, None if stat is None else stat[1], _here()


@contextlib.contextmanager
def lease_lock(root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the workspace's lease lock: check the leases and write one's own inside it."""
    folder = Path(root).joinpath(*_LEASES)
    folder.mkdir(parents=True, exist_ok=True)
    # Never through a link: a lock file swapped for one would be opened (and created)
    # wherever it points.
    try:
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        # Without the lock two sessions could both pass the overlap check: stop.
        raise StoreError(
            f"the lease lock {folder / '.lock'} cannot be opened ({e.strerror}); it must be a "
            "plain file. Remove it (ctxnb makes it again) and retry"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lease_file(root: Path, session_id: str) -> Path:
    # Any session id names exactly one file, and none can name a path elsewhere.
    return root.joinpath(*_LEASES, sha256_hex(session_id.encode("utf-8"))[:32] + ".json")


def write_lease(
    root: str | os.PathLike[str],
    session_id: str,
    intent_id: str,
    scope: Sequence[str],
    *,
    supervisors: Sequence[str] = (),
    now: float | None = None,
    bound: bool = True,
) -> Lease:
    """Take or refresh ``session_id``'s lease (written atomically), held by this process
    (``bound``: it dies with this process) or by the session alone (``bound=False``)."""
    lease = Lease(
        session_id,
        intent_id,
        list(scope),
        time.time() if now is None else now,
        supervisors[-1] if supervisors else None,
        *_holder(),
        bound,
        list(supervisors),
    )
    path = _lease_file(Path(root), session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(lease._asdict()), encoding="utf-8")
    os.replace(tmp, path)
    return lease


def release_lease(root: str | os.PathLike[str], session_id: str) -> bool:
    """Release ``session_id``'s lease; False when it held none."""
    try:
        os.unlink(_lease_file(Path(root), session_id))
    except FileNotFoundError:
        return False
    return True


def release_own_lease(root: str, session_id: str, pid: int) -> bool:
    """Release ``session_id``'s lease if process ``pid`` holds it and this is that
    process; False otherwise (a lease another process took under the same session id,
    or a forked child of the holder at its exit, keeps it).

    The release of a session dropped without ``close()`` (a ``weakref.finalize`` of the
    session): it may run inside a garbage collection that interrupted this process while
    it held the lease lock, so it takes no lock (a second ``flock`` of the same file in
    this process would wait for itself) and never raises.
    """
    if os.getpid() != pid:
        return False
    path = _lease_file(Path(root), session_id)
    try:
        lease = Lease(**json.loads(path.read_text(encoding="utf-8")))
        if lease.session_id != session_id or lease.pid != pid or not lease.bound:
            return False
        path.unlink()
    except (OSError, ValueError, TypeError):
        return False
    return True


def release_session_lease(root: str | os.PathLike[str], session_id: str) -> Lease | None:
    """Release the lease of ``session_id`` when no process holds it (a Claude Code
    session's, when Claude Code says the session ended); the lease released, or None.

    A lease bound to a process (a notebook's, a server's) is kept: that process releases
    it when its session closes, and a payload naming its session must not take its scope
    away while it still runs.
    """
    path = _lease_file(Path(root), session_id)
    if not path.parent.is_dir():
        return None  # no session ever leased here: nothing to create, nothing to release
    with lease_lock(root):  # not between another's check and its write
        try:
            lease = Lease(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError):
            return None  # a half-written or foreign file holds nothing (live_leases)
        if lease.session_id != session_id or lease.bound:
            return None
        try:
            path.unlink()
        except FileNotFoundError:
            return None
        return lease


def lease_age(root: str | os.PathLike[str], session_id: str) -> float | None:
    """Seconds since ``session_id``'s lease was refreshed; None when it holds none."""
    try:
        return time.time() - os.stat(_lease_file(Path(root), session_id)).st_mtime
    except OSError:
        return None


def live_leases(
    root: str | os.PathLike[str],
    *,
    minutes: float = DEFAULT_LEASE_MINUTES,
    now: float | None = None,
) -> list[Lease]:
    """The leases refreshed within the last ``minutes`` whose holder may still run;
    expired ones and those of an ended process are removed."""
    now = time.time() if now is None else now
    folder = Path(root).joinpath(*_LEASES)
    out: list[Lease] = []
    try:
        entries = sorted(folder.glob("*.json"))
    except OSError:
        return out
    for path in entries:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            lease = Lease(**data)
        except (OSError, ValueError, TypeError):
            continue  # a half-written or foreign file holds nothing
        if now - lease.refreshed > minutes * 60 or holder_alive(lease) is False:
            try:
                path.unlink()
            except OSError:
                pass
            continue
        out.append(lease)
    return out


# -- globs -----------------------------------------------------------------------------------------
def _positive(scope: Iterable[str]) -> list[str]:
    return [g.strip() for g in scope if g.strip() and not g.lstrip().startswith(("#", "!"))]


def _literal_dirs(glob: str) -> tuple[str, ...] | None:
    """The literal leading segments of an anchored glob; None when it matches at any depth."""
    g = glob.rstrip("/")
    if "/" not in g:
        return None  # .gitignore: a glob without a slash matches at any depth
    out: list[str] = []
    for seg in g.lstrip("/").split("/"):
        if _WILD.search(seg):
            break
        out.append(seg.lower())  # case-folded: claims more overlap, never less
    return tuple(out)


def globs_may_overlap(a: str, b: str) -> bool:
    """Whether some path could match both globs (True when unsure).

    Example:
        >>> globs_may_overlap("docs/**", "docs/api/*.md"), globs_may_overlap("a/x", "b/x")
        (True, False)
    """
    pa, pb = _literal_dirs(a), _literal_dirs(b)
    if pa is None or pb is None:
        return True
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def scope_overlap(
    a: Sequence[str], b: Sequence[str], files: Iterable[str], *, strict: bool = False
) -> list[str] | None:
    """The indexed files both scopes own; None when the scopes cannot overlap.

    An empty list means the globs may overlap but no file confirms it: not an overlap
    unless ``strict`` (then the caller treats it as one).
    """
    if not _may_overlap(a, b):
        return None
    return _confirm(files_in_scope(a, files), b, strict=strict)


def _may_overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    return any(globs_may_overlap(x, y) for x in _positive(a) for y in _positive(b))


def _confirm(owned: Sequence[str], b: Sequence[str], *, strict: bool) -> list[str] | None:
    """:func:`scope_overlap` on the files the first scope owns (``owned``)."""
    # Only a file under the literal leading directories of one of b's globs can be
    # matched by it (a "!" line only takes files out): the rest need no glob match.
    prefixes = _literal_prefixes(b)
    if prefixes is not None:
        owned = [f for f in owned if any(f == p or f.startswith(p + "/") for p in prefixes)]
    common = sorted(files_in_scope(b, owned))
    if common or strict:
        return common
    return None


def _literal_prefixes(scope: Sequence[str]) -> list[str] | None:
    """The literal leading directories of each glob, as written (matching is
    case-sensitive); None when a glob matches at any depth or starts with a wildcard."""
    out = []
    for g in _positive(scope):
        lit = _literal_dirs(g)
        if not lit:
            return None
        out.append("/".join(g.lstrip("/").split("/")[: len(lit)]))
    return out


def glob_contains(outer: str, inner: str) -> bool:
    """Whether every file ``inner`` owns is provably owned by ``outer`` (False when unsure).

    Ownership is :func:`~ctxnb.govern.core.in_scope`'s (``.gitignore`` rules): a glob
    owns a file when it matches the file or a directory above it, and a glob without
    ``/`` (``*.py``, ``build/``) matches a file's or directory's name at any depth.
    Decided exactly for the common shapes, segment by segment: an anchored outer glob
    without ``**`` (``src/*.py``, ``src/*/tests/``), one ending in ``/**``, and a name
    glob (``*.py``, ``test_*``, ``**/*.py``), against any inner glob; a name segment
    holds another when the other is a name it matches, or has the same text, or, for an
    outer ``PRE*SUF``, begins with ``PRE`` and ends with ``SUF``. Any other shape
    (``**`` inside the outer glob, negations, escapes) is refused: a containment proof
    may never claim more than the matcher gives.

    Example:
        >>> glob_contains("src/**", "src/api/*.py"), glob_contains("src/*.py", "src/**")
        (True, False)
        >>> glob_contains("*.py", "src/**/test_*.py"), glob_contains("*.py", "src/**")
        (True, False)
    """
    if outer != outer.lstrip() or inner != inner.lstrip():
        return False  # a leading space is part of the glob: no proof about it
    o, i = outer.strip(), inner.strip()
    if not o or not i or o.startswith(("!", "#")) or i.startswith(("!", "#")):
        return False
    if o == i:
        return True
    if o in ("**", "**/*", "*", "/**", "/**/*"):
        return True  # every file ("**/" is not: it owns only what is in a directory)
    out = _shape(o)
    inn = _shape(i)
    if out is None or inn is None:
        return False
    o_segs, o_dir, o_anchored = out
    i_segs, i_dir, i_anchored = inn
    if o_segs[-1] == "**" and len(o_segs) > 1 and not o_dir:
        # "P/**" owns what is under P: the same files as "P/".
        o_segs, o_dir = o_segs[:-1], True
    if o_anchored and len(o_segs) == 2 and o_segs[0] == "**":
        o_segs, o_anchored = o_segs[1:], False  # "**/NAME" is git's NAME at any depth
    if "**" in o_segs:
        return False
    if not o_anchored:
        # A name glob: some component of every file inner owns must match it (a
        # directory's, for a dir-only one). Each inner segment other than "**" is one
        # component; all are directories but the last, unless inner is dir-only.
        (name,) = o_segs
        for k, seg in enumerate(i_segs):
            if seg == "**":
                continue
            is_dir = k < len(i_segs) - 1 or i_dir
            if (is_dir or not o_dir) and _segment_within(seg, name):
                return True
        return False
    if not i_anchored:
        return False  # inner matches at any depth; an anchored outer does not
    # Anchored: inner's first len(o_segs) segments, before any "**", must each lie
    # within outer's, and the last of them be a directory when outer is dir-only.
    n = len(o_segs)
    if "**" in i_segs[:n] or len(i_segs) < n:
        return False
    if o_dir and not (n < len(i_segs) or i_dir):
        return False
    return all(_segment_within(a, b) for a, b in zip(i_segs[:n], o_segs, strict=True))


def _shape(glob: str) -> tuple[list[str], bool, bool] | None:
    """A glob's segments, whether it is dir-only and whether it is anchored (git's
    rules: a slash other than a trailing one anchors); None for a shape not decided."""
    g = glob.rstrip(" ")
    dir_only = g.endswith("/")
    if dir_only:
        g = g[:-1]
    anchored = "/" in g
    g = g[1:] if g.startswith("/") else g
    segs = g.split("/")
    if not g or "\\" in g or any(not s or s in (".", "..") for s in segs):
        return None  # escapes, empty or dot segments: left to the matcher alone
    if any("**" in s and s != "**" for s in segs):
        return None  # "a**b" is a plain star to git; not worth a proof
    return segs, dir_only, anchored


_NOT_LITERAL = frozenset("*?[]\\")


def _segment_within(inner: str, outer: str) -> bool:
    """Whether every name matching the segment ``inner`` matches the segment ``outer``."""
    if inner == outer or outer == "*":
        return True
    if inner == "**" or outer == "**":
        return False
    if not _WILD.search(inner):
        from .._util.wildmatch import compile_glob

        return (
            compile_glob(outer.encode("utf-8", "surrogateescape")).fullmatch(
                inner.encode("utf-8", "surrogateescape")
            )
            is not None
        )
    # outer PRE*SUF (one run of stars, nothing else special): every name inner matches
    # starts with inner's literal head and ends with its literal tail.
    if any(c in outer for c in "?[]\\"):
        return False
    pieces = [p for p in re.split(r"\*+", outer)]
    if len(pieces) != 2:
        return False
    pre, suf = pieces
    head = inner[: next(k for k, c in enumerate(inner) if c in _NOT_LITERAL)]
    last = max(k for k, c in enumerate(inner) if c in _NOT_LITERAL)
    tail = inner[last + 1 :]
    return head.startswith(pre) and tail.endswith(suf)


def indexed_files(workspace: Access) -> list[str] | None:
    """The workspace-relative paths the store holds a live version of (the index); None
    when nothing was ever indexed (then there is nothing to confirm an overlap on).

    Read only when two scopes' globs may overlap: it opens the store (pyarrow).
    """
    tip = workspace.store_tip()
    if tip == 0:
        return None
    # The live paths change only with a transaction: kept per store by its tip, so a
    # session that selects again or refreshes its lease does not scan the store again.
    key = str(workspace.store_dir)
    cached = _INDEXED.get(key)
    if cached is not None and cached[0] == tip:
        return list(cached[1])
    paths = _live_paths(workspace.store, str(workspace.root))
    _INDEXED[key] = (tip, tuple(paths))
    return paths


_INDEXED: dict[str, tuple[int, tuple[str, ...]]] = {}
"""The indexed files of each store this process read them from, with the tip they are of."""


def indexed_files_at(root: str | os.PathLike[str]) -> list[str] | None:
    """:func:`indexed_files` of the workspace at ``root`` by its default store
    (``.ctxnb/store``), for the Claude Code hooks, which open no workspace."""
    from ..store.objectstore import ObjectStore

    store_dir = Path(root, ".ctxnb", "store")
    if not store_dir.is_dir():
        return None
    store = ObjectStore(store_dir)
    if store.latest_tx() is None:
        return None
    return _live_paths(store, os.path.realpath(root))


def _live_paths(store: ObjectStore, root_path: str) -> list[str]:
    cols = store.scan("file", columns=["source_path", "source_hash"], format="arrow").to_pydict()
    root = root_path + "/"
    live: dict[str, bool] = {}
    # Versions come in transaction order: the last one of a path says whether it lives.
    for path, shash in zip(cols["source_path"], cols["source_hash"], strict=True):
        if path and path.startswith(root):
            live[path[len(root) :]] = shash is not None
    return sorted(p for p, alive in live.items() if alive)


def tree_files(root: str | os.PathLike[str], scope: Sequence[str]) -> list[str]:
    """The workspace-relative paths of the files on disk under ``scope``'s literal
    leading directories (the whole tree when a glob matches at any depth); ctxnb's own
    folders and ``.git`` left out, symlinks not followed.

    Each directory's listing is kept while the directory is unchanged (:func:`_listing`),
    so walking the same tree again costs one ``stat`` per directory.

    Example:
        >>> import pathlib, tempfile
        >>> top = pathlib.Path(tempfile.mkdtemp()); (top / "src").mkdir()
        >>> _ = (top / "src" / "a.py").write_text(""); _ = (top / "b.py").write_text("")
        >>> tree_files(top, ["src/**"]), sorted(tree_files(top, ["*.py"]))
        (['src/a.py'], ['b.py', 'src/a.py'])
    """
    top = os.fspath(root)
    starts: set[str] = set()
    for g in _positive(scope):
        lit = _literal_dirs(g)
        if lit is None or not lit:
            starts = {""}
            break
        # The literal prefix, in the glob's own case (the walk is on real names).
        starts.add("/".join(g.lstrip("/").split("/")[: len(lit)]))
    out: list[str] = []
    for start in sorted(starts):
        if any(start.startswith(s + "/") for s in starts if s and s != start):
            continue  # under another start: walked there
        base = os.path.join(top, start) if start else top
        if os.path.isfile(base):
            out.append(start)
            continue
        # The start itself is followed if it is a link (as os.walk does with its top);
        # the directories found below it are not.
        files, dirs = _listing(top, start, follow=True)
        out.extend(files)
        pending = list(dirs)
        while pending:
            rel = pending.pop()
            files, dirs = _listing(top, rel)
            out.extend(files)
            pending.extend(dirs)
    return out


_TRUST_NS = 2_000_000_000
"""A directory changed this recently (ns) before it was listed is listed again next time:
its timestamps are coarse (a clock tick), so a later change in the same tick would
leave them as they were."""

_LISTINGS: dict[tuple[str, str], tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...]]] = {}
"""Directory listings this process may reuse: (root, directory) -> (the directory's
identity and timestamps when listed, its files, its subdirectories), workspace-relative."""


def _listing(
    top: str, rel: str, *, follow: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files and the subdirectories (symlinks not followed) of the directory ``rel``
    under ``top``, workspace-relative; at the top, ctxnb's folders and ``.git`` left out.

    A kept listing is used only when the directory's inode, timestamps, size and link
    count are the ones it was listed with: adding, removing or renaming an entry changes
    the directory's mtime and ctime (and nobody can set a ctime back), so a listing is
    never stale, and one taken within :data:`_TRUST_NS` of a change is not kept.
    """
    path = os.path.join(top, rel) if rel else top
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError:
        return (), ()
    if not stat.S_ISDIR(st.st_mode):
        return (), ()
    # A link followed (the start) is keyed by its target's identity: pointed elsewhere,
    # it names another directory.
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_nlink)
    hit = _LISTINGS.get((top, rel))
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    listed_at = time.time_ns()
    prefix = rel + "/" if rel else ""
    files: list[str] = []
    dirs: list[str] = []
    try:
        with os.scandir(path) as entries:
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if rel or e.name not in (".git", ".ctxnb"):
                            dirs.append(prefix + e.name)
                    elif not e.is_dir():  # a link to a directory is neither (as os.walk)
                        files.append(prefix + e.name)
                except OSError:
                    files.append(prefix + e.name)
    except OSError:
        return (), ()  # unreadable: os.walk skips it too
    out = (tuple(files), tuple(dirs))
    if max(st.st_mtime_ns, st.st_ctime_ns) < listed_at - _TRUST_NS:
        if len(_LISTINGS) > 200_000:
            _LISTINGS.clear()  # a bound on memory: the next walks list again
        _LISTINGS[(top, rel)] = (key, *out)
    else:
        _LISTINGS.pop((top, rel), None)
    return out


# -- the checks ------------------------------------------------------------------------------------
def check_partition(
    root: str | os.PathLike[str],
    session_id: str,
    intent_id: str,
    scope: Sequence[str],
    *,
    files: Callable[[], Iterable[str] | None],
    minutes: float = DEFAULT_LEASE_MINUTES,
    strict: bool = False,
    supervisors: Sequence[str] = (),
    now: float | None = None,
) -> PolicyError | None:
    """The refusal when another live session holds an overlapping scope, else None.

    ``files`` lists the indexed files (workspace-relative), or returns None when the
    workspace was never indexed: then globs that may overlap count as an overlap (fail
    closed: nothing can confirm they do not). It is called only when two scopes' globs
    may overlap. A worker does not conflict with its supervisors (``supervisors``, up
    the chain), nor a supervisor with its workers at any depth.
    """
    listed: list[str] | None = None  # the indexed files this scope owns, read once
    unindexed = False
    confirmed: dict[tuple[str, ...], list[str] | None] = {}  # by the other lease's scope
    for lease in live_leases(root, minutes=minutes, now=now):
        if lease.session_id == session_id:
            continue
        if lease.session_id in supervisors:
            continue  # a worker's scope lies inside its supervisors' by construction
        if session_id in lease.supervisors or lease.parent == session_id:
            continue  # a supervisor re-selecting beside its own workers
        if not _may_overlap(scope, lease.scope):
            continue
        if listed is None:
            found = files()
            unindexed = found is None
            found = None if found is None else list(found)
            # The index may lag the tree (files made since, a workspace whose store
            # holds only what sessions read): the files on disk confirm too, or a
            # partial index would let two sessions own one file (fail closed).
            listed = _owned(root, scope, found, tree_files(root, scope))
        key = tuple(lease.scope)
        if key not in confirmed:
            confirmed[key] = _confirmed(root, scope, lease.scope, listed, strict or unindexed)
        common = confirmed[key]
        if common is None:
            continue
        shown = ", ".join(common[:5]) + (f" and {len(common) - 5} more" if len(common) > 5 else "")
        why = (
            f"both own {shown}"
            if common
            else "their globs may overlap and the workspace has no index to confirm on "
            "(run `ctxnb index`)"
            if unindexed
            else "their globs may overlap (overlap_strict)"
        )
        return PolicyError(
            "SCOPE_OVERLAP",
            f"intent {intent_id} ({', '.join(scope)}) for session {session_id} overlaps "
            f"intent {lease.intent_id} ({', '.join(lease.scope)}) held by live session "
            f"{lease.session_id}: {why}",
            recoverable=True,
            required_action=(
                f"Pick an intent with a disjoint scope, wait until session {lease.session_id} "
                "closes (or its lease expires), or narrow the work with spawn_worker."
            ),
        )
    return None


# Matching is the cost of a check (a glob match per file and scope), and a session
# selects and refreshes its intent again and again on a tree that mostly did not change:
# the files a scope owns, and each other scope's overlap with them, are kept and reused
# only while the files they were computed from (index and disk) are exactly the same.
_OWNED: dict[tuple[str, tuple[str, ...]], tuple[list[str] | None, list[str], list[str]]] = {}
_CONFIRMED: dict[
    tuple[str, tuple[str, ...], tuple[str, ...], bool], tuple[list[str], list[str] | None]
] = {}


def _owned(
    root: str | os.PathLike[str], scope: Sequence[str], found: list[str] | None, tree: list[str]
) -> list[str]:
    """The files of the index (``found``) and the disk (``tree``) that ``scope`` owns."""
    key = (os.fspath(root), tuple(scope))
    hit = _OWNED.get(key)
    if hit is not None and hit[0] == found and hit[1] == tree:
        return hit[2]
    owned = sorted(files_in_scope(scope, set(found or ()) | set(tree)))
    if len(_OWNED) > 64:
        _OWNED.clear()
        _CONFIRMED.clear()
    _OWNED[key] = (found, tree, owned)
    return owned


def _confirmed(
    root: str | os.PathLike[str],
    scope: Sequence[str],
    other: Sequence[str],
    owned: list[str],
    strict: bool,
) -> list[str] | None:
    key = (os.fspath(root), tuple(scope), tuple(other), strict)
    hit = _CONFIRMED.get(key)
    # The very list _owned returned: _owned hands out the same object only while the
    # files it was computed from did not change.
    if hit is not None and hit[0] is owned:
        return hit[1]
    common = _confirm(owned, other, strict=strict)
    if len(_CONFIRMED) > 512:
        _CONFIRMED.clear()
    _CONFIRMED[key] = (owned, common)
    return common


def check_subset(
    supervisor_scope: Sequence[str], worker_scope: Sequence[str], files: Iterable[str]
) -> None:
    """Refuse a worker scope that is not inside the supervisor's.

    Raises:
        PolicyError: ``SCOPE_NOT_SUBSET``, naming the glob or the files outside.
    """
    globs = _positive(worker_scope)
    if not globs:
        raise PolicyError(
            "SCOPE_NOT_SUBSET",
            "a worker needs a scope: pass at least one glob",
            required_action="Call spawn_worker(scope=[...]) with globs inside the supervisor's.",
        )
    outer = _positive(supervisor_scope)
    negated = [g for g in supervisor_scope if g.strip().startswith("!")]
    for g in globs:
        if any(seg in (".", "..") for seg in g.strip("/").split("/")):
            raise PolicyError(
                "SCOPE_NOT_SUBSET",
                f"worker glob {g!r} has a '.' or '..' segment; globs name paths as they are",
                required_action="Name the glob without '.' or '..' segments.",
            )
        if negated or not any(glob_contains(o, g) for o in outer):
            raise PolicyError(
                "SCOPE_NOT_SUBSET",
                f"worker glob {g!r} is not provably inside the supervisor's scope "
                f"({', '.join(supervisor_scope)})",
                required_action="Name a narrower glob under one of the supervisor's globs.",
            )
    outside = sorted(f for f in files if in_scope(globs, f) and not in_scope(supervisor_scope, f))
    if outside:
        raise PolicyError(
            "SCOPE_NOT_SUBSET",
            f"worker scope ({', '.join(globs)}) owns files outside the supervisor's scope: "
            + ", ".join(outside[:5]),
            required_action="Name a narrower glob under one of the supervisor's globs.",
        )
