"""The path rules: which names a governed tool may touch (lexical, no I/O).

Every path argument of every file tool, and every name the indexer, a session or the
rules tracker meets on disk, is judged by one :class:`PathRules` (the I/O half,
:class:`~ctxnb.access.fdio.PathPolicy`, adds the race-free descriptor walk).
There is one deny list, :data:`DEFAULT_DENY`, and one list of governance's own files,
:data:`GOVERNANCE`, that no agent tool may touch whatever its scope.

Example:
    >>> import pathlib, tempfile
    >>> rules = PathRules([pathlib.Path(tempfile.mkdtemp())])
    >>> rules.denied_by(".env"), rules.denied_by("src/app.py")
    ('deny:.env*', None)

The rules, in the order they are applied (the first one that fails names itself in the
``PolicyError``; its ``error_code`` is ``PATH_DENIED`` and ``details["rule"]`` is the
rule's name):

* ``empty`` (also a blank name such as ``" /x"``), ``not-a-string``, ``nul-byte``,
  ``control-char`` (C0/C1 controls and the bidirectional overrides used to disguise
  names), ``unencodable`` (a name that is not valid UTF-8: ctxnb keeps paths as text).
* ``path-too-long`` (more than ``max_path_bytes`` bytes, 4096 by default) and
  ``component-too-long`` (a name over 255 bytes).
* ``backslash``: a backslash is refused outright, because agents send Windows paths
  (``..\\..\\x``) and on POSIX the whole thing would be one odd file name.
* ``home-tilde``: a leading ``~`` is refused, never expanded.
* ``traversal``: any ``..`` component is refused, even ``a/../b``. Resolving ``..``
  lexically disagrees with the kernel when ``a`` is a symbolic link, so ctxnb does not
  try. ``.`` components and repeated slashes are dropped.
* ``unicode-lookalike``: a path whose NFKC form has a different shape (``．．／x``
  becomes ``../x``) is refused; deny globs are also matched against the NFKC form.
* ``outside-roots``: a relative path is relative to the first root. An absolute path is
  accepted only when it lies inside a root, compared whole component by component
  against the root as configured or its real path, so ``/ws_evil`` never matches the
  root ``/ws``. The path is then handled as the relative remainder.
* ``reserved-name``: names starting with ``.ctxnb-tmp-`` belong to atomic writes.
* ``deny:<glob>``: deny globs use gitignore semantics, matched as git matches them
  (:class:`ctxnb._util.wildmatch.GlobList`): a pattern without a slash matches at any depth,
  a trailing slash matches directories only and everything inside them. Denial is matched
  case-insensitively, and also after NFKC normalization and after stripping trailing
  dots and spaces from names (what Windows and some network filesystems do), so
  ``.GIT/config``, ``.ｅnv`` and ``.env.`` are all refused; a name composed (NFC) or
  decomposed (NFD) matches a glob spelled the other way. Every ancestor directory is
  matched too: nothing inside a denied directory can be re-included. Deny always wins
  over allow. :data:`DEFAULT_DENY` covers ``.git`` (directory, and the ``.git`` file of
  worktrees and submodules), ``.env*``, ``*.pem``, ``id_*`` and ``.ctxnb/``.
* ``not-allowed``: when allow globs are given, a file must match one of them
  (case-sensitively, gitignore semantics). Directories are not subject to allow globs;
  :meth:`PathPolicy.iter_files` only yields allowed files.
* ``symlink``, ``special-file``, ``not-a-regular-file``, ``trailing-slash`` and
  ``identity:<denied path>`` (a hard link of a denied file) are the rules of the I/O
  itself; :mod:`ctxnb.access.fdio` states them.
* Percent-encoded names are literal names: ``%2e%2e%2f`` is a file called
  ``%2e%2e%2f`` inside the root, never decoded.
* ``governance:<glob>``: a policy made for an agent (``protect=GOVERNANCE``) refuses
  governance's own files (``.orchestration/``, ``.ctxnb/``, ``ctxnb.toml``) whatever
  the deny and allow globs say.
* ``protected:<glob>`` (writes only): a policy made for an agent also refuses to write
  or delete what runs on the host, derived from the workspace's real files
  (:mod:`ctxnb.access.protected`): the scripts its configuration names, its Python
  environments, ctxnb's own source when it lies here, byte code.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .._util.wildmatch import GlobList
from ..errors import ConfigError, PolicyError
from ._safepath import SafePath, _Parsed, _Root

if TYPE_CHECKING:
    from .protected import ProtectedSet

__all__ = [
    "DEFAULT_DENY",
    "GOVERNANCE",
    "MAX_PATH_BYTES",
    "SKILLS_DIR",
    "TEMP_PREFIX",
    "PathRules",
    "governance_reason",
    "SafePath",
    "in_agent_terms",
    "map_mount_prefix",
    "skills_readable",
]

DEFAULT_DENY: tuple[str, ...] = (".git", ".env*", "**/*.pem", "**/id_*", ".ctxnb/")
"""Deny globs used when ``deny`` is not given (gitignore semantics).

