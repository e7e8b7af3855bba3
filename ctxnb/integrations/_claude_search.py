"""Claude Code's Grep and Glob, decided on the files they can reach.

A search pattern is not a path: ``glob: "*.e*"`` or ``"**/.[e]nv"`` names no denied
file, yet ripgrep, which both tools run, opens ``.env`` and prints it. So the
pre-tool-use hook does not judge the pattern's text: it asks ripgrep itself which files
the call reaches, with the arguments Claude Code gives it, and refuses the call when any
of them is a file ctxnb hides from commands (:func:`search_rules`: the deny list,
``.git`` and ``.ctxnb``), or a hard link of a denied file under another name.

How Claude Code runs ripgrep (its documented tool behaviour; no Claude Code binary was
run here):

* Grep: ``rg --hidden`` with version-control directories excluded
  (``--glob '!.git'`` …), ignore files honoured, the call's ``glob`` (one glob, or
  several split at blanks and commas: both readings are tried) and ``type``, over
  ``path`` or the working directory.
* Glob: ``rg --files --glob PATTERN`` over ``path``, ignoring no file (``--no-ignore``),
  hidden files included; an absolute pattern is split into its fixed directory and the
  rest. ctxnb also matches the pattern case-insensitively (some versions do).

ripgrep reads the same ignore files at the same moment for both, so a ``.gitignore``
the agent edits changes ctxnb's answer as it changes Claude Code's search. ctxnb's own
directory is kept out of every search with a ``.ctxnb/.ignore`` (``*``), the way
``.pytest_cache`` keeps itself out of git; were it removed, the search would reach
``.ctxnb`` and be refused. Loaded only for Grep and Glob calls.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..access.pathrules import PathRules
from ..errors import PolicyError
from ._claude_hookio import PayloadError, _Context, _path_arg

__all__ = [
    "VCS_DIRECTORIES",
    "SearchReach",
    "check_search",
    "grep_output",
    "reachable_files",
    "search_rules",
]

VCS_DIRECTORIES = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
"""The directories Claude Code's Grep excludes (``--glob '!.git'`` …)."""

_OWN_IGNORE = "# ctxnb's own files: ripgrep (and Claude Code's Grep) does not search them\n*\n"
_SHOWN = 5  # refused files named in a refusal
_TIMEOUT = 30.0  # seconds ripgrep may take to list the files (Claude Code waits 60)
_GLOB_SPECIAL = "*?[{"


def search_rules(ctx: _Context) -> PathRules:
    """What a search may not reach: the files the sandbox hides from every command
    (the deny list, ``.git``, ``.ctxnb``). Governance's other files are protected from
    writes; a command reads them, and so may a search."""
    s = ctx.settings
    return PathRules([ctx.root], deny=[*s["deny"], ".git", ".ctxnb/"], protect=())


