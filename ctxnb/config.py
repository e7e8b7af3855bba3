"""Workspace configuration: ``ctxnb.toml`` or ``[tool.ctxnb]`` in ``pyproject.toml``.

Every setting has a default, so no file is needed. A file with an unknown key or a
bad value is a :class:`~ctxnb.errors.ConfigError` that names the file, the key and
what is allowed.

Example ``ctxnb.toml``::

    profile = "local"

    [index]
    ignore = ["*.log", "build/"]

    [policy]
    deny = [".git", ".env*", "**/*.pem", "**/id_*", ".ctxnb/", "secrets/"]

    [[mounts]]
    agent_prefix = "/workspace"
    canonical_prefix = "/home/me/proj"

    [mcp.servers.github]                # outside MCP servers (ctxnb.integrations.mcp_registry)
    url = "http://127.0.0.1:8931/mcp"
    bearer_token_env = "GITHUB_MCP_TOKEN"

    [skills]
    root = "skills"

    [adapters.mcp]
    expose_registry = true              # ctxnb's MCP server re-exposes them, governed

    [budget]                            # per session, at the tool runner (every door)
    read_bytes = 2_000_000              # file content returned to the model
    read_tokens = 500_000
    writes = 200                        # successful calls of tools that change files

    [merge]                             # merge proposals' review backend (docs/merge.md)
    review_model = "anthropic/claude-sonnet-4-5"   # any litellm model; unset: none
    review_api_key_env = "ANTHROPIC_API_KEY"

Settings are resolved in one order everywhere: an explicit argument, then an
environment variable (``CTXNB_PROFILE``), then the config file, then the default.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, get_origin, get_type_hints

from ._util.defaults import (
    DEFAULT_BREAKER_THRESHOLD,
    DEFAULT_COMMAND_TIMEOUT,
    UNKNOWN_COMMAND_DEFAULT,
)
from ._util.domains import check_pattern
from .access.pathrules import DEFAULT_DENY, MAX_PATH_BYTES
from .errors import ConfigError
from .store._log import COMPACT_AFTER

if TYPE_CHECKING:
    from annotated_types import Ge, Gt, Le
    from pydantic import TypeAdapter, ValidationError

__all__ = [
    "CONFIG_FILE",
    "AdaptersConfig",
    "BudgetConfig",
    "CtxnbConfig",
    "GovernanceConfig",
    "IndexConfig",
    "McpConfig",
    "McpServerConfig",
    "MergeConfig",
    "MountConfig",
    "PolicyConfig",
    "Profile",
    "RulesConfig",
    "SandboxConfig",
    "SkillsConfig",
    "load_config",
    "tool_ctxnb_changed",
    "validate_config",
]

CONFIG_FILE = "ctxnb.toml"

# The settings are frozen dataclasses, validated by pydantic only when a file gives
# values (validate_config): a workspace without settings, or a command that a stat
# cache and a log answer, never imports pydantic (about 0.1 s of every process). The
# constraints in the field annotations (Gt, Ge, Le of annotated_types) are names that
# only validation reads: annotations stay strings until then (see _adapter).
_STRICT = {"extra": "forbid"}  # pydantic's ConfigDict for each class: unknown keys refused


def _normalize_domains(settings: Any) -> None:
    """Check and normalize ``allowed_domains`` (a ValueError names a bad entry)."""
    domains = [check_pattern(d) for d in settings.allowed_domains]
    object.__setattr__(settings, "allowed_domains", domains)  # frozen: set once, here


class _Settings:
    """Equality, hash and repr by fields, as a frozen dataclass generates them for each
    class (``eq`` compares the fields of two objects of the same class, ``hash`` hashes
    them, ``repr`` shows ``Class(field=value, ...)``): written once here, since
    generating them for the 18 settings classes cost every process about 4 ms at import
    (an unchanged ``ctxnb index`` is about 90 ms of CPU in all)."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined, no-any-return]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))  # type: ignore[arg-type]
        return f"{self.__class__.__qualname__}({shown})"


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class MountConfig(_Settings):
    """A mount mapping: what the agent sees at ``agent_prefix`` lives at ``canonical_prefix``."""

    __pydantic_config__ = _STRICT
    agent_prefix: str
    canonical_prefix: str
    filesystem_id: str | None = None  # defaults to this machine's filesystem id


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class IndexConfig(_Settings):
    """What ``index_tree`` walks: extra ignore patterns (gitignore syntax) and limits."""

    __pydantic_config__ = _STRICT
    ignore: list[str] = field(default_factory=list)
    max_file_bytes: Annotated[int, Gt(0)] = 20 * 1024 * 1024
    use_gitignore: bool = True
    batch_size: Annotated[int, Gt(0)] = 2000
    # Compact the store when more transactions wait.
    compact_after: Annotated[int, Ge(0)] = COMPACT_AFTER


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class PolicyConfig(_Settings):
    """Path policy of the file tools: allow and deny globs (gitignore syntax)."""

    __pydantic_config__ = _STRICT
    allow: list[str] | None = None
    deny: list[str] = field(default_factory=lambda: list(DEFAULT_DENY))
    max_path_bytes: Annotated[int, Gt(0)] = MAX_PATH_BYTES
    # Globs of files whose reading or writing waits for a human's approval (governed
    # workspaces).
    sensitive: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class Profile(_Settings):
    """How much one read may return to the model."""

    __pydantic_config__ = _STRICT
    max_read_chars: Annotated[int, Gt(0)]
    excerpt_lines: Annotated[int, Gt(0)]
    summary_tokens: Annotated[int, Gt(0)]