``.git`` without a trailing slash matches the directory and the ``.git`` file of
worktrees and submodules alike."""

GOVERNANCE: tuple[str, ...] = (
    ".orchestration/",
    ".ctxnb/",
    "/ctxnb.toml",
    ".git",
    # At any depth: Claude Code started in a subdirectory reads that directory's own.
    "**/.claude/settings*.json",
    ".mcp.json",
    "*.pth",
    "sitecustomize.py",
    "usercustomize.py",
    ".envrc",
)
"""Governance's own files, and every file from which ctxnb, the agent client, git or
Python takes configuration or code it runs on its own: intents, trace, audit, store,
hook state, ctxnb's settings, Claude Code's settings and MCP servers, git's
repository (hooks, ``core.fsmonitor``), Python start-up files (``*.pth``,
``sitecustomize.py``, ``usercustomize.py``) and direnv's ``.envrc``. Refused to every
agent tool and never committed from a sandbox, whatever the intent's scope; a human may
still change them. ``pyproject.toml`` is governance only in its ``[tool.ctxnb]`` table
(see :func:`ctxnb.config.tool_ctxnb_changed`)."""

_GOVERNANCE_SPEC: GlobList | None = None


def governance_reason(rel: str) -> str | None:
    """Why a change to the workspace-relative ``rel`` is governance's, or None.

    Matched case-insensitively, every ancestor too, whatever the deny list says.

    Example:
        >>> governance_reason("venv/lib/site-packages/evil.pth")
        "governance file (matches '*.pth'): never written by an agent"
        >>> governance_reason(".git/config"), governance_reason("src/app.py")
        ("governance file (matches '.git'): never written by an agent", None)
    """
    global _GOVERNANCE_SPEC
    if _GOVERNANCE_SPEC is None:
        _GOVERNANCE_SPEC = GlobList([g.lower() for g in GOVERNANCE])
    hit = _GOVERNANCE_SPEC.match(rel.lower(), is_dir=None)
    if hit is None:
        return None
    return f"governance file (matches {GOVERNANCE[hit]!r}): never written by an agent"


SKILLS_DIR = ".ctxnb/skills"
"""ctxnb's own skills folder: inside the denied ``.ctxnb/``, read by ctxnb on purpose."""


def skills_readable(deny: Sequence[str]) -> tuple[str, ...]:
    """Deny globs for ctxnb's own reads of skills: ``.ctxnb/`` stays denied but for
    :data:`SKILLS_DIR` (the rest of it is the store, the audit log and hook state).

    Example:
        >>> skills_readable(DEFAULT_DENY)[-2:]
        ('.ctxnb/*', '!.ctxnb/skills')
    """
    out: list[str] = []
    for glob in deny:
        if glob.rstrip("/") in (".ctxnb", "/.ctxnb"):
            out += [".ctxnb/*", f"!{SKILLS_DIR}"]
        else:
            out.append(glob)
    return tuple(out)


MAX_PATH_BYTES = 4096
"""The longest path accepted by default, in bytes of its filesystem encoding."""

TEMP_PREFIX = ".ctxnb-tmp-"
"""Name prefix of the temporary files of atomic writes; such names are reserved."""

NAME_MAX = 255  # bytes per name on every filesystem ctxnb targets (ext4, APFS, xfs, btrfs)

# Characters that make a name look like something it is not: bidirectional overrides
# and isolates (the "Trojan Source" family). C0/C1 controls are caught by category.
_PARSE_CACHE_MAX = 1 << 16  # accepted path strings remembered per policy
_ASCII_CC = re.compile("[\x00-\x1f\x7f]")
_ASCII_CC_OR_BACKSLASH = re.compile("[\x00-\x1f\x7f\\\\]")
_ODD_END = re.compile(r"[. ](?:/|$)")  # a name Windows would strip (the rules fold it)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

