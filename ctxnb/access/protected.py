"""The derived protected set: what runs on the host, computed from the workspace's real files.

Governance's own files (:data:`~ctxnb.access.pathrules.GOVERNANCE`) are a fixed list of
names. What those files *name* is not: a Claude Code hook script, git's
``core.hooksPath``, a filter program, a project ``.venv``'s ``site-packages``, ctxnb's
own source when it is installed editable from the workspace. Each runs on the host,
outside the sandbox, the next time Claude Code, git, Python or ctxnb starts; an agent
that could write one would run its code there. This module derives that set from the
files and programs that decide it (:mod:`ctxnb.access._whatruns` reads them):

* the commands Claude Code's settings and ``.mcp.json`` name, and the files they name;
* git's effective hooks directory (asked of git), the configuration files git read and
  what they name (``include.path``, filters, ``core.fsmonitor``, ``credential.helper`` …);
* every Python environment inside the workspace, whole (``pyvenv.cfg``, ``conda-meta/``,
  the one ctxnb runs in, ``$VIRTUAL_ENV``), and the workspace's directories on ``PATH``;
  an environment below the top level is known by its marker when a write is judged;
* where the import system loads ctxnb from, when that is inside the workspace;
* the programs ctxnb's own settings start (an outside MCP server's command);
* what all of these run in turn: the files a protected script names, the modules a
  protected Python script imports from beside it, what git's hooks read;
* and, by name, :data:`STATIC`: byte code (``__pycache__/``, ``*.pyc``), ``sitecustomize``
  and ``usercustomize`` packages, ``pyvenv.cfg``, Claude Code's subagents, skills and
  commands.

A :class:`ProtectedSet` may be read but is never written: every agent-facing
:class:`~ctxnb.access.fdio.PathPolicy` refuses to write or delete in it (rule
``protected:<glob>``), and a sandboxed command's changes to it are dropped, never
committed or offered for approval. It is computed once per session
(:attr:`ctxnb.access.door.Access.protected`) and its :attr:`ProtectedSet.sha256` is
recorded with the settings' hash in each commit's trace record. A Claude Code hook is a
new process on every call: :func:`protected_set` keeps the set in the hook's state
directory, keyed by the files it was derived from, and derives it again only when one
of them changed.

Example:
    >>> import json, pathlib, tempfile
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> (ws / ".claude").mkdir()
    >>> hook = {"type": "command", "command": "$CLAUDE_PROJECT_DIR/.claude/hooks/fmt.sh"}
    >>> settings = {"hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [hook]}]}}
    >>> _ = (ws / ".claude" / "settings.json").write_text(json.dumps(settings))
    >>> protected = protected_set(ws, env={})
    >>> protected.refusal((".claude", "hooks", "fmt.sh"))[0]
    '/.claude/hooks/fmt.sh'
    >>> protected.refusal(("src", "app.py")) is None
    True
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..hashing import sha256_hex, stable_stringify
from .pathrules import folded

__all__ = [
    "STATIC",
    "ProtectedSet",
    "path_dirs",
    "project_dirs",
    "protected_set",
    "top_dirs",
]

_BYTE_CODE = "byte code runs instead of its reviewed source"
STATIC: tuple[tuple[str, str], ...] = (
    ("__pycache__/", _BYTE_CODE),
    ("*.pyc", _BYTE_CODE),
    ("*.pyo", _BYTE_CODE),
    ("sitecustomize/", "a sitecustomize package runs at Python's start-up"),
    ("usercustomize/", "a usercustomize package runs at Python's start-up"),
    ("pyvenv.cfg", "it makes its directory a Python environment whose start-up code runs"),
    ("**/.claude/agents/", "Claude Code's subagents can run hooks and commands on the host"),
    ("**/.claude/skills/", "Claude Code's skills can run hooks and commands on the host"),
    ("**/.claude/commands/", "Claude Code's commands can run shell commands on the host"),
)
"""Protected by name wherever they are, whatever the workspace's files say: (glob, why).
Matched by :func:`_static` (names compared, no pattern compiled: a hook process builds
its set once per call)."""

_STATIC_DIRS = {"__pycache__": 0, "sitecustomize": 3, "usercustomize": 4}
_STATIC_SUFFIXES = ((".pyc", 1), (".pyo", 2))
_CLAUDE_DIRS = {"agents": 6, "skills": 7, "commands": 8}

_ENV_MARKERS = ("pyvenv.cfg", "conda-meta")
_ENV_WHY = (
    "it is in a Python environment ({}): its start-up code (site-packages, .pth, "
    "activate scripts) and programs run on the host"
)

_FORMAT = 3  # of the cached form; a change to the derivation bumps it
# The environment variables the derivation reads (and git's own, GIT_*).
_ENV_KEYS = frozenset(
    {
        "PATH",
        "HOME",
        "XDG_CONFIG_HOME",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_CONFIG_DIR",
    }
)
# A source file whose modification time is this close to the derivation's start may have
# changed while it was read (the kernel stamps files with a clock of a few milliseconds'
# resolution): the set derived from it is used, not cached.
_SETTLED_NS = 50_000_000


def _static(form: tuple[str, ...]) -> int | None:
    """The index in :data:`STATIC` of the rule that names ``form`` (lower-cased names),
    or None. As the globs would with the kind unknown, a name matches as a file or a
    directory, and a directory protects what is in it."""
    for i, name in enumerate(form):
        hit = _STATIC_DIRS.get(name)
        if hit is not None:
            return hit
        if name == ".claude" and i + 1 < len(form):
            hit = _CLAUDE_DIRS.get(form[i + 1])
            if hit is not None:
                return hit
    last = form[-1]
    for suffix, hit in _STATIC_SUFFIXES:
        if last.endswith(suffix):
            return hit
    return 5 if last == "pyvenv.cfg" else None


class ProtectedSet:
    """The paths of one workspace that run on the host: never written by an agent.

    Args:
        root: the workspace root.
        entries: workspace-relative path → why it is protected (a directory protects
            everything in it); :data:`STATIC` is always added.

    Attributes:
        entries: the derived paths and their reasons, sorted by path.

    Example:
        >>> import pathlib, tempfile
        >>> ps = ProtectedSet(pathlib.Path(tempfile.mkdtemp()), {"tools/hooks": "git runs it"})
        >>> ps.refusal(("tools", "hooks", "pre-commit"))
        ('/tools/hooks', 'git runs it')
        >>> ps.refusal(("TOOLS", "Hooks", "pre-commit"))[0]  # case-insensitive, as denial
        '/tools/hooks'
        >>> ps.refusal(("src", "__pycache__", "app.cpython-311.pyc"))[0]
        '__pycache__/'
    """

    __slots__ = ("_derived", "_sha256", "entries", "root")

    def __init__(self, root: str | os.PathLike[str], entries: Mapping[str, str]) -> None:
        self.root = Path(root)
        self.entries: dict[str, str] = dict(sorted(entries.items()))
        # Every form of each entry's names that denial matches (as written, lower-cased,
        # NFKC, trailing dots and spaces stripped) → the entry.
        derived: dict[tuple[str, ...], str] = {}
        for rel in self.entries:
            parts = tuple(p for p in rel.split("/") if p)
            for form in (parts, *folded(parts)):
                derived.setdefault(form, rel)
        self._derived = derived
        self._sha256: str | None = None

    @property
    def sha256(self) -> str:
        """A hash of the static globs and the derived entries (recorded with commits)."""
        if self._sha256 is None:
            data = {"static": [list(s) for s in STATIC], "derived": self.entries}
            self._sha256 = sha256_hex(stable_stringify(data))
        return self._sha256

    def refusal(self, parts: tuple[str, ...]) -> tuple[str, str] | None:
        """``(glob, why)`` when the workspace-relative path ``parts`` is protected: it
        or a directory above it is derived, or a :data:`STATIC` name matches."""
        if not parts:
            return None
        forms = folded(parts)
        derived = self._derived
        for form in (parts, *forms):
            for n in range(1, len(form) + 1):
                rel = derived.get(form[:n])
                if rel is not None:
                    return "/" + rel, self.entries[rel]
        for form in forms:
            hit = _static(form)
            if hit is not None:
                return STATIC[hit]
        return self._environment(parts)

    def _environment(self, parts: tuple[str, ...]) -> tuple[str, str] | None:
        """``(glob, why)`` when a directory above ``parts`` is a Python environment (it
        holds ``pyvenv.cfg`` or ``conda-meta/``), wherever it lies: known by what it is
        when a write is judged, one look per directory above the path, where a walk of
        the workspace at derivation would cost every hook call."""
        base = os.fspath(self.root)
        for n in range(1, len(parts)):
            here = os.path.join(base, *parts[:n])
            for marker in _ENV_MARKERS:
                if os.path.lexists(os.path.join(here, marker)):
                    rel = "/".join(parts[:n])
                    return "/" + rel, _ENV_WHY.format(f"{rel}/{marker}")
        return None

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"ProtectedSet({str(self.root)!r}, {len(self.entries)} derived paths)"

    def to_dict(self) -> dict[str, Any]:
        """The set as JSON data: the static globs, the derived paths and the hash."""
        return {
            "static": [glob for glob, _ in STATIC],
            "derived": dict(self.entries),
            "sha256": self.sha256,
        }


def project_dirs(
    root: str | os.PathLike[str], cwd: str | None, env: Mapping[str, str]
) -> list[str]:
    """The directories Claude Code may take its project settings from: the workspace
    root, and each directory from it down to ``cwd`` and ``$CLAUDE_PROJECT_DIR`` (Claude
    Code started in a subfolder reads that folder's ``.claude/``)."""
    base = os.path.realpath(root)
    out = [base]
    for start in (cwd, env.get("CLAUDE_PROJECT_DIR")):
        if not start or not os.path.isabs(start):
            continue
        real = os.path.realpath(start)
        if not real.startswith(base + "/"):
            continue
        here = base
        for name in real[len(base) + 1 :].split("/"):
            here = f"{here}/{name}"
            if here not in out:
                out.append(here)
    return out


def path_dirs(path: str, roots: Sequence[str]) -> list[str]:
    """The absolute directories of a ``PATH`` value that lie in one of ``roots`` by name
    (the only part of ``PATH`` the set depends on)."""
    out = []
    for entry in path.split(os.pathsep):
        if os.path.isabs(entry):
            norm = os.path.normpath(entry)
            if any(norm.startswith(r + "/") for r in roots):
                out.append(norm)
    return out


# Never an environment to find: governance's own directories (protected as names).
_NOT_ENVIRONMENTS = frozenset({".git", ".ctxnb", ".orchestration"})


def top_dirs(root: str) -> list[str]:
    """The names of the workspace's top-level directories (not links) where a Python
    environment may lie: a new one is a new name (files added beside them are not)."""
    try:
        with os.scandir(root) as it:
            names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(n for n in names if n not in _NOT_ENVIRONMENTS)


def _context(
    roots: list[str], bases: list[str], top: list[str], on_path: list[str], env: Mapping[str, str]
) -> list[Any]:
    """What the derivation depends on besides the files it reads. Of ``PATH``, only the
    workspace's directories count: a hook and a Bash command may see other ``PATH``s."""
    keys = sorted(k for k in env if (k in _ENV_KEYS or k.startswith("GIT_")) and k != "PATH")
    ctxnb = sys.modules.get("ctxnb")
    return [
        _FORMAT,
        roots,
        bases,
        top,
        on_path,
        [[k, env[k]] for k in keys],
        os.path.realpath(sys.executable),
        [os.fspath(p) for p in getattr(ctxnb, "__path__", [])],
    ]


def protected_set(
    root: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    state_dir: Path | None = None,
) -> ProtectedSet:
    """Derive the protected set of the workspace ``root`` from its real files.

    Args:
        root: the workspace root.
        env: the environment the host's programs run with (``HOME``, ``PATH``,
            ``$CLAUDE_PROJECT_DIR``, git's variables); ``os.environ`` by default.
        cwd: where the agent client runs (its ``.claude/`` settings count too).
        state_dir: keep the set there (``cache/protected.json``), keyed by the files
            it was derived from, and derive it again only when one of them changed.

    Raises:
        ConfigError: a settings file that names commands cannot be read (invalid JSON):
            ctxnb cannot tell what it runs, so it stops.
    """
    from .._util.jsoncache import file_key, write_json_atomic

    env = os.environ if env is None else env
    real = os.path.realpath(root)
    roots = list(dict.fromkeys((real, os.path.abspath(root))))
    bases = project_dirs(real, cwd, env)
    top, on_path = top_dirs(real), path_dirs(env.get("PATH") or "", roots)
    context = _context(roots, bases, top, on_path, env)
    cache = state_dir / "cache" / "protected.json" if state_dir is not None else None
    if cache is not None:
        entries = _cached(cache, context)
        if entries is not None:
            return ProtectedSet(root, entries)
    from ._whatruns import derive

    started = time.time_ns()
    found = derive(root, bases, env, top=top, on_path=on_path)
    protected = ProtectedSet(root, found.entries)
    if cache is not None:
        files = [(path, file_key(path)) for path in sorted(found.read)]
        settled = all(k is None or k[1] < started - _SETTLED_NS for _, k in files)
        if settled:
            write_json_atomic(
                cache,
                {
                    "context": context,
                    "files": [list(f) for f in files],
                    "entries": protected.entries,
                },
            )
    return protected


def _cached(cache: Path, context: list[Any]) -> dict[str, str] | None:
    """The cached entries when the context is the same and no file read has changed."""
    import json

    from .._util.jsoncache import file_key

    try:
        with open(cache, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("context") != context:
        return None
    files, entries = data.get("files"), data.get("entries")
    if not isinstance(files, list) or not isinstance(entries, dict):
        return None
    for item in files:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return None
        if file_key(item[0]) != item[1]:
            return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
        return None
    return entries
