"""The walk's judgments of names, kept between processes (``.ctxnb/judgments``).

A fresh ``ctxnb index`` judges every name it meets against the deny globs, in Python:
about as much CPU as the rest of a re-index of an unchanged tree. A name's judgment is
lexical (a function of its path from the root and the rules), so it can be kept: this
module holds, per directory, its identity and times ``(st_dev, st_ino, st_mtime_ns,
st_ctime_ns)`` when it was listed, its names in walk order and the rule that refused
each (``None``: accepted). A walk given a :class:`Judgments`:

* reuses a directory's names without listing it when its ``fstat`` is the one recorded
  and its change time was more than :data:`RACY_NS` older than that listing (a name
  added in the same timestamp tick as the listing would leave the times unchanged, as
  git's "racily clean" files); creating, removing or renaming a name changes the
  directory's mtime and ctime, and putting the mtime back with ``utime`` moves the
  ctime;
* reuses a name's judgment whenever the name is listed again (the directory changed or
  not: the judgment does not depend on what else is there);
* judges every other name, and records what it found.

**What the file is trusted for.** A forged or damaged file could admit a denied name,
so nothing in it is used unless all of these hold; otherwise every name is judged again
and the file is written afresh:

* it is sealed (:mod:`ctxnb._util.seal`): reached without following a link, a regular
  file owned by the effective user and writable by no one else, its first line an
  HMAC-SHA256 under the workspace's secret (``.ctxnb/judgments.key``, 0600) that also
  covers the key file's identity, so a key and a cache copied or unpacked from
  elsewhere (a tarball carrying ``.ctxnb/``) never verify;
* the rules key it names is the SHA-256 of everything a judgment depends on: the deny
  and governance globs in force, ``max_path_bytes``, the name limits, ctxnb's version,
  the Unicode tables' version and the SHA-256 of the modules that judge (so an
  upgraded or edited ctxnb judges again); a changed ``[policy] deny`` is a new key.

No agent tool reads or writes ``.ctxnb/`` (it is denied to every door and hidden from
sandboxed commands), so an agent can neither forge the file nor learn the secret; a
process running as the user outside ctxnb can, as it can edit the settings. Allow
globs, ignore files and the hard-link (identity) check are not kept here: the walk
applies them on every run.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.access.fdio import PathPolicy
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / "a.py").write_text("x = 1\\n")
    >>> _ = (ws / ".env").write_text("KEY=1\\n")
    >>> policy = PathPolicy([ws])
    >>> memo = Judgments.open(ws / ".ctxnb", policy)
    >>> [e.rel for e in policy.walk(judgments=memo)]
    ['a.py']
    >>> memo.save()
    >>> Judgments.open(ws / ".ctxnb", policy).rule_of("", ".env")
    'deny:.env*'
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
from typing import TYPE_CHECKING, Any

from .._util import seal
from .._util.jsoncache import loads_paused
from .._util.seal import KEY_FILE, hmac_sha256
from ..hashing import sha256_hex

if TYPE_CHECKING:
    from .pathrules import PathRules

__all__ = ["CACHE_FILE", "KEY_FILE", "RACY_NS", "Judgments", "hmac_sha256"]

CACHE_FILE = "judgments"
FORMAT = 1
# A directory changed within this long of its listing may have changed again in the same
# timestamp tick (coarse clocks; filesystems that keep 1- or 2-second times).
RACY_NS = 2_000_000_000
NOT_JUDGED = 0  # a name the walk did not judge (a link, a special file, a temp file)
_MAX_FILE = 64 << 20  # a larger file is not ours (a tree of ~1M names is ~40 MB)

# One directory: [st_dev, st_ino, st_mtime_ns, st_ctime_ns, listed_ns, {name: rule}]
Entry = list[Any]


def rules_key(rules: PathRules) -> str:
    """The SHA-256 of everything a name's judgment by ``rules`` depends on."""
    from .._util import wildmatch
    from .._version import __version__
    from . import _safepath, pathrules

    # The judging code's own bytes: an edited checkout judges again, and two installs of
    # the same release agree (their files' times differ).
    code = seal.code_key((pathrules, wildmatch, _safepath))
    parts = [
        FORMAT,
        __version__,
        unicodedata.unidata_version,
        list(rules.deny),
        list(rules.protect),
        rules.max_path_bytes,
        pathrules.NAME_MAX,
        pathrules.TEMP_PREFIX,
        code,
    ]
    return sha256_hex(json.dumps(parts))