_REQUIRED_ACTION = {
    "empty": "Pass a non-empty path relative to the workspace root.",
    "not-a-string": "Pass the path as a str.",
    "nul-byte": "Remove the NUL byte from the path.",
    "control-char": "Remove control and bidirectional-override characters from the path.",
    "unencodable": "Pass a path that is valid UTF-8 (no lone surrogates); rename a file "
    "whose name is not.",
    "path-too-long": "Use a shorter path.",
    "component-too-long": "Use names of at most 255 bytes.",
    "backslash": "Use '/' as the separator; backslashes are not accepted.",
    "home-tilde": "Use a path relative to the workspace root; '~' is not expanded.",
    "traversal": "Use a path without '..' components, relative to the workspace root.",
    "unicode-lookalike": "Use plain characters for '.', '/' and '~' in the path.",
    "outside-roots": "Use a path inside one of the workspace roots.",
    "reserved-name": "Pick another name; '.ctxnb-tmp-' names are reserved for atomic writes.",
    "deny": "This path is protected by the deny list; work on another file.",
    "identity": "This file is a denied file under another name (a hard link): the deny "
    "list protects its bytes whatever they are called; work on another file.",
    "governance": "Governance's files are changed by governance only (select_active_intent, "
    "the intents file edited by a human); work on another file.",
    "protected": "This file is run or imported on the host, outside the sandbox; a human "
    "changes it. Work on another file.",
    "not-allowed": "Use a path that matches the allow list.",
    "symlink": "Use the path of the link's target inside the workspace; links are not followed.",
    "special-file": "Only regular files and directories can be used.",
    "not-a-regular-file": "Name a regular file, not a directory.",
    "trailing-slash": "Remove the trailing '/': it names a directory.",
}


def _short(text: str, limit: int = 120) -> str:
    # Refusals go back to agents and into logs; a 5000-byte hostile path must not.
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit} chars)"


def _deny(display: str, rule: str, why: str, **details: str) -> NoReturn:
    base = rule.split(":", 1)[0]
    raise PolicyError(
        "PATH_DENIED",
        f"Path {_short(display)!r} is refused: {why} (rule: {rule}).",
        recoverable=True,
        required_action=_REQUIRED_ACTION.get(base, "Use another path."),
        details={"path": _short(display, 512), "rule": rule, **details},
    )


def _glob_lines(patterns: Sequence[str], what: str) -> list[str]:
    """The globs of a list setting, refused unless it is a list of strings."""
    if isinstance(patterns, str):
        raise ConfigError(f"{what} must be a list of glob strings, not the string {patterns!r}")
    bad = [p for p in patterns if not isinstance(p, str)]
    if bad:
        raise ConfigError(f"Bad {what} glob {bad[0]!r}: each glob must be a string")
    return [p for p in patterns if p.strip() and not p.lstrip().startswith("#")]


def _build_spec(
    patterns: Sequence[str], what: str, *, what_of: Callable[[str], str] | None = None
) -> tuple[GlobList, list[str]]:
    """The globs compiled, refused if one can never match (``what_of`` names the list a
    line came from, when one spec holds several lists)."""
    lines = _glob_lines(patterns, what)
    globs = GlobList(lines)
    never = globs.malformed()
    if never:
        # git would silently match nothing; a deny or allow list must not fail that way.
        raise ConfigError(
            f"Bad {what_of(never[0]) if what_of else what} glob {never[0]!r}: it can never "
            "match anything (a trailing backslash, an unclosed '[' or a lone '!'); fix or "
            "remove it"
        )
    return globs, lines


