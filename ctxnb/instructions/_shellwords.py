"""The paths a shell command or a patch names: the words the tier-3 tracker reads.

A command touches a nested ``AGENTS.md``'s subtree through its file arguments and
redirections (``cat pkg/x.py``, ``python pkg/x.py > out.txt``) or a patch header; these
helpers pick those words out, cheaply, before the index resolves them to workspace paths.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import CtxnbError
from ..shell.risk import classify_command

# --------------------------------------------------------------------------- shell words

_EXTENSION = re.compile(r"\.[A-Za-z0-9_]{1,12}$")
_NOT_PATH = re.compile(r"[\n$`'\"\\]|://|^-|^~|^\s|\s$")
# Redirection targets, read off the raw text: the classifier leaves out reads (``<``)
# and writes outside the working directory (``> ../x``), which still touch files.
_REDIRECT = re.compile(r"(?:(?<![<\d])<(?![<(&])|>{1,2}\|?)\s*([^\s<>|&;()'\"]+)")
# Programs whose first operand is a pattern or a script, unless given with -e/-f.
_PATTERN_FIRST = frozenset(
    {"sed", "grep", "egrep", "fgrep", "rg", "ag", "ack", "awk", "gawk", "mawk", "jq"}
)
# Options whose value is code or a pattern, not a file.
_CODE_OPTIONS = frozenset({"-c", "-e", "--expression", "--regexp", "-m", "--eval"})


def _pathish_word(word: str) -> bool:
    return bool(word) and not _NOT_PATH.search(word)


def _path_words(argv: list[str]) -> list[str]:
    """The words of one simple command that may name files."""
    prog = posixpath.basename(argv[0])
    words = [argv[0]] if "/" in argv[0] else []
    skip_pattern = prog in _PATTERN_FIRST
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in _CODE_OPTIONS:
            # sed -e / grep -e give the pattern explicitly: every operand is then a file
            skip_pattern = skip_pattern and word not in ("-e", "--expression", "--regexp")
            i += 2
            continue
        if word.startswith("-"):
            if word.startswith("--") and "=" in word:
                words.append(word.split("=", 1)[1])
            elif word == "-f" and skip_pattern:
                skip_pattern = False  # the script comes from a file named next
            i += 1
            continue
        if skip_pattern:
            skip_pattern = False
        else:
            words.append(word)
        i += 1
    return words


_PATCH_FILE = re.compile(
    r"^(?:\*\*\* (?:Add|Update|Delete) File: (.+?)|\*\*\* Move to: (.+?)"
    r"|(?:---|\+\+\+) (?:[ab]/)?([^\t\n]+?))\s*$",
    re.M,
)
_PATH_KEYS: tuple[str, ...] = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "target_file",
    "notebook_path",
    "dir_path",
    "directory",
    "source",
    "destination",
    "old_path",
    "new_path",
)
_CWD_KEYS = ("cwd", "workdir", "working_directory")
_ARG_KINDS: dict[str, str] = {
    **dict.fromkeys(_PATH_KEYS, "path"),
    **dict.fromkeys(("paths", "files", "file_paths"), "paths"),
    **dict.fromkeys(("cmd", "command", "script"), "cmd"),
    **dict.fromkeys(("patch", "input", "diff"), "patch"),
}
# For the quick pre-check of shell commands: words are split on whitespace, operators,
# quotes' neighbours and "=" (so --out=x.py yields x.py).
_QUICK_SPLIT = re.compile(r"[\s;|&<>()=`$]+")
_CHANGES_DIR = re.compile(r"(?:^|[\s;&|(])(?:cd|pushd)(?:\s|$)")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")


def _quoted_path_with_space(cmd: str) -> bool:
    # The quick split would cut such a path in two and look in the wrong directory.
    if "\\ " in cmd:
        return True
    return any("/" in q and any(c.isspace() for c in q) for q in _QUOTED.findall(cmd))


def _patch_paths(text: str) -> list[str]:
    out = []
    for m in _PATCH_FILE.finditer(text):
        p = m.group(1) or m.group(2) or m.group(3)
        if p and p != "/dev/null":
            out.append(p.strip())
    return out


# ------------------------------------------------------------------- paths of a command


class CommandPaths:
    """The paths a command names, read as :class:`~ctxnb.instructions.RulesIndex` keys
    them (the index holds one and answers ``relative`` and ``paths_in_command`` with it).

    Args:
        root: the workspace root.
        resolve: makes an absolute agent path a host path through the workspace's mounts.
        has_rules: whether a workspace-relative directory has rules files (a bare word
            naming such a directory counts as a path).
    """

    def __init__(
        self,
        root: Path,
        *,
        resolve: Callable[[str], str] | None,
        has_rules: Callable[[str], bool],
    ) -> None:
        self.root = root
        self._root_prefix = str(root).rstrip("/") + "/"
        self._resolve = resolve
        self._has_rules = has_rules

    def relative(self, path: str, cwd: str = "") -> str | None:
        """A path as the index keys it (see :meth:`ctxnb.instructions.RulesIndex.relative`)."""
        if path.startswith("/"):
            if not path.startswith(self._root_prefix) and self._resolve is not None:
                try:
                    path = self._resolve(path)
                except CtxnbError:
                    return None
            if not path.startswith(self._root_prefix):
                return "" if path.rstrip("/") == str(self.root) else None
            path = path[len(self._root_prefix) :]
        elif cwd:
            path = f"{cwd}/{path}"
        rel = posixpath.normpath(path)
        if rel == ".":
            return ""
        if rel == ".." or rel.startswith("../"):
            return None
        return rel

    def paths_in_command(self, cmd: str | Sequence[str], *, cwd: str = "") -> list[str]:
        """The workspace files a shell command names (see
        :meth:`ctxnb.instructions.RulesIndex.paths_in_command`)."""
        writes: list[str] = []

        def collect(target: str) -> bool:
            writes.append(target)
            return True

        try:
            words = cmd if isinstance(cmd, str) else list(cmd)
            found = classify_command(words, scope_check=collect, unknown_default="SAFE")
        except (ValueError, TypeError):  # pragma: no cover - the classifier never raises
            return []
        out: dict[str, None] = {}
        here = cwd
        for argv in found.commands:
            if len(argv) == 2 and argv[0] in ("cd", "pushd"):
                moved = self.relative(argv[1], here) if _pathish_word(argv[1]) else None
                here = moved if moved is not None else here
                continue
            for word in _path_words(argv):
                self._keep(word, here, out)
        for word in writes:
            self._keep(word, here, out)
        if isinstance(cmd, str):
            for m in _REDIRECT.finditer(cmd):
                self._keep(m.group(1), here, out)
        return list(out)

    def _keep(self, word: str, cwd: str, out: dict[str, None]) -> None:
        if not _pathish_word(word):
            return
        rel = self.relative(word, cwd)
        if rel is None or not rel:
            return
        if "/" in word or _EXTENSION.search(word) or self._has_rules(rel):
            out.setdefault(rel, None)
