"""The descriptor walk under :class:`~ctxnb.access.fdio.PathPolicy`.

Every name is reached one component at a time from a descriptor of its root, each
component opened with ``O_NOFOLLOW`` relative to its parent's descriptor, so a symbolic
link or a swapped directory met on the way is reported, never followed. This module holds
that walk (roots, nested roots, parents, subdirectories, directory walks with their
judgments) and the single-file primitives built on it (``lstat``, open a regular file,
read it, write a temporary file, link it in), as :class:`FdWalk`, an object a policy
holds and hands its rules, which judge every name met through their public methods.
``fdio.py`` holds the public operations that compose them. The hook process imports
both: standard library only.

A regular file with more than one link is also judged by its identity: when it is the
inode of a denied file (a hard link, see :mod:`ctxnb.access.identity`), it is refused
as the denied file would be (rule ``identity:<denied path>``). A file with one link
costs nothing more; the first one with several costs one walk of the roots' denied
names, remembered by inode and ``st_ctime`` (a new link or a rename changes it).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn

from ..errors import NotFoundError, PolicyError
from .pathrules import TEMP_PREFIX, PathRules, SafePath, _deny, _Parsed, _Root, _short

if TYPE_CHECKING:
    from ._judgments import Judgments
    from .identity import DeniedInodes

WriteMode = Literal["truncate", "append", "create"]
PathKind = Literal["missing", "file", "dir"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
# O_NONBLOCK on directories is harmless and means a FIFO met where a directory was
# expected can never block the walk.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _NOCTTY | _CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _NOCTTY | _CLOEXEC
_READ_CHUNK = 1 << 20
_S_IFMT, _S_IFDIR, _S_IFREG, _S_IFLNK = (
    0o170000,
    stat_mod.S_IFDIR,
    stat_mod.S_IFREG,
    stat_mod.S_IFLNK,
)
_UNJUDGED = "\x00unjudged"  # no rule name holds a NUL
_NOT_JUDGED = 0  # in kept judgments (ctxnb.access._judgments.NOT_JUDGED): never judged
_JUDGED_MAX = 1 << 17  # names whose walk judgment is remembered (a few MB at most)
_IDENTITY_MAX = 1 << 14  # inodes whose identity judgment is remembered
_CTIME_SLACK_NS = 2_000_000_000  # FAT keeps 2-second times; the kernel's clock is coarse


class FdWalk:
    """The descriptor walk and the single-file primitives of a
    :class:`~ctxnb.access.fdio.PathPolicy`, over the rules it is given (the policy's).

    Args:
        rules: the path rules that judge every name the walk meets.
    """

    def __init__(self, rules: PathRules) -> None:
        self.rules = rules
        # The walk's judgment of each name it met (see walk_dir): lexical, so it holds
        # for as long as the rules do.
        self.judged: dict[str, str | None] = {}
        # The last walk of the denied names (see identity_rule), or None.
        self._identity_scan: DeniedInodes | None = None

    # -- identity: a hard link of a denied file is refused as that file ----------------
    @cached_property
    def _identity_memo(self) -> dict[tuple[int, int], tuple[int, int, str | None]]:
        """(st_dev, st_ino) -> (st_ctime_ns, st_nlink, rule) of the inodes judged."""
        return {}

    @cached_property
    def _deny_only(self) -> PathRules:
        """The deny globs alone (governance's globs refuse writes, not these bytes)."""
        rules = self.rules
        return PathRules(rules.roots, deny=rules.deny, max_path_bytes=rules.max_path_bytes)

    def identity_rule(self, st: os.stat_result, since_ns: int) -> str | None:
        """``identity:<denied path>`` when the regular file ``st`` (its ``lstat`` or the
        ``fstat`` of the open file) is an inode a denied name holds, else None.

        ``since_ns``: when the operation (or walk) began; a walk of the denied names
        taken before it is not trusted for an inode changed (ctime) since that walk.
        """
        if st.st_nlink < 2 or st.st_mode & _S_IFMT != _S_IFREG or not self.rules.deny:
            return None
        key = (st.st_dev, st.st_ino)
        memo = self._identity_memo
        hit = memo.get(key)
        # A link made, removed or renamed changes the inode's ctime and (but for a
        # rename) its link count: the same pair means the same set of names.
        if hit is not None and hit[0] == st.st_ctime_ns and hit[1] == st.st_nlink:
            return hit[2]
        scan = self._identity_scan
        # A walk taken before this operation still answers for an inode whose ctime is
        # older than the walk: no link of it was made, removed or renamed since (with
        # a margin for filesystems that keep coarse times).
        if scan is None or (
            scan.taken_ns < since_ns and st.st_ctime_ns >= scan.taken_ns - _CTIME_SLACK_NS
        ):
            scan = self.scan_identities()
        name = scan.name_of(st)
        rule = None if name is None else f"identity:{name}"
        if len(memo) >= _IDENTITY_MAX:
            memo.clear()
        memo[key] = (st.st_ctime_ns, st.st_nlink, rule)
        return rule

    def scan_identities(self) -> DeniedInodes:
        """Walk every root's denied names once; keep the answer for this policy."""
        from .identity import DeniedInodes, scan_denied

        found = self._deny_only.denies_found

        def denied(rel: str, is_dir: bool) -> bool:
            # The walk asks only below directories it found not denied.
            return found(rel)

        scan = DeniedInodes()
        for root in self.rules.root_entries:
            try:
                fd = self.open_root(_Parsed(root, (), True, str(root.real)))
            except (NotFoundError, PolicyError):
                continue
            try:
                part = scan_denied(root.real, denied, root_fd=fd)
            finally:
                os.close(fd)
            for key, rel in part.by_key.items():
                scan.by_key.setdefault(key, rel)
        self._identity_scan = scan
        return scan

    def refuse_identity(self, st: os.stat_result, p: _Parsed, since_ns: int) -> None:
        rule = self.identity_rule(st, since_ns)
        if rule is not None:
            _deny_identity(p.display, rule)

    def open_root(self, p: _Parsed) -> int:
        nested = self.nested_roots.get(p.root.real)
        try:
            if nested is not None:
                return self.open_nested_root(p, *nested)
            return os.open(p.root.real, _DIR_FLAGS)
        except OSError as exc:
            raise NotFoundError(
                f"Workspace root {str(p.root.real)!r} cannot be opened ({exc.strerror})."
            ) from exc

    @cached_property
    def nested_roots(self) -> dict[Path, tuple[Path, tuple[str, ...]]]:
        """Roots inside another root (the skills folder), with that root and the way down.

        Such a root is opened by a descriptor walk from the outer one: opened by name, a
        folder above it swapped for a symbolic link after the policy was made (``.ctxnb``
        -> elsewhere) would be followed.
        """
        found = {}
        roots = self.rules.root_entries
        for r in roots:
            outer = next((o for o in roots if o is not r and r.real.is_relative_to(o.real)), None)
            if outer is not None:
                found[r.real] = (outer.real, r.real.relative_to(outer.real).parts)
        return found

    @staticmethod
    def open_nested_root(p: _Parsed, outer: Path, parts: tuple[str, ...]) -> int:
        fd = os.open(outer, _DIR_FLAGS)
        try:
            for depth, name in enumerate(parts):
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    st = _lstat_quiet(name, fd)
                    if st is not None and not stat_mod.S_ISDIR(st.st_mode):
                        where = "/".join(parts[: depth + 1])
                        what = "a symbolic link" if stat_mod.S_ISLNK(st.st_mode) else "no folder"
                        _deny(p.display, "symlink", f"{where!r}, on the way to its root, is {what}")
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_parent(self, p: _Parsed, *, make_parents: bool = False) -> int:
        fd = self.walk_parents(p, make_parents=make_parents)
        if fd is None:
            hint = " (pass make_parents=True to create it)" if not make_parents else ""
            raise NotFoundError(
                f"A parent directory of {_short(p.display)!r} does not exist or is a file{hint}."
            )
        return fd

    def walk_parents(self, p: _Parsed, *, make_parents: bool = False) -> int | None:
        """Descriptor of the directory holding the last name, or None if one is missing."""
        fd = self.open_root(p)
        ok = False
        try:
            for depth, name in enumerate(p.parts[:-1]):
                nfd = self.open_subdir(fd, name, p, depth, make_parents)
                if nfd is None:
                    return None
                os.close(fd)
                fd = nfd
            ok = True
            return fd
        finally:
            if not ok:
                os.close(fd)

    def open_subdir(self, fd: int, name: str, p: _Parsed, depth: int, make: bool) -> int | None:
        prefix = "/".join(p.parts[: depth + 1])
        made = False
        for _ in range(4):
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make or made:
                    return None
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # someone else made it, or it is not a directory: the open decides
                made = True
            except OSError as exc:
                st = _lstat_quiet(name, fd)
                if st is None:
                    return None
                if stat_mod.S_ISLNK(st.st_mode):
                    _deny(p.display, "symlink", f"{prefix!r} is a symbolic link")
                if stat_mod.S_ISREG(st.st_mode):
                    return None  # a file where a directory should be: the path cannot exist
                if not stat_mod.S_ISDIR(st.st_mode):
                    _deny(p.display, "special-file", f"{prefix!r} is not a directory")
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                # It was a link when opened and is a directory again now: it is being
                # swapped under us. Try again; a steady swap is refused below.
        _deny(p.display, "symlink", f"{prefix!r} keeps changing into a symbolic link")

    def probe(self, p: _Parsed) -> PathKind:
        if not p.parts:
            return "dir"
        parent = self.walk_parents(p)
        if parent is None:
            return "missing"
        try:
            st = self.lstat_at(parent, p)
        finally:
            os.close(parent)
        if st is None:
            return "missing"
        self.require_plain(st, p, allow_dir=True)
        if stat_mod.S_ISDIR(st.st_mode):
            return "dir"
        self.refuse_identity(st, p, time.time_ns())
        return "file"

    def enter(
        self, opened: list[tuple[tuple[str, ...], int]], dparts: tuple[str, ...], p: _Parsed
    ) -> int | None:
        """The descriptor of ``dparts`` (below ``p``'s root), reusing the open chain."""
        while opened and opened[-1][0] != dparts[: len(opened[-1][0])]:
            os.close(opened.pop()[1])
        try:
            if not opened:
                opened.append(((), self.open_root(p)))
            while len(opened[-1][0]) < len(dparts):
                have, fd = opened[-1]
                depth = len(have)
                nfd = self.open_subdir(fd, dparts[depth], p, depth, False)
                if nfd is None:
                    return None
                opened.append((dparts[: depth + 1], nfd))
        except (NotFoundError, PolicyError):
            return None
        return opened[-1][1]

    def stat_in(
        self, fd: int, p: _Parsed, allow: bool, since_ns: int
    ) -> os.stat_result | NotFoundError | PolicyError:
        """What ``PathPolicy.stat`` answers for ``p``, its parent open as ``fd``."""
        try:
            st = os.stat(p.parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return NotFoundError(f"Nothing at {_short(p.display)!r} in {p.root.real}.")
        fmt = st.st_mode & _S_IFMT
        if fmt == _S_IFREG and not p.dir_form and not allow and st.st_nlink < 2:
            return st  # the common answer, decided without the checks below
        try:
            self.require_plain(st, p, allow_dir=True)
            if fmt == _S_IFREG:
                if p.dir_form:
                    _deny(p.display, "trailing-slash", "it is a file, not a directory")
                self.rules.check_allow(p)
                self.refuse_identity(st, p, since_ns)
        except PolicyError as e:
            return e
        return st

    @staticmethod
    def lstat_at(parent: int, p: _Parsed) -> os.stat_result | None:
        try:
            return os.stat(p.parts[-1], dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    @staticmethod
    def require_plain(st: os.stat_result, p: _Parsed, *, allow_dir: bool) -> None:
        mode = st.st_mode
        if stat_mod.S_ISLNK(mode):
            _deny(p.display, "symlink", "it is a symbolic link")
        if stat_mod.S_ISDIR(mode):
            if not allow_dir:
                _deny(p.display, "not-a-regular-file", "it is a directory")
            return
        if not stat_mod.S_ISREG(mode):
            _deny(p.display, "special-file", f"it is a {_kind(mode)}, not a regular file")

    @staticmethod
    def open_regular(
        parent: int, p: _Parsed, lstat: os.stat_result | None = None
    ) -> tuple[int, os.stat_result]:
        """Open a regular file of ``parent``: its descriptor and its ``fstat``.

        ``lstat``: the entry's ``lstat`` if the caller has just taken it (a walk).
        """
        name = p.parts[-1]
        # lstat first so that a device node is never opened (opening one can act on
        # the device); the O_NOFOLLOW | O_NONBLOCK open plus fstat below is what makes
        # it safe if the entry is swapped in between.
        st = lstat if lstat is not None else FdWalk.lstat_at(parent, p)
        if st is None:
            raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.")
        FdWalk.require_plain(st, p, allow_dir=False)
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW
                _deny(p.display, "symlink", "it is a symbolic link")
            if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
                _deny(p.display, "special-file", "it is not a regular file")
            if exc.errno == errno.EISDIR:
                _deny(p.display, "not-a-regular-file", "it is a directory")
            raise
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                _deny(p.display, "special-file", f"it is a {_kind(st.st_mode)}, not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    @staticmethod
    def read_fd(fd: int, p: _Parsed, max_bytes: int | None, size: int) -> bytes:
        """The file's bytes; ``size`` is its ``fstat`` size: the first read asks for all
        of it and a byte more, so a file that does not change takes one read (and one
        that returns nothing at its end)."""
        if max_bytes is not None and size > max_bytes:
            _too_large(p, size, max_bytes)
        chunks: list[bytes] = []
        total = 0
        while True:
            want = size + 1 if not chunks else _READ_CHUNK
            if max_bytes is not None:
                want = min(want, max_bytes + 1 - total)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                _too_large(p, total, max_bytes)  # it grew while we read
        return b"".join(chunks)

    @staticmethod
    def write_temp(
        parent: int,
        data: bytes,
        old: os.stat_result | None,
        new_mode: int | None = None,
        while_syncing: Callable[[], object] | None = None,
    ) -> str:
        # An existing file's temp starts private (0o600) so a secret file's new content
        # is never briefly readable by others; a new file gets 0o666 (or the mode asked
        # for) minus the umask: the kernel applies it at creation, so a new file never
        # grants more than the user's umask allows (no world-writable executable).
        if old is not None:
            create_mode = 0o600
        else:
            create_mode = 0o666 if new_mode is None else new_mode & 0o777
        for _ in range(16):
            name = f"{TEMP_PREFIX}{os.urandom(8).hex()}"
            try:
                fd = os.open(name, _TEMP_FLAGS, create_mode, dir_fd=parent)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 16 collisions of 64 random bits
            raise FileExistsError("could not create a unique temporary file")
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if old is not None:
                mine = os.fstat(fd)
                if (mine.st_uid, mine.st_gid) != (old.st_uid, old.st_gid):
                    try:
                        os.fchown(fd, old.st_uid, old.st_gid)
                    except PermissionError:
                        pass  # only root may give a file away; keep ours
                os.fchmod(fd, stat_mod.S_IMODE(old.st_mode) & 0o777)
            if while_syncing is None:
                os.fsync(fd)
            else:
                # The caller's work runs while the disk does (see ctxnb._util.fsync).
                from .._util.fsync import fsync_later

                synced = fsync_later(fd)
                try:
                    while_syncing()
                finally:
                    synced()
        except BaseException:
            os.close(fd)
            _unlink_quiet(name, parent)
            raise
        os.close(fd)
        return name

    def link_new(self, parent: int, tmp: str, p: _Parsed) -> None:
        name = p.parts[-1]
        try:
            # link() fails if the name exists: an O_EXCL create whose content is
            # complete the moment it appears.
            os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
        except FileExistsError:
            self.file_exists(p)
        except (OSError, NotImplementedError) as exc:
            # NotImplementedError: a platform without linkat(); OSError: a filesystem
            # without hard links (FAT, some FUSE and network filesystems).
            no_links = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK)
            if isinstance(exc, OSError) and exc.errno not in no_links:
                raise
            # Filesystems without hard links: check again, then rename (a small window).
            if self.lstat_at(parent, p) is not None:
                self.file_exists(p)
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            return
        _unlink_quiet(tmp, parent)

    @staticmethod
    def file_exists(p: _Parsed) -> NoReturn:
        raise PolicyError(
            "FILE_EXISTS",
            f"File {_short(p.display)!r} already exists and mode='create' does not replace it.",
            recoverable=True,
            required_action="Use mode='truncate' to replace the file, or pick a new path.",
            details={"path": _short(p.display, 512)},
        )

    def walk_dir(
        self,
        root: _Root,
        fd: int,
        prefix: tuple[str, ...],
        skip: Callable[[str, bool], bool] | None,
        on_dir: Callable[[str, Callable[[str], bytes | None]], None] | None,
        on_refused: Callable[[str, str], None] | None,
        *,
        temps: bool,
        since_ns: int = 0,
        memo: Judgments | None = None,
    ) -> Iterator[FileEntry]:
        """Yield the accepted files below the open directory ``fd`` (not closed here).

        ``since_ns``: when the walk began (see :meth:`_identity_rule`): one walk of the
        denied names serves the whole walk. ``memo``: the judgments kept from earlier
        walks (:mod:`ctxnb.access._judgments`), used and brought up to date.
        """
        rel_dir = "/".join(prefix)
        if on_dir is not None:
            on_dir(rel_dir, lambda name: _read_small(fd, name))
        kept: dict[str, str | None | int] | None = None
        if memo is not None and not temps:
            try:
                # Before the listing: a name added during it moves the times past these.
                dst = os.fstat(fd)
            except OSError:
                return
            kept = memo.listing(rel_dir, dst)
            found: dict[str, str | None | int] = {}
            listed_ns = time.time_ns()
        if kept is not None:
            names = list(kept)  # the directory is unchanged since they were listed
        else:
            try:
                with os.scandir(fd) as it:
                    names = sorted(e.name for e in it)
            except OSError:
                return  # removed or unreadable since it was opened
        # The nothing-changed path of a re-index runs this loop once per file: no
        # per-file objects beyond the lstat, and a name's lexical judgment (a pure
        # function of its path) is remembered across walks by the rules.
        judged = self.judged
        allow = self.rules.allow_spec
        base = rel_dir + "/" if prefix else ""
        for name in names:
            rel = base + name
            if memo is not None and not temps:
                # Recorded before the entry is used: a generator closed at a yield below
                # records nothing for this directory (the walk did not finish it).
                found[name] = _NOT_JUDGED
                if rel not in judged:
                    was = kept[name] if kept is not None else memo.rule_of(rel_dir, name)
                    if was is None or isinstance(was, str):  # judged then: lexical, it holds
                        if len(judged) >= _JUDGED_MAX:  # for as long as the key does
                            judged.clear()
                        judged[rel] = was
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # vanished while we looked
            fmt = st.st_mode & _S_IFMT
            is_dir, is_file = fmt == _S_IFDIR, fmt == _S_IFREG
            if is_file and name.startswith(TEMP_PREFIX):
                if temps:
                    yield FileEntry(root, rel, st, fd)
                continue
            if temps:
                if is_dir and self.judge(judged, prefix, name, rel) is None:
                    yield from self.descend(root, fd, (*prefix, name), None, None, None, temps=True)
                continue
            if not (is_dir or is_file):
                if on_refused is not None:
                    on_refused(rel, "symlink" if fmt == _S_IFLNK else "special-file")
                continue
            got = judged.get(rel, _UNJUDGED)
            rule = self.judge(judged, prefix, name, rel) if got is _UNJUDGED else got
            if memo is not None:
                found[name] = rule
            if rule is None and is_file and allow is not None:
                rule = None if allow.match_file(rel) else "not-allowed"
            if rule is None and is_file and st.st_nlink > 1:
                rule = self.identity_rule(st, since_ns)
            if rule is not None:
                if on_refused is not None:
                    on_refused(rel, rule)
                continue
            if skip is not None and skip(rel, is_dir):
                continue
            if is_dir:
                yield from self.descend(
                    root, fd, (*prefix, name), skip, on_dir, on_refused, temps=False,
                    since_ns=since_ns, memo=memo,
                )  # fmt: skip
            else:
                yield FileEntry(root, rel, st, fd)
        if memo is not None and not temps:
            memo.record(rel_dir, dst, listed_ns, found)

    def judge(
        self, judged: dict[str, str | None], prefix: tuple[str, ...], name: str, rel: str
    ) -> str | None:
        """The walk's refusal of ``rel`` (its parent accepted), remembered by path."""
        got = judged.get(rel, _UNJUDGED)
        if got is not _UNJUDGED:
            return got
        if len(judged) >= _JUDGED_MAX:
            judged.clear()
        judged[rel] = rule = self.rules.refusal((*prefix, name), parent_checked=True)
        return rule

    def descend(
        self,
        root: _Root,
        fd: int,
        parts: tuple[str, ...],
        skip: Callable[[str, bool], bool] | None,
        on_dir: Callable[[str, Callable[[str], bytes | None]], None] | None,
        on_refused: Callable[[str, str], None] | None,
        *,
        temps: bool,
        since_ns: int = 0,
        memo: Judgments | None = None,
    ) -> Iterator[FileEntry]:
        try:
            nfd = os.open(parts[-1], _DIR_FLAGS, dir_fd=fd)
        except OSError:
            # Replaced by a link (O_NOFOLLOW refuses it) or removed since the scan.
            if on_refused is not None:
                st = _lstat_quiet(parts[-1], fd)
                if st is not None and stat_mod.S_ISLNK(st.st_mode):
                    on_refused("/".join(parts), "symlink")
            return
        try:
            yield from self.walk_dir(
                root, nfd, parts, skip, on_dir, on_refused, temps=temps, since_ns=since_ns,
                memo=memo,
            )  # fmt: skip
        finally:
            os.close(nfd)


class FileEntry:
    """A file found by :meth:`PathPolicy.walk`: its name, its ``lstat`` and a way to read it.

    ``read`` opens the name relative to its directory's descriptor (``O_NOFOLLOW``,
    regular files only), so it is valid only while the walk stands at this entry.
    ``rel`` and ``root`` are plain attributes; the :class:`SafePath` (``safe``) is made
    when first asked for, so a walk over unchanged files builds no path objects.
    """

    # A plain class: the hook process imports this module, and dataclasses cost it time.
    __slots__ = ("_root", "_safe", "dir_fd", "rel", "stat")

    def __init__(self, root: _Root, rel: str, stat: os.stat_result, dir_fd: int) -> None:
        self._root = root
        self._safe: SafePath | None = None
        self.rel = rel
        self.stat = stat
        self.dir_fd = dir_fd

    @property
    def root(self) -> Path:
        """The real path of the root the file was found under."""
        return self._root.real

    @property
    def safe(self) -> SafePath:
        """The file as a :class:`SafePath`."""
        if self._safe is None:
            self._safe = self._parsed().safe
        return self._safe

    def _parsed(self) -> _Parsed:
        return _Parsed(self._root, tuple(self.rel.split("/")), False, self.rel)

    def __repr__(self) -> str:
        return f"FileEntry(safe={self.safe!r}, dir_fd={self.dir_fd})"

    def read(self, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes, read race-free through its directory's descriptor.

        Raises:
            PolicyError: ``PATH_DENIED`` when the name became a link or special file.
            NotFoundError: the file is gone.
        """
        p = self._parsed()
        fd, st = FdWalk.open_regular(self.dir_fd, p, self.stat)
        try:
            if st.st_nlink > 1 and (st.st_dev, st.st_ino) != (self.stat.st_dev, self.stat.st_ino):
                # Another file took the name since the walk judged it, and it has other
                # names: it may be a denied file's (the walk judged the one it saw).
                _deny_identity(p.display, "identity")
            return FdWalk.read_fd(fd, p, max_bytes, st.st_size)
        finally:
            os.close(fd)


def _too_large(p: _Parsed, size: int, limit: int) -> NoReturn:
    raise PolicyError(
        "FILE_TOO_LARGE",
        f"File {_short(p.display)!r} is {size} bytes or more, over the limit of {limit}.",
        recoverable=True,
        required_action="Read a line range or an excerpt instead of the whole file.",
        details={"path": _short(p.display, 512), "size": size, "max_bytes": limit},
    )


def _deny_identity(display: str, rule: str) -> NoReturn:
    _, _, name = rule.partition(":")
    why = (
        f"it is a hard link of the denied {_short(name)!r} (the same file under another name)"
        if name
        else "it was replaced since the walk judged it by a file with other names"
    )
    _deny(display, rule, why)


def _kind(mode: int) -> str:
    if stat_mod.S_ISFIFO(mode):
        return "FIFO"
    if stat_mod.S_ISSOCK(mode):
        return "socket"
    if stat_mod.S_ISCHR(mode):
        return "character device"
    if stat_mod.S_ISBLK(mode):
        return "block device"
    if stat_mod.S_ISDIR(mode):
        return "directory"
    return "special file"


def _read_small(dir_fd: int, name: str, limit: int = 1 << 20) -> bytes | None:
    """A small regular file of an open directory (an ignore file), or None."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _lstat_quiet(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def _close_all(opened: list[tuple[tuple[str, ...], int]]) -> None:
    while opened:
        os.close(opened.pop()[1])


def _unlink_quiet(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass  # best effort; clean_temp_files() sweeps what is left