def folded(parts: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The forms of a path's names that denial matches, besides the names as written:
    lower-cased, after NFKC, and with trailing dots and spaces stripped (what Windows and
    some network filesystems do), sorted.

    Example:
        >>> folded((".ENV.",))
        [('.env',), ('.env.',)]
    """
    lower = tuple(p.lower() for p in parts)
    variants = {lower}
    # NFKC leaves ASCII as it is: a walk's names are mostly ASCII, and this runs for
    # every name a cold walk meets.
    if not all(p.isascii() for p in parts):
        variants.add(tuple(unicodedata.normalize("NFKC", p).lower() for p in parts))
    if any(p.endswith((" ", ".")) for p in parts):
        variants.add(tuple((p.rstrip(" .") or p).lower() for p in parts))
    return sorted(variants)


def _fs_bytes(text: str, display: str) -> bytes:
    try:
        # A name that is not valid UTF-8 (a lone surrogate, from os.fsdecode or an
        # agent's JSON) cannot be stored or traced: refused before anything is written.
        text.encode("utf-8")
        return os.fsencode(text)
    except UnicodeEncodeError:
        _deny(
            display,
            "unencodable",
            "it is not valid UTF-8 or contains characters the filesystem cannot encode",
        )


def map_mount_prefix(path: str, mounts: Iterable[tuple[str, str]]) -> str:
    """An agent's absolute path with its mount prefix replaced by the host directory.

    ``mounts`` are ``(agent_prefix, host_prefix)`` pairs; the longest agent prefix that
    matches on whole components wins. Only the prefix is rewritten, without
    normalizing, so ``..`` and the like stay for the path rules to refuse. A path no
    mount covers comes back unchanged.

    Example:
        >>> map_mount_prefix("/workspace/src/a.py", [("/workspace", "/home/me/proj")])
        '/home/me/proj/src/a.py'
        >>> map_mount_prefix("/workspace2/x", [("/workspace", "/home/me/proj")])
        '/workspace2/x'
    """
    for agent, host in sorted(mounts, key=lambda m: len(m[0]), reverse=True):
        prefix = agent.rstrip("/")
        if path == prefix or path.startswith(prefix + "/"):
            rest = path[len(prefix) :]
            return host.rstrip("/") + rest if rest else host
    return path


# After a host prefix: the end, a character no file name continues with (a control
# character too: the NULs between the arguments in /proc/N/cmdline), or a full
# stop that ends a sentence. A sibling (/home/me/proj.bak, /home/me/project) is another
# directory and stays as it is.
_AFTER_PREFIX = r"(?=$|[/\s\x00-\x1f'\"`:;,()\[\]{}<>|=]|\.(?:$|\s))"


def in_agent_terms(value: Any, mounts: Iterable[tuple[str, str]]) -> Any:
    """``value`` with every host directory of ``mounts`` named by its agent prefix, in
    every string at any depth (dict keys too): what a command's answer says to an agent
    that sees the workspace only through its mounts.

    ``mounts`` are ``(agent_prefix, host_prefix)`` pairs; the longest host prefix wins,
    on whole components.

    Example:
        >>> m = [("/workspace", "/home/me/proj")]
        >>> in_agent_terms({"msg": "Path '/home/me/proj/.env' is refused",
        ...                 "cwd": "/home/me/proj"}, m)
        {'msg': "Path '/workspace/.env' is refused", 'cwd': '/workspace'}
        >>> in_agent_terms(["/home/me/project/x", "/home/me/proj.bak"], m)
        ['/home/me/project/x', '/home/me/proj.bak']
    """
    pairs = sorted(
        ((h.rstrip("/"), a.rstrip("/") or "/") for a, h in mounts if h.rstrip("/")),
        key=lambda p: len(p[0]),
        reverse=True,
    )
    if not pairs:
        return value
    pattern = re.compile("|".join(f"({re.escape(h)}){_AFTER_PREFIX}" for h, _ in pairs))
    agents = [a for _, a in pairs]

    def text(s: str) -> str:
        return pattern.sub(lambda m: agents[(m.lastindex or 1) - 1], s)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        return v

    return walk(value)


class PathRules:
    """Which paths may be touched: the lexical half of the path policy.

    Args:
        roots: the workspace roots (existing directories). Relative paths are relative
            to the first one. Each root is resolved with ``os.path.realpath`` once, here.
        allow: gitignore-style globs; when given, a file must match one of them.
            ``None`` allows every file that is not denied.
        deny: gitignore-style globs that are refused, matched case-insensitively;
            ``None`` means :data:`DEFAULT_DENY`, ``[]`` denies nothing beyond the
            built-in rules (traversal, symlinks, special files, reserved names).
        protect: globs refused whatever ``deny`` and ``allow`` say (rule
            ``governance:<glob>``); agent-facing policies pass :data:`GOVERNANCE`.
        protected: what may be read but never written or deleted (rule
            ``protected:<glob>``): a :class:`~ctxnb.access.protected.ProtectedSet`, or a
            function that computes it, called once, on the first write judged.
        max_path_bytes: the longest path accepted, in bytes of its filesystem encoding.

    Raises:
        ConfigError: no roots, a root that is not a directory, or a bad glob.

    Example:
        >>> import pathlib, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> rules = PathRules([ws], deny=[], protect=GOVERNANCE)
        >>> rules.denied_by(".orchestration/active_intents.yaml")
        'governance:.orchestration/'
    """

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]],
        *,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] | None = DEFAULT_DENY,
        protect: Sequence[str] = (),
        protected: ProtectedSet | Callable[[], ProtectedSet] | None = None,
        max_path_bytes: int = MAX_PATH_BYTES,
    ) -> None:
        if isinstance(roots, str | os.PathLike):
            roots = [roots]
        if not roots:
            raise ConfigError("A path policy needs at least one workspace root directory.")
        resolved: list[_Root] = []
        for r in roots:
            given = Path(os.path.abspath(os.fspath(r)))
            real = Path(os.path.realpath(given))
            if not real.is_dir():
                raise ConfigError(
                    f"Workspace root {os.fspath(r)!r} is not an existing directory; "
                    "create it or pass another root."
                )
            resolved.append(_Root(real=real, given=given))
        self._roots: tuple[_Root, ...] = tuple(resolved)
        if max_path_bytes < 1:
            raise ConfigError(f"max_path_bytes must be positive, got {max_path_bytes}")
        self.max_path_bytes = max_path_bytes
        deny_list = DEFAULT_DENY if deny is None else deny
        self._deny_lines = _glob_lines(deny_list, "deny")
        self._protect_lines = _glob_lines(protect, "protect")
        # One spec for both lists; the last matching glob answers (gitignore rules), so
        # the protected globs come last and name their own rule. Built (and checked)
        # once: the hook process builds these rules on every call.
        guard = [*self._deny_lines, *self._protect_lines]
        self._guard_rules = [
            *(f"deny:{g}" for g in self._deny_lines),
            *(f"governance:{g}" for g in self._protect_lines),
        ]
        denied = set(self._deny_lines)
        self._deny_spec, _ = _build_spec(
            guard, "deny", what_of=lambda line: "deny" if line in denied else "protect"
        )
        # Denial is case-insensitive: a second spec of lower-cased patterns is matched
        # against lower-cased paths (case-insensitive filesystems would open .GIT as .git).
        # Its patterns are also composed (NFC): a glob named in decomposed form (a
        # directory name as macOS's realpath gives it) matches the composed spelling of
        # the same name, which a normalization-insensitive filesystem opens as one file;
        # the paths' NFKC variant below composes the other way round.
        self._deny_spec_lower, _ = _build_spec(
            [unicodedata.normalize("NFC", p).lower() for p in guard], "deny"
        )
        self._deny_cache: dict[tuple[str, ...], str | None] = {}
        self._parse_cache: dict[str, tuple[int, _Parsed]] = {}
        self._allow_spec: GlobList | None = None
        self._allow_lines: list[str] = []
        if allow is not None:
            self._allow_spec, self._allow_lines = _build_spec(allow, "allow")
        # Computed on the first write it judges: a read never pays for deriving it.
        self._protected_source = protected
        self._protected: ProtectedSet | None = None

    # ------------------------------------------------------------------ public API

    @property
    def roots(self) -> tuple[Path, ...]:
        """The real paths of the workspace roots, first one first."""
        return tuple(r.real for r in self._roots)

    @property
    def deny(self) -> tuple[str, ...]:
        """The deny globs in force."""
        return tuple(self._deny_lines)

    @property
    def allow(self) -> tuple[str, ...] | None:
        """The allow globs in force, or ``None`` when every non-denied file is allowed."""
        return tuple(self._allow_lines) if self._allow_spec is not None else None

    @property
    def protect(self) -> tuple[str, ...]:
        """The globs refused whatever ``deny`` and ``allow`` say (governance's files)."""
        return tuple(self._protect_lines)

    @property
    def root_entries(self) -> tuple[_Root, ...]:
        """The workspace roots, each as given and as resolved (what a walk opens)."""
        return self._roots

    @property
    def allow_spec(self) -> GlobList | None:
        """The compiled allow globs, or ``None`` when every non-denied file is allowed."""
        return self._allow_spec

    def denies_found(self, rel: str) -> bool:
        """Whether the deny or governance globs refuse ``rel``, a name a walk found below
        directories it found not refused (see :mod:`ctxnb.access.identity`).

        An ASCII path with no name ending in a dot or a space is its own NFKC form and
        stripped form: the variants reduce to the path and its lower case, matched here
        without building them (a walk asks this once per name of the workspace).
        """
        if rel.isascii() and _ODD_END.search(rel) is None:
            return (
                self._deny_spec.match(rel, is_dir=None, ancestors=False) is not None
                or self._deny_spec_lower.match(rel.lower(), is_dir=None, ancestors=False)
                is not None
            )
        return self._denied_by(tuple(rel.split("/")), parent_checked=True) is not None

    def denies(self, rel: str) -> bool:
        """Whether the deny or governance globs refuse the workspace-relative ``rel`` or a
        directory above it, in any form denial matches (see :func:`folded`): the answer
        of every door that judges a name it did not open through this policy (a
        sandbox's masks, the paths of git's history).

        Example:
            >>> import pathlib, tempfile
            >>> rules = PathRules([pathlib.Path(tempfile.mkdtemp())])
            >>> [rules.denies(p) for p in (".\uff45nv", "k/deploy.pem.", "src/app.py")]
            [True, True, False]
        """
        parts = tuple(p for p in rel.split("/") if p)
        return self._denied_by(parts) is not None

    @property
    def protected_set(self) -> ProtectedSet | None:
        """What this policy never writes (computed now if it was not yet), or None."""
        if self._protected is None and self._protected_source is not None:
            source = self._protected_source
            self._protected = source() if callable(source) else source
        return self._protected

    def protected_by(self, path: str | os.PathLike[str] | SafePath) -> str | None:
        """Why a write to ``path`` is refused as protected (see
        :mod:`ctxnb.access.protected`), or None; the other rules are not judged here.

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb.access.protected import ProtectedSet
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> rules = PathRules([ws], protected=ProtectedSet(ws, {}))
            >>> rules.protected_by("src/__pycache__/app.cpython-311.pyc")
            'byte code runs instead of its reviewed source (matches __pycache__/)'
            >>> rules.protected_by("src/app.py") is None
            True
        """
        try:
            p = self._parse(path)
        except PolicyError:
            return None
        found = self._protected_hit(p.parts)
        return None if found is None else f"{found[1]} (matches {found[0]})"

    def check_protected(self, path: str | os.PathLike[str] | SafePath) -> None:
        """Refuse ``path`` when a write to it would be refused as protected (rule
        ``protected:<glob>``), for a caller that cannot tell whether it will be written
        (a tool ctxnb does not know by name); the other rules are not judged here.

        Raises:
            PolicyError: ``PATH_DENIED``, rule ``protected:<glob>``.
        """
        try:
            p = self._parse(path)
        except PolicyError:
            return
        self._check_protected(p)

    def _protected_hit(self, parts: tuple[str, ...]) -> tuple[str, str] | None:
        if self._protected_source is None or not parts:
            return None
        protected = self.protected_set
        return None if protected is None else protected.refusal(parts)

    def _check_protected(self, p: _Parsed) -> None:
        """``protected:<glob>`` for a write or a deletion of ``p``."""
        found = self._protected_hit(p.parts)
        if found is not None:
            line, why = found
            _deny(p.display, f"protected:{line}", why)

    def __repr__(self) -> str:
        roots = ", ".join(str(r.real) for r in self._roots)
        return f"{type(self).__name__}(roots=[{roots}], deny={len(self._deny_lines)} globs)"

    def denied_by(self, path: str | os.PathLike[str] | SafePath) -> str | None:
        """The rule that refuses ``path`` by its name alone, or None.

        Only the lexical rules (no look at the disk): ``deny:<glob>``,
        ``governance:<glob>``, ``traversal``, ``not-allowed`` …

        Example:
            >>> import pathlib, tempfile
            >>> rules = PathRules([pathlib.Path(tempfile.mkdtemp())])
            >>> rules.denied_by(".GIT/config"), rules.denied_by("a/../b")
            ('deny:.git', 'traversal')
        """
        try:
            p = self._parse(path)
            if p.parts and not p.dir_form:
                self.check_allow(p)
        except PolicyError as e:
            return str(e.details.get("rule"))
        return None

    def refused_among(self, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
        """The names of a listing that a walk would refuse, with the rule refusing each.

        ``paths`` are relative to the first root, ``/``-separated, as a directory
        listing names what it found (ripgrep's ``--files``). Each is judged by the rules
        the descriptor walk applies to names it meets on disk; each directory is judged
        once, so that a listing of many files costs one name check per file.

        Example:
            >>> import pathlib, tempfile
            >>> rules = PathRules([pathlib.Path(tempfile.mkdtemp())])
            >>> list(rules.refused_among(["src/a.py", "src/.env", ".git/config"]))
            [('src/.env', 'deny:.env*'), ('.git/config', 'deny:.git')]
        """
        judged: dict[tuple[str, ...], str | None] = {}
        # When every glob matches by name alone, a file below accepted directories is
        # judged by its name (and its length): many files share a name (__init__.py).
        by_name: dict[str, str | None] | None = (
            {} if self._deny_spec.by_name_only() and self._deny_spec_lower.by_name_only() else None
        )
        for rel in paths:
            parts = tuple(rel.split("/"))
            rule = None
            for i in range(1, len(parts)):
                key = parts[:i]
                if key not in judged:
                    judged[key] = self.refusal(key, parent_checked=i > 1)
                rule = judged[key]
                if rule is not None:
                    break  # nothing inside a refused directory is taken back
            if rule is None:
                if by_name is None or len(parts) < 2:
                    rule = self.refusal(parts, parent_checked=len(parts) > 1)
                elif len(os.fsencode(rel)) > self.max_path_bytes:
                    rule = self.refusal(parts, parent_checked=True)
                else:
                    name = parts[-1]
                    if name not in by_name:
                        by_name[name] = self.refusal(parts, parent_checked=True)
                    rule = by_name[name]
            if rule is not None:
                yield rel, rule

    # ------------------------------------------------------------ lexical checks

    def _parse(self, path: str | os.PathLike[str] | SafePath) -> _Parsed:
        # A path string's answer depends on the string and the rules alone (no I/O):
        # a resume judges the same thousands of paths each time, so accepted ones are
        # remembered. Refusals are not (they raise, and are rare).
        if type(path) is not str:
            return self._parse_uncached(path)
        hit = self._parse_cache.get(path)
        if hit is not None and hit[0] == self.max_path_bytes:
            return hit[1]
        parsed = self._parse_uncached(path)
        cache = self._parse_cache
        if len(cache) >= _PARSE_CACHE_MAX:
            cache.clear()
        cache[path] = (self.max_path_bytes, parsed)
        return parsed

    def _parse_uncached(self, path: str | os.PathLike[str] | SafePath) -> _Parsed:
        root: _Root | None = None
        if isinstance(path, SafePath):
            root = next((r for r in self._roots if r.real == path.root), None)
            if root is None:
                _deny(path.rel, "outside-roots", f"its root {path.root} is not a workspace root")
            raw = path.rel
            if raw.startswith("/"):
                _deny(raw, "outside-roots", "a SafePath's rel must be relative")
        else:
            if isinstance(path, os.PathLike):
                path = os.fspath(path)
            if not isinstance(path, str):
                _deny(repr(path), "not-a-string", f"a {type(path).__name__} is not a path string")
            raw = path
        display = raw
        if not raw.strip():
            _deny(display, "empty", "the path is empty")
        if "\x00" in raw:
            _deny(display, "nul-byte", "it contains a NUL byte")
        encoded = _fs_bytes(raw, display)
        if len(encoded) > self.max_path_bytes:
            _deny(
                display, "path-too-long", f"it is {len(encoded)} bytes, over {self.max_path_bytes}"
            )
        # An ASCII path's only control characters are C0 and DEL (category Cc), and it
        # has no bidi marks; this skips a category lookup per character on every path.
        ascii_only = raw.isascii()
        if ascii_only:
            m = _ASCII_CC.search(raw)
            if m:
                _deny(display, "control-char", f"it contains the control character {m[0]!r}")
        for ch in () if ascii_only else raw:
            if ch in _BIDI or unicodedata.category(ch) == "Cc":
                _deny(display, "control-char", f"it contains the control character {ch!r}")
        if "\\" in raw:
            _deny(display, "backslash", "it contains a backslash")
        if raw.startswith("~"):
            _deny(display, "home-tilde", "a leading '~' is not expanded")
        raw_parts = raw.split("/")
        if ".." in raw_parts:
            _deny(display, "traversal", "it contains a '..' component")
        nfkc = raw if ascii_only else unicodedata.normalize("NFKC", raw)
        if nfkc != raw:
            nfkc_parts = nfkc.split("/")
            if (
                len(nfkc_parts) != len(raw_parts)
                or "\\" in nfkc
                or nfkc.startswith("~")
                or any(
                    n in (".", "..") and n != r for n, r in zip(nfkc_parts, raw_parts, strict=True)
                )
            ):
                _deny(display, "unicode-lookalike", f"its NFKC form {nfkc!r} has another shape")
        parts = tuple(c for c in raw_parts if c not in ("", "."))
        if raw.startswith("/"):
            best: tuple[_Root, int] | None = None
            for r in self._roots:
                for form in (r.given, r.real):
                    rp = form.parts[1:]  # drop the leading '/'
                    if parts[: len(rp)] == rp and (best is None or len(rp) > best[1]):
                        best = (r, len(rp))
            if best is None:
                _deny(display, "outside-roots", "it is an absolute path outside every root")
            root, parts = best[0], parts[best[1] :]
        elif root is None:
            root = self._roots[0]
        # '~' is refused wherever it would lead the canonical path ('./~', '/ws/~x'), so
        # that checking a SafePath's rel again gives the same answer.
        if parts and (
            parts[0].startswith("~")
            or (not ascii_only and unicodedata.normalize("NFKC", parts[0]).startswith("~"))
        ):
            _deny(display, "home-tilde", "a leading '~' is not expanded")
        dir_form = raw.endswith(("/", "/.")) or raw == "."
        self._check_parts(parts, display)
        return _Parsed(root, parts, dir_form, display)

    def _check_parts(
        self, parts: tuple[str, ...], display: str, *, parent_checked: bool = False
    ) -> None:
        for name in parts[-1:] if parent_checked else parts:
            if not name.strip():
                # Legal on POSIX, but a blank name is invisible in every listing.
                _deny(display, "empty", "a name in it is blank")
            # An ASCII name's bytes are its characters (and it always encodes).
            size = len(name) if name.isascii() else len(_fs_bytes(name, display))
            if size > NAME_MAX:
                _deny(display, "component-too-long", f"a name is {size} bytes, over {NAME_MAX}")
            if name.startswith(TEMP_PREFIX):
                _deny(display, "reserved-name", f"{TEMP_PREFIX!r} names are reserved")
        rule = self._denied_by(parts, parent_checked=parent_checked)
        if rule is not None:
            kind, _, glob = rule.partition(":")
            what = "governance's own files" if kind == "governance" else "the deny glob"
            _deny(display, rule, f"it matches {what} {glob!r}")

    def _denied_by(self, parts: tuple[str, ...], *, parent_checked: bool = False) -> str | None:
        if not parts or not self._guard_rules:
            return None
        # The answer depends on the names only (the globs never change), and one tool
        # call checks the same path several times: remember recent answers.
        cache = self._deny_cache
        if parts in cache:
            return cache[parts]
        if len(cache) > 4096:
            cache.clear()
        cache[parts] = found = self._denied_by_uncached(parts, parent_checked)
        return found

    def _denied_by_uncached(self, parts: tuple[str, ...], parent_checked: bool) -> str | None:
        hit = self._match_prefixes(self._deny_spec, parts, parent_checked)
        if hit is not None:
            return self._guard_rules[hit]
        for variant in folded(parts):
            hit = self._match_prefixes(self._deny_spec_lower, variant, parent_checked)
            if hit is not None:
                return self._guard_rules[hit]
        return None

    @staticmethod
    def _match_prefixes(
        spec: GlobList, parts: tuple[str, ...], parent_checked: bool = False
    ) -> int | None:
        # Each ancestor as a directory, then the path itself as file and as directory:
        # the kind of an entry is not known here, and a denied directory denies its content.
        # When the parent was checked (a walk entered it), its ancestors were judged on
        # the way in: the transforms of the variants work name by name.
        return spec.match("/".join(parts), is_dir=None, ancestors=not parent_checked)

    def check_allow(self, p: _Parsed) -> None:
        """Refuse a parsed path none of the allow globs matches (``not-allowed``)."""
        if self._allow_spec is None or not p.parts:
            return
        if not self._allow_spec.match_file("/".join(p.parts)):
            _deny(
                p.display,
                "not-allowed",
                f"it matches none of the allow globs {self._allow_lines!r}",
            )

    @staticmethod
    def _require_file_name(p: _Parsed) -> None:
        if not p.parts:
            _deny(p.display, "not-a-regular-file", "it is the workspace root")
        if p.dir_form:
            _deny(p.display, "trailing-slash", "a path ending in '/' names a directory")

    def refusal(self, parts: tuple[str, ...], *, parent_checked: bool = False) -> str | None:
        """The rule refusing a name found on disk (``parts`` from a root), or None.

        ``parent_checked``: ``parts[:-1]`` was accepted by this method already (a walk
        entered that directory), so only the last name is judged; same answer, fewer
        glob matches.
        """
        display = "/".join(parts)
        name = parts[-1]
        # The same name rules _parse applies to a path string, for names found on disk.
        # An ASCII name's only control characters are C0 and DEL: one regex search.
        ascii_only = name.isascii()
        if ascii_only:
            m = _ASCII_CC_OR_BACKSLASH.search(name)
            if m:
                return "backslash" if m[0] == "\\" else "control-char"
        for ch in () if ascii_only else name:
            if ch in _BIDI or unicodedata.category(ch) == "Cc":
                return "control-char"
            if ch == "\\":
                return "backslash"
        folded = name if ascii_only else unicodedata.normalize("NFKC", name)
        if folded in (".", "..") or "/" in folded or "\\" in folded:
            return "unicode-lookalike"
        if len(parts) == 1 and (name.startswith("~") or folded.startswith("~")):
            return "home-tilde"
        try:
            size = len(display) if display.isascii() else len(_fs_bytes(display, display))
            if size > self.max_path_bytes:
                return "path-too-long"
            self._check_parts(parts, display, parent_checked=parent_checked)
        except PolicyError as e:
            return str(e.details.get("rule"))
        return None
