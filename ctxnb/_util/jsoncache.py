"""Small JSON caches keyed by the files they were computed from.

A Claude Code hook is a new process on every tool call; what it derives from files that
rarely change (the settings, the intents, the protected set) is kept as JSON in the
user's state directory, keyed by each source file's modification time, size and inode,
and computed again only when one of them changed. Imports nothing of ctxnb.

Example:
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> src = d / "a.toml"; _ = src.write_text("x = 1\\n")
    >>> write_json_atomic(d / "cache.json", {"key": file_key(src), "value": 1})
    >>> read_cache(d / "cache.json", file_key(src))
    1
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["file_key", "loads_paused", "read_cache", "write_json_atomic"]


def file_key(path: str | os.PathLike[str]) -> list[Any] | None:
    """``[path, mtime_ns, size, inode]`` of a file (links followed), or None when absent."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [os.fspath(path), st.st_mtime_ns, st.st_size, st.st_ino]


def read_cache(path: Path, key: Any) -> Any:
    """The ``value`` cached at ``path`` under ``key``, or None (missing, damaged, stale)."""
    try:
        with open(path, encoding="utf-8") as fh:
            cached = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(cached, dict) and cached.get("key") == key:
        return cached.get("value")
    return None


def write_json_atomic(path: Path, data: Any, *, private: bool = False) -> None:
    """Write JSON via a unique temporary file and a rename: readers see old or new.

    ``private``: the file is made 0600 and its temporary name is never followed as a link
    (what ctxnb keeps about a user's work, such as a merge proposal's text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(tmp, flags, 0o600 if private else 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def loads_paused(data: bytes | str) -> Any:
    """``json.loads`` with the cyclic garbage collector paused.

    JSON makes no reference cycles, but each object parsed counts towards the
    collector's next pass, and those passes walk every object held so far: for a cache
    of a few thousand entries they cost about as much as the parsing.
    """
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(data)
    finally:
        if collecting:
            gc.enable()