class Judgments:
    """The judged names of a workspace's directories, from the last walk and this one.

    Made by :meth:`open`; handed to :meth:`PathPolicy.walk
    <ctxnb.access.fdio.PathPolicy.walk>` (``judgments=``), which asks :meth:`listing`
    and :meth:`rule_of` and calls :meth:`record`; :meth:`save` writes what the walk
    found when it differs from what was read. One walk per object.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        key: str,
        dirs: dict[str, Entry],
        *,
        racy_ns: int = RACY_NS,
    ) -> None:
        self.state_dir = os.fspath(state_dir)
        self.racy_ns = racy_ns
        self.key = key
        self._old = dirs  # as read (verified), or empty
        self._new: dict[str, Entry] = {}
        self.dirty = False
        self.reused = 0  # directories whose listing was reused (for tests and benchmarks)

    @classmethod
    def open(
        cls, state_dir: str | os.PathLike[str], rules: PathRules, *, racy_ns: int = RACY_NS
    ) -> Judgments:
        """The judgments kept in ``state_dir`` (a workspace's ``.ctxnb``) for ``rules``;
        empty when there are none, they were made under other rules, or the file fails
        any check (see the module's docstring). ``racy_ns``: how long after a
        directory's last change its listing is trusted (tests shorten it)."""
        key = rules_key(rules)
        return cls(state_dir, key, _load(os.fspath(state_dir), key), racy_ns=racy_ns)

    # -- asked by the walk -----------------------------------------------------------
    def listing(self, rel_dir: str, st: os.stat_result) -> dict[str, Any] | None:
        """The names of the directory ``rel_dir`` (``""``: the root) with their rules,
        in walk order, when ``st`` (its ``fstat`` now) shows it unchanged since a listing
        that was not racy; else None (list it)."""
        e = self._old.get(rel_dir)
        if (
            e is None
            or e[3] != st.st_ctime_ns
            or e[2] != st.st_mtime_ns
            or e[1] != st.st_ino
            or e[0] != st.st_dev
            or e[3] + self.racy_ns >= e[4]
        ):
            return None
        self._new[rel_dir] = e
        self.reused += 1
        names: dict[str, Any] = e[5]
        return names

    def rule_of(self, rel_dir: str, name: str) -> Any:
        """The rule recorded for ``name`` in ``rel_dir`` (``None``: accepted), or
        :data:`NOT_JUDGED` when none was."""
        e = self._old.get(rel_dir)
        if e is None:
            return NOT_JUDGED
        return e[5].get(name, NOT_JUDGED)

    def record(
        self, rel_dir: str, st: os.stat_result, listed_ns: int, names: dict[str, Any]
    ) -> None:
        """What a listing of ``rel_dir`` found: its ``fstat`` taken before the listing
        began at ``listed_ns``, and each name with its rule (or :data:`NOT_JUDGED`)."""
        e = [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, listed_ns, names]
        old = self._old.get(rel_dir)
        if (
            old is not None
            and old[3] + self.racy_ns < old[4]  # its listing was not racy
            and old[:4] == e[:4]
            and old[5] == names
        ):
            self._new[rel_dir] = old  # the same answer as kept: nothing to write
            return
        self._new[rel_dir] = e
        self.dirty = True

    # -- kept ----------------------------------------------------------------------
    def save(self) -> None:
        """Write the directories this walk listed or reused, when they differ from the
        file read (atomically: a temporary file, fsynced, renamed over it). A failure to
        write is silent: the file is only a cache, and the next walk judges again."""
        if not self.dirty and self._new.keys() == self._old.keys():
            return
        try:
            _save(self.state_dir, self.key, self._new)
        except OSError:
            return
        self._old, self.dirty = self._new, False

    def entries(self) -> dict[str, Entry]:
        """The directories as the walk left them (listed or reused), by relative path."""
        return dict(self._new)


# -- the file ----------------------------------------------------------------------
def _load(state_dir: str, key: str) -> dict[str, Entry]:
    body = seal.read(state_dir, CACHE_FILE, limit=_MAX_FILE)
    if body is None:
        return {}
    try:
        data = loads_paused(body)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return {}
    dirs = data.get("dirs")
    if not isinstance(dirs, dict) or not all(_valid(e) for e in dirs.values()):
        return {}
    return dirs


def _valid(e: Any) -> bool:
    return (
        isinstance(e, list)
        and len(e) == 6
        and all(type(x) is int for x in e[:5])
        and isinstance(e[5], dict)
        and all(_valid_rule(r) for r in e[5].values())
    )


def _valid_rule(r: Any) -> bool:
    return r is None or type(r) is str or (type(r) is int and r == NOT_JUDGED)


def _save(state_dir: str, key: str, dirs: dict[str, Entry]) -> None:
    body = json.dumps(
        {"format": FORMAT, "key": key, "saved_ns": time.time_ns(), "dirs": dirs},
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    seal.write(state_dir, CACHE_FILE, body)
