"""The paths in the input of a Claude Code tool ctxnb does not know by name.

MCP servers' tools (``mcp__server__tool``) and tools Claude Code adds later take paths
under names of their own. ctxnb cannot know which of them write, so every path it finds
in their input goes through the same path policy as the file tools (governance's files
and denied files are refused to reads and writes alike), and is refused when a write to
it would be (what runs on the host, :mod:`ctxnb.access.protected`); it finds them

* under keys that name a path (``path``, ``file_path``, ``filePath``, ``paths``,
  ``directory``, ``cwd``, ``root``, ``target`` …), at any depth: each is a path;
* in any other string that is absolute, a ``file://`` URI, starts with ``./``, ``../``
  or ``~/``, or has a ``/`` and names an existing file: checked as a path, except that
  an absolute one outside the workspace counts only when it exists (``/api/v1`` is
  not a file);
* in any other short word (no blanks) that names a denied or governance file by its
  name alone (``ctxnb.toml``, ``.claude/settings.json``, ``.env``).

Loaded only for such tools.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import PolicyError
from ._claude_hookio import _Context

__all__ = ["PATH_KEYS", "check_tool_paths"]

PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "filepath",
        "filepaths",
        "file",
        "files",
        "filename",
        "filenames",
        "notebookpath",
        "directory",
        "directories",
        "dir",
        "dirpath",
        "directorypath",
        "folder",
        "folderpath",
        "cwd",
        "workdir",
        "workingdirectory",
        "root",
        "rootpath",
        "repopath",
        "projectpath",
        "target",
        "targetpath",
        "targetfile",
        "source",
        "sourcepath",
        "sourcefile",
        "dest",
        "destpath",
        "destination",
        "destinationpath",
        "newpath",
        "oldpath",
        "inputpath",
        "inputfile",
        "outputpath",
        "outputfile",
        "relativepath",
        "absolutepath",
    }
)
"""Keys whose values are paths, compared lower-cased without ``_`` or ``-``."""

_MAX_STRINGS = 10_000  # strings looked at in one input
_MAX_DEPTH = 32
_MAX_WORD = 4096  # longer strings are text, not names
_KEY_SEPARATORS = re.compile(r"[_\-\s]")


def check_tool_paths(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> None:
    """Refuse the call when a path in its input is refused by the path policy.

    Raises:
        PolicyError: the first refusal (``PATH_DENIED`` naming the rule).
    """
    rules = ctx.policy
    for value, is_path_key in _strings(tool_input):
        if is_path_key:
            if value.strip():
                safe = rules.check(_host_path(ctx, value))
                # It may be written: what runs on the host is refused too, under any name.
                rules.check_protected(_host_path(ctx, value))
                refuse_other_name(ctx, safe)
            continue
        candidate = _path_like(ctx, value)
        if candidate is not None:
            checked: Any = None
            try:
                checked = rules.check(candidate)
            except PolicyError as e:
                outside = e.details.get("rule") == "outside-roots"
                if not outside or os.path.lexists(candidate):
                    raise
            rules.check_protected(candidate)
            if checked is not None:
                refuse_other_name(ctx, checked)
            continue
        if len(value) <= _MAX_WORD and value.strip() and not any(c.isspace() for c in value):
            if "://" in value:
                continue
            rule = rules.denied_by(_host_path(ctx, value))
            if rule is not None and rule.startswith(("deny:", "governance:")):
                rules.check(_host_path(ctx, value))  # raises, naming the rule
            if "/" in value:  # a name that would be created (a hook script not there yet)
                rules.check_protected(_host_path(ctx, value))


def refuse_other_name(ctx: _Context, safe: Any, st: os.stat_result | None = None) -> None:
    """Refuse a write to ``safe`` when it is another name (a hard link) of a governance or
    protected file: the write is judged as a write to that file.

    Claude Code replaces a file by a rename, which leaves the other name alone, but
    writes in place when it cannot make its temporary file, and another MCP server's
    write tool may always write in place: the hook cannot tell, so it decides as if in
    place. Only a file with more than one link can be another name; for one, the
    workspace is walked by descriptors, as the deny list's identity walk does
    (:func:`~ctxnb.access.identity.scan_denied`; git's and ctxnb's own directories are
    not walked).

    Raises:
        PolicyError: ``PATH_DENIED``, rule ``identity:<the governed file>``.
    """
    import stat as stat_mod

    if st is None:
        try:
            st = os.stat(safe.abs, follow_symlinks=False)
        except OSError:
            return
    if st.st_nlink < 2 or not stat_mod.S_ISREG(st.st_mode):
        return
    from ..access.identity import scan_denied
    from ..access.pathrules import governance_reason

    policy = ctx.policy

    def runs_or_governs(rel: str, is_dir: bool) -> bool:
        return governance_reason(rel) is not None or policy.protected_by(rel) is not None

    name = scan_denied(ctx.root, runs_or_governs).name_of(st)
    if name is None or name == safe.rel:
        return
    why = governance_reason(name) or policy.protected_by(name) or "it is protected"
    raise PolicyError(
        "PATH_DENIED",
        f"Path {safe.rel!r} is refused: it is another name (a hard link) of {name}, and {why} "
        f"(rule: identity:{name}).",
        recoverable=False,
        required_action="Write a new file under another name, or ask a human to remove the link.",
        details={"path": safe.rel, "rule": f"identity:{name}"},
    )


def _strings(value: Any) -> Iterator[tuple[str, bool]]:
    """Every string in ``value`` with whether it sits under a path key."""
    seen = 0
    stack: list[tuple[Any, bool, int]] = [(value, False, 0)]
    while stack:
        item, is_path, d = stack.pop()
        if isinstance(item, str):
            seen += 1
            if seen > _MAX_STRINGS:
                raise _too_much()
            yield item, is_path
        elif isinstance(item, Mapping):
            if d >= _MAX_DEPTH:
                raise _too_much()
            for k, v in item.items():
                path_key = isinstance(k, str) and _KEY_SEPARATORS.sub("", k.lower()) in PATH_KEYS
                stack.append((v, path_key, d + 1))
        elif isinstance(item, list | tuple):
            if d >= _MAX_DEPTH:
                raise _too_much()
            stack.extend((v, is_path, d + 1) for v in item)


def _path_like(ctx: _Context, value: str) -> str | None:
    """The host path a string names, when it looks like a path (see the module)."""
    if "\n" in value or "\0" in value or len(value) > _MAX_WORD:
        return None
    if value.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return _host_path(ctx, unquote(urlsplit(value).path) or "/")
    if value.startswith(("/", "./", "../", "~/")):
        return _host_path(ctx, value)
    if "/" in value and "://" not in value:
        full = _host_path(ctx, value)
        return full if os.path.lexists(full) else None
    return None


def _host_path(ctx: _Context, value: str) -> str:
    # Mount prefixes mapped, relative paths from the call's cwd: as the file tools. A
    # leading '~' (the user's home, for the tool) is left for the policy to refuse.
    return value if value.startswith("~") else ctx.abs_path(value)


def _too_much() -> PolicyError:
    return PolicyError(
        "PATH_DENIED",
        "the tool's input is too large or too deep for ctxnb to find every path in it",
        recoverable=True,
        required_action="Call the tool with a smaller input.",
        details={"rule": "input-too-large"},
    )