def check_search(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> SearchReach:
    """Refuse a Grep or Glob that can reach a hidden file (or leaves the workspace).

    Returns:
        What the search reaches, when nothing in it is refused.

    Raises:
        PolicyError: ``PATH_DENIED``, naming the files reached and how to narrow it.
    """
    reach = _reach(ctx, tool, tool_input)
    reached = reach.files
    roots = {str(ctx.root).rstrip("/") + "/", os.path.realpath(ctx.root).rstrip("/") + "/"}
    refused = list(search_rules(ctx).refused_among(_relative(roots, name) for name in reached))
    if not refused:
        refused = _links_of_denied(ctx, roots, reached)
    if not refused:
        return reach
    shown = ", ".join(f"{rel} ({rule})" for rel, rule in refused[:_SHOWN])
    more = f" and {len(refused) - _SHOWN} more" if len(refused) > _SHOWN else ""
    raise PolicyError(
        "PATH_DENIED",
        f"this {tool} reaches files that are refused to every tool: {shown}{more}",
        recoverable=True,
        required_action="Narrow the search so that it reaches none of them: a glob or "
        "type naming the files you want (e.g. glob '*.py'), or a path below them.",
        details={"rule": refused[0][1], "path": refused[0][0]},
    )


class SearchReach(NamedTuple):
    """A search as ripgrep runs it: the directory or file searched (canonical), the
    readings of its glob, its type, and the files it reaches (absolute)."""

    searched: str
    readings: list[list[str]]
    kind: str | None
    files: list[str]


def _reach(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> SearchReach:
    path = _path_arg(tool_input, "path")
    pattern = _path_arg(tool_input, "glob" if tool == "Grep" else "pattern")
    base = ctx.abs_path(path) if path else ctx.cwd
    if tool == "Glob" and pattern and pattern.startswith("/"):
        # Claude Code searches an absolute pattern from its fixed directory part.
        fixed, pattern = _split_absolute(pattern)
        base = ctx.abs_path(fixed)
    # The searched directory or file itself; ripgrep is then given its canonical name,
    # so that what it lists is named under the root without '.' or '//'.
    searched = str(ctx.policy.check(base).abs)
    if pattern:
        _check_pattern_text(pattern)
    kind = tool_input.get("type") if tool == "Grep" else None
    if kind is not None and not isinstance(kind, str):
        raise PayloadError(f"tool_input.type must be a string, got {type(kind).__name__}")
    _hide_own_directory(ctx)
    readings = _readings(tool, pattern, kind or None)
    files = reachable_files(tool, searched, pattern, kind or None, cwd=ctx.cwd)
    return SearchReach(searched, readings, kind or None, files)


def grep_output(ctx: _Context, tool_input: Mapping[str, Any], reach: SearchReach) -> str:
    """What Claude Code's Grep will print for this call, as ripgrep prints it with the
    call's pattern and output mode (``files_with_matches`` by default, ``content``,
    ``count``), case and context flags and ``head_limit``; the longest of the glob's
    readings. Used to charge a read budget before the search runs.

    Raises:
        PolicyError: ripgrep could not run or took too long: ctxnb cannot tell what the
            search returns.
    """
    from ..tools._ripgrep import find_ripgrep

    pattern = tool_input.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise PayloadError("a Grep call needs tool_input.pattern (a non-empty string)")
    rg = find_ripgrep()
    if rg is None:
        raise _unknown_reach("no ripgrep to run this Grep", "Ask the user to reinstall ctxnb.")
    mode = tool_input.get("output_mode") or "files_with_matches"
    flags: list[str] = ["--no-heading", "--with-filename", "--color=never"]
    if mode == "content":
        if tool_input.get("-n"):
            flags.append("--line-number")
        for key in ("-A", "-B", "-C"):
            n = tool_input.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                flags += [key, str(n)]
    elif mode == "count":
        flags.append("--count")
    else:
        flags.append("--files-with-matches")
    if tool_input.get("-i"):
        flags.append("--ignore-case")
    if tool_input.get("multiline"):
        flags += ["--multiline", "--multiline-dotall"]
    head = tool_input.get("head_limit")
    longest = ""
    for extra in reach.readings:
        argv = [rg, "--hidden", "--no-messages", *extra, *flags, "-e", pattern, "--"]
        try:
            proc = subprocess.run(
                [*argv, reach.searched], cwd=ctx.cwd, capture_output=True, timeout=_TIMEOUT
            )
        except (subprocess.TimeoutExpired, OSError) as e:
            raise _unknown_reach(
                f"running this Grep to size it failed ({e})", "Search a smaller directory."
            ) from None
        out = os.fsdecode(proc.stdout)
        if isinstance(head, int) and not isinstance(head, bool) and head > 0:
            out = "".join(out.splitlines(keepends=True)[:head])
        longest = max(longest, out, key=len)
    return longest


def _readings(tool: str, pattern: str | None, kind: str | None) -> list[list[str]]:
    """ripgrep's arguments for each reading of the call's glob (and type)."""
    if tool == "Glob":
        assert pattern is not None
        return [["--no-ignore", "--glob-case-insensitive", "--glob", pattern.removeprefix("./")]]
    common = [arg for d in VCS_DIRECTORIES for arg in ("--glob", f"!{d}")]
    if kind:
        common += ["--type", kind]
    return [[*common, *(a for g in globs for a in ("--glob", g))] for globs in _grep_globs(pattern)]


def reachable_files(
    tool: str, base: str, pattern: str | None, kind: str | None, *, cwd: str
) -> list[str]:
    """The files Claude Code's ``tool`` searches, as ripgrep lists them (absolute).

    Raises:
        PolicyError: ripgrep is missing, refused the arguments, or took too long
            (ctxnb then cannot tell what the search reaches).
    """
    from ..tools._ripgrep import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        raise _unknown_reach(
            f"no ripgrep to list the files this {tool} reaches",
            "Ask the user to reinstall ctxnb (its 'ripgrep' dependency ships rg).",
        )
    readings = _readings(tool, pattern, kind)
    found: set[str] = set()
    for extra in readings:
        argv = [rg, "--files", "--null", "--hidden", "--no-messages", *extra, "--", base]
        try:
            proc = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise _unknown_reach(
                f"listing the files this {tool} reaches took over {_TIMEOUT:.0f} s",
                "Search a smaller directory (path).",
            ) from None
        except OSError as e:
            raise _unknown_reach(
                f"ripgrep could not run ({e})", "Ask the user to check ctxnb's install."
            ) from None
        if proc.returncode == 2 and not proc.stdout:
            why = os.fsdecode(proc.stderr).strip().splitlines()
            raise _unknown_reach(
                f"ripgrep refused this {tool}'s arguments ({why[0] if why else 'no reason given'})",
                "Fix the glob or type.",
            )
        found.update(os.fsdecode(p) for p in proc.stdout.split(b"\0") if p)
    return sorted(found)


def _links_of_denied(ctx: _Context, roots: set[str], reached: list[str]) -> list[tuple[str, str]]:
    """The reached files that are hard links of a denied file (``notes.txt``, the same
    inode as ``.env``): ripgrep would print the denied bytes under the other name. Only
    a file with several links is looked at further (:mod:`ctxnb.access.identity`)."""
    out = []
    for name in reached:
        try:
            st = os.lstat(name)
        except OSError:
            continue
        if st.st_nlink > 1:
            rule = ctx.policy.denied_by_identity(st)
            if rule is not None:
                out.append((_relative(roots, name), rule))
    return out


def _grep_globs(pattern: str | None) -> list[list[str]]:
    """The readings of Grep's ``glob``: none, the string as one glob, and (when they
    differ) the globs it holds split at blanks and at commas outside braces, as some
    Claude Code versions pass it."""
    if not pattern:
        return [[]]
    split: list[str] = []
    for word in pattern.split():
        if "{" in word and "}" in word:
            split.append(word)
        else:
            split += [w for w in word.split(",") if w]
    return [[pattern]] if split == [pattern] else [[pattern], split]


def _split_absolute(pattern: str) -> tuple[str, str]:
    """An absolute glob as its fixed directory and the rest (``/ws/src/*.py`` →
    ``/ws/src``, ``*.py``)."""
    cut = min((pattern.index(c) for c in _GLOB_SPECIAL if c in pattern), default=len(pattern))
    head = pattern[:cut]
    slash = head.rfind("/")
    return (pattern[:slash] or "/", pattern[slash + 1 :])


def _check_pattern_text(pattern: str) -> None:
    """A pattern with a ``..`` component is refused by its text: what it reaches above
    the searched directory is not what the listing below looks at."""
    if ".." in pattern.split("/"):
        raise PolicyError(
            "PATH_DENIED",
            f"the pattern {pattern!r} is refused: it contains a '..' component (rule: traversal)",
            recoverable=True,
            required_action="Use a pattern without '..' components; search another "
            "directory with path.",
            details={"rule": "traversal", "path": pattern},
        )


def _hide_own_directory(ctx: _Context) -> None:
    """Put ``.ctxnb/.ignore`` (``*``) in place, so that ripgrep skips ctxnb's own files
    in every search (the store, the audit log, held overlays). Written by ctxnb only:
    ``.ctxnb`` is refused to every agent tool and absent in the sandbox."""
    try:
        fd = os.open(os.path.join(ctx.root, ".ctxnb"), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return  # no .ctxnb (or not a directory): nothing to hide
    try:
        out = os.open(
            ".ignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd
        )
        try:
            os.write(out, _OWN_IGNORE.encode())
        finally:
            os.close(out)
    except OSError:
        pass  # already there; or not writable, and then a search reaching it is refused
    finally:
        os.close(fd)


def _relative(roots: set[str], name: str) -> str:
    """A listed file relative to the workspace root (ripgrep names it under the searched
    path, which the policy found inside the root, as given or as its real path)."""
    for root in roots:
        if name.startswith(root):
            return name[len(root) :]
    # Not under the root: cannot be judged by name, so it counts as refused.
    return "/" + name.lstrip("/")


def _unknown_reach(why: str, action: str) -> PolicyError:
    # Fail closed: a search whose reach cannot be listed is not let through.
    return PolicyError(
        "PATH_DENIED",
        f"ctxnb cannot tell which files this search reaches: {why}",
        recoverable=True,
        required_action=action,
        details={"rule": "search-reach"},
    )