DEFAULT_PROFILES: dict[str, Profile] = {
    # A small local model: a read returns at most ~4k tokens.
    "local": Profile(max_read_chars=16_000, excerpt_lines=60, summary_tokens=400),
    # A large cloud model: a read returns at most ~25k tokens.
    "cloud": Profile(max_read_chars=100_000, excerpt_lines=200, summary_tokens=1500),
}


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class GovernanceConfig(_Settings):
    """Settings of the hook engine."""

    __pydantic_config__ = _STRICT
    unknown_command: Literal["SAFE", "DESTRUCTIVE"] = UNKNOWN_COMMAND_DEFAULT
    safe_commands: list[str] = field(default_factory=list)
    quality_commands: list[str] = field(default_factory=list)
    breaker_threshold: Annotated[int, Gt(0)] = DEFAULT_BREAKER_THRESHOLD
    command_timeout: Annotated[float, Gt(0)] = DEFAULT_COMMAND_TIMEOUT
    model_id: str | None = None
    # Write partitioning (ctxnb.govern.partition): selecting an intent whose scope
    # overlaps one held by another live session is refused, asked of the approver, or
    # allowed ("allow": concurrent writers meet only the optimistic lock).
    overlap: Literal["refuse", "ask", "allow"] = "refuse"
    # Globs that may overlap count as an overlap even when no indexed file confirms it.
    overlap_strict: bool = False
    # Minutes a session's lease on its scope lives without activity.
    lease_minutes: Annotated[float, Gt(0)] = 30.0


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class McpServerConfig(_Settings):
    """One outside MCP server: a command over stdio, or a URL over streamable HTTP.

    A bearer token is never written in the file: ``bearer_token_env`` names the
    environment variable that holds it.
    """

    __pydantic_config__ = _STRICT
    command: str | None = None  # stdio: the program to start
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None  # streamable HTTP endpoint
    headers: dict[str, str] = field(default_factory=dict)
    bearer_token_env: str | None = None
    timeout: Annotated[float, Gt(0)] = 30.0
    enabled: bool = True
    # Tool-name globs (on the names as listed) a human marks read-only: called without
    # an intent; a tool's own readOnlyHint grants nothing.
    read_only_tools: list[str] = field(default_factory=list)
    # Run this stdio server in bubblewrap with the workspace read-only (None: as
    # [sandbox] agent says).
    sandbox: bool | None = None
    # Domains this confined server may reach through ctxnb's proxy.
    allowed_domains: list[str] = field(default_factory=list)
    network: bool = False  # let this confined server share the host's network
    # Host paths this confined server may read (its own files outside the workspace).
    read_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give exactly one of 'command' (a stdio server) or 'url' (an HTTP server)"
            )
        _normalize_domains(self)


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class McpConfig(_Settings):
    """Outside MCP servers that ctxnb connects to (``[mcp.servers.NAME]``)."""

    __pydantic_config__ = _STRICT
    servers: dict[str, McpServerConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.servers:
            if not name or "__" in name or not name.replace("-", "_").isidentifier():
                raise ValueError(
                    f"server name {name!r} must be a simple identifier without '__' (it "
                    "prefixes the server's tool names, e.g. 'github__create_issue')"
                )


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class SkillsConfig(_Settings):
    """Where SKILL.md skills live, relative to the workspace root.

    ``root`` is searched first, then ``.ctxnb/skills`` and ``.claude/skills``.
    """

    __pydantic_config__ = _STRICT
    root: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class RulesConfig(_Settings):
    """Where AGENTS.md rules discovery looks, relative to the workspace root: only rules
    files in this subtree are found (``"."``, the default, is the whole workspace); and
    how many tokens a new session's startup excerpts may take."""

    __pydantic_config__ = _STRICT
    root: str = "."
    #: Tokens a new session spends on excerpts of the README and the package manifest
    #: (:mod:`ctxnb.session.excerpts`), pinned before the chat; 0 loads none.
    startup_tokens: Annotated[int, Ge(0)] = 1000


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class BudgetConfig(_Settings):
    """Limits per session, enforced where every tool call passes (:mod:`ctxnb.tools.budget`).

    Unset (the default) is no limit. ``read_bytes`` and ``read_tokens`` cap the file
    content reads return to the model (UTF-8 bytes; tokens by the session's counter);
    ``writes`` caps the successful calls of tools that change files. ``0`` allows none.
    """

    __pydantic_config__ = _STRICT
    read_bytes: Annotated[int, Ge(0)] | None = None
    read_tokens: Annotated[int, Ge(0)] | None = None
    writes: Annotated[int, Ge(0)] | None = None

    def any(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.read_bytes, self.read_tokens, self.writes))


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class MergeConfig(_Settings):
    """The review backend of merge proposals (:mod:`ctxnb.tools.merging`).

    Unset ``review_model`` (the default): clean merges are proposed, conflicts are shown
    and never written. Set, the conflicts go to that litellm model (``review_api_base``
    for an OpenAI-compatible endpoint, the key read from ``review_api_key_env``).
    """

    __pydantic_config__ = _STRICT
    review_model: str | None = None
    review_api_base: str | None = None
    review_api_key_env: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class ClaudeCodeAdapterConfig(_Settings):
    """The Claude Code hook adapter."""

    __pydantic_config__ = _STRICT
    enabled: bool = True


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class McpAdapterConfig(_Settings):
    """ctxnb's own MCP server."""

    __pydantic_config__ = _STRICT
    enabled: bool = True
    # Re-expose the tools of [mcp.servers] through ctxnb's server, governed.
    expose_registry: bool = False
    # Longest JSON-RPC line accepted over stdio; a longer one is refused with -32600.
    max_message_bytes: Annotated[int, Gt(0)] = 16 * 1024 * 1024
    # 'intent': tools/list shows what the client's intent may use plus search_tools
    # (outside servers' tools are found with it); 'all': every tool.
    tool_listing: Literal["intent", "all"] = "intent"


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class AcpAdapterConfig(_Settings):
    """``ctxnb acp serve``: the live agent for ACP clients (flags override these)."""

    __pydantic_config__ = _STRICT
    model: str | None = None  # a litellm model name
    api_base: str | None = None  # an OpenAI-compatible endpoint
    api_key_env: str | None = None  # the environment variable that holds the API key
    strategy: str = "keep-all"  # a context strategy spec
    budget: Annotated[int, Gt(0)] | None = None
    intent: str | None = None  # the intent sessions start under
    step_limit: Annotated[int, Gt(0)] = 30
    command_timeout: Annotated[float, Gt(0)] = 60.0
    permission_timeout: Annotated[float, Gt(0)] = 300.0


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class A2aAdapterConfig(AcpAdapterConfig):
    """``ctxnb a2a serve``: the live agent for A2A peers (flags override these)."""

    __pydantic_config__ = _STRICT
    host: str = "127.0.0.1"  # the address to bind (loopback)
    port: Annotated[int, Ge(0), Le(65535)] = 9999  # the TCP port (0: a free one)


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class AdaptersConfig(_Settings):
    """The integrations that put ctxnb between an agent and the workspace."""

    __pydantic_config__ = _STRICT
    claude_code: ClaudeCodeAdapterConfig = field(default_factory=ClaudeCodeAdapterConfig)
    mcp: McpAdapterConfig = field(default_factory=McpAdapterConfig)
    acp: AcpAdapterConfig = field(default_factory=AcpAdapterConfig)
    a2a: A2aAdapterConfig = field(default_factory=A2aAdapterConfig)


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class SandboxConfig(_Settings):
    """How commands are confined (see :mod:`ctxnb.sandbox`).

    ``backend = "none"`` (or the shorthand ``sandbox = "none"`` at the top level) is
    refused: commands run only on an overlay (``SANDBOX_UNAVAILABLE``).

    ``git = "read"`` lets commands read git's object stores even when they hold denied
    bytes: by default a store is hidden (the root's, a submodule's under
    ``.git/modules``, a nested or bare repository's) when a denied path is anywhere in
    its history, reflogs or index, or it holds a denied file's current bytes, since
    ``git show HEAD~1:.env`` would print them (see :mod:`ctxnb.sandbox.gitstores`).
    A human's setting: no agent tool writes it.

    ``allowed_domains`` lets commands reach those domains (and no others) through
    ctxnb's HTTP proxy, while the sandbox keeps no network interface: exact names
    (``pypi.org``) and suffixes (``*.pythonhosted.org``, the names below it). An
    intent's own ``allowed_domains`` add to these; ``network = true`` (here or on the
    intent) shares the host's whole network instead.

    ``agent = true`` confines more than commands: each outside MCP server of the
    registry (``[mcp.servers.NAME]``, stdio) runs in its own bubblewrap sandbox with the
    workspace read-only, a private ``HOME``, the limits above and the network its own
    ``allowed_domains`` (or ``network``) give it. ``production = true`` refuses to
    start any of them unconfined.
    """

    __pydantic_config__ = _STRICT
    backend: Literal["bwrap", "none"] = "bwrap"
    # 'read': let commands read git's object stores even when they hold denied bytes
    # (by default such a store is hidden).
    git: Literal["auto", "read"] = "auto"
    network: bool = False  # let commands reach the network
    # Confine the agent too: outside MCP servers of the registry run in bubblewrap with
    # the workspace read-only (per server: [mcp.servers.NAME] sandbox).
    agent: bool = False
    # Refuse to start what should be confined when it cannot be: an outside MCP server
    # with sandbox = false, or without a bubblewrap that works here.
    production: bool = False
    # Domains commands may reach through ctxnb's proxy (pypi.org, *.pythonhosted.org);
    # all others are refused.
    allowed_domains: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)  # more variables passed through
    read_paths: list[str] = field(default_factory=list)  # more read-only host paths
    max_memory_mb: Annotated[int, Gt(0)] | None = 8192
    max_file_mb: Annotated[int, Gt(0)] | None = 1024
    max_processes: Annotated[int, Gt(0)] | None = 4096
    max_open_files: Annotated[int, Gt(0)] | None = 4096

    def __post_init__(self) -> None:
        _normalize_domains(self)


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # eq, repr: _Settings
class CtxnbConfig(_Settings):
    """All settings of one workspace.

    A frozen dataclass: ``dataclasses.asdict`` dumps it, ``dataclasses.replace`` makes
    a changed copy, and :func:`validate_config` builds one from a table of settings.
    """

    __pydantic_config__ = _STRICT
    profile: str = "cloud"
    profiles: dict[str, Profile] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    mounts: list[MountConfig] = field(default_factory=list)
    index: IndexConfig = field(default_factory=IndexConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    governance: GovernanceConfig = field(default_factory=GovernanceConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    adapters: AdaptersConfig = field(default_factory=AdaptersConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    merge: MergeConfig = field(default_factory=MergeConfig)
    source: str | None = None  # the file the settings came from
    # SHA-256 of the settings file's bytes (recorded with each command's commit, so a
    # trace says which settings governed it).
    source_sha256: str | None = None

    def active_profile(self, name: str | None = None) -> Profile:
        """The profile named explicitly, else by ``CTXNB_PROFILE``, else by the file."""
        chosen = name or os.environ.get("CTXNB_PROFILE") or self.profile
        try:
            return self.profiles[chosen]
        except KeyError:
            raise ConfigError(
                f"unknown profile {chosen!r}; known profiles: {', '.join(sorted(self.profiles))}"
                " (define more under [profiles.NAME] in ctxnb.toml)"
            ) from None


@cache
def _adapter() -> TypeAdapter[CtxnbConfig]:
    import annotated_types
    from pydantic import TypeAdapter  # only when there are values to validate

    # The constraint names the annotations use, bound where pydantic (and
    # typing.get_type_hints) resolve them: this module's namespace.
    for name in ("Ge", "Gt", "Le"):
        globals().setdefault(name, getattr(annotated_types, name))
    return TypeAdapter(CtxnbConfig)


def validate_config(data: dict[str, Any], where: str = "settings") -> CtxnbConfig:
    """The settings a table gives (as ``ctxnb.toml`` holds them), every key checked.

    ``sandbox = "none"`` is the shorthand of ``[sandbox] backend = "none"``; profiles
    given add to (or override) the built-in ones.

    Raises:
        ConfigError: naming ``where``, the key and what is allowed.

    Example:
        >>> validate_config({"index": {"batch_size": 10}}).index.batch_size
        10
        >>> validate_config({"index": {"batch": 10}}, "ctxnb.toml")
        Traceback (most recent call last):
        ...
        ctxnb.errors.ConfigError: invalid ctxnb settings in ctxnb.toml:
          unknown key 'index.batch'; allowed here: batch_size, compact_after, ...
    """
    from pydantic import ValidationError

    data = _merge_profiles(data)
    if isinstance(data.get("sandbox"), str):
        data = {**data, "sandbox": {"backend": data["sandbox"]}}
    try:
        return _adapter().validate_python(data)
    except ValidationError as e:
        raise ConfigError(_format_validation(where, e)) from None


def _format_validation(where: str, err: ValidationError) -> str:
    lines = [f"invalid ctxnb settings in {where}:"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            parent = e["loc"][:-1]
            allowed = _allowed_keys(parent)
            lines.append(f"  unknown key {key!r}; allowed here: {', '.join(allowed) or '(none)'}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"  {key}: {msg} (got {e.get('input')!r})")
    return "\n".join(lines)


def _settings_class(hint: Any) -> type | None:
    """The settings dataclass a field's type names (through ``X | None``, ``Annotated``)."""
    for t in (hint, *get_args(hint)):
        if isinstance(t, type) and "__dataclass_fields__" in vars(t):
            return t
    return None


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    _adapter()  # binds the names the annotations use
    cls: type | None = CtxnbConfig
    keyed = False  # the last field was a dict: the next part is a key the user chose
    for part in loc:
        if isinstance(part, int) or cls is None:
            continue
        if keyed:
            keyed = False
            continue
        hint = get_type_hints(cls, include_extras=False).get(str(part))
        if hint is None:
            return []
        keyed = get_origin(hint) is dict
        args = get_args(hint)
        cls = _settings_class(args[-1] if keyed and args else hint)
    if cls is None:
        return []
    return sorted(f.name for f in fields(cls) if f.name != "source")


def _merge_profiles(data: dict[str, Any]) -> dict[str, Any]:
    # User profiles add to (or override) the built-in ones instead of replacing all of them.
    if "profiles" in data and isinstance(data["profiles"], dict):
        merged: dict[str, Any] = {k: asdict(v) for k, v in DEFAULT_PROFILES.items()}
        merged.update(data["profiles"])
        data = {**data, "profiles": merged}
    return data


def load_config(root: str | os.PathLike[str]) -> CtxnbConfig:
    """Load the settings of the workspace at ``root``.

    ``ctxnb.toml`` wins over ``[tool.ctxnb]`` in ``pyproject.toml``; with neither,
    every default applies (and pydantic is not imported).

    Raises:
        ConfigError: naming the file, the key and what is allowed.

    Example:
        >>> import tempfile
        >>> load_config(tempfile.mkdtemp()).profile
        'cloud'
    """
    root = Path(root)
    toml_path = root / CONFIG_FILE
    data: dict[str, Any] | None = None
    where = ""
    digest = None
    if toml_path.is_file():
        where = str(toml_path)
        data, digest = _read_toml(toml_path)
    else:
        pyproject = root / "pyproject.toml"
        if pyproject.is_file():
            whole, digest = _read_toml(pyproject)
            section = whole.get("tool", {}).get("ctxnb")
            if section is not None:
                where = f"{pyproject} [tool.ctxnb]"
                data = section
    if data is None:
        return CtxnbConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table of settings")
    cfg = validate_config({**data, "source": where, "source_sha256": digest}, where)
    if cfg.profile not in cfg.profiles:
        raise ConfigError(
            f"{where}: profile {cfg.profile!r} is not defined; "
            f"known profiles: {', '.join(sorted(cfg.profiles))}"
        )
    return cfg


def _read_toml(path: Path) -> tuple[dict[str, Any], str]:
    # O_NOFOLLOW: settings come from the file itself, never from where a link points.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(
            f"{path} cannot be read as settings ({e.strerror}); it must be a regular file, "
            "not a symlink"
        ) from None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    import hashlib
    import tomllib  # only when there is a file to read

    try:
        return tomllib.loads(data.decode("utf-8")), hashlib.sha256(data).hexdigest()
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid TOML: {e}; fix the syntax at that line") from None


def tool_ctxnb_changed(old: bytes | None, new: bytes | None) -> bool:
    """Whether a change of ``pyproject.toml`` from ``old`` to ``new`` bytes adds, alters
    or removes its ``[tool.ctxnb]`` table (settings are governance: no agent changes
    them). New bytes that are not valid TOML count as a change when there is a table.

    Example:
        >>> tool_ctxnb_changed(b"[project]\\nname='a'\\n", b"[project]\\nname='b'\\n")
        False
        >>> tool_ctxnb_changed(b"", b"[tool.ctxnb]\\nsandbox='none'\\n")
        True
    """

    import tomllib

    def table(data: bytes | None) -> object:
        if data is None:
            return None
        try:
            return tomllib.loads(data.decode("utf-8")).get("tool", {}).get("ctxnb")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, AttributeError):
            return ValueError

    before, after = table(old), table(new)
    if after is ValueError:
        return before is not None
    return before != after
