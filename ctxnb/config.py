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

Settings are resolved in one order everywhere: an explicit argument, then an
environment variable (``CTXNB_PROFILE``), then the config file, then the default.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._util.defaults import DEFAULT_BREAKER_THRESHOLD, UNKNOWN_COMMAND_DEFAULT
from ._util.domains import check_pattern
from .access.pathrules import DEFAULT_DENY, MAX_PATH_BYTES
from .errors import ConfigError
from .store._log import COMPACT_AFTER

__all__ = [
    "CONFIG_FILE",
    "AdaptersConfig",
    "CtxnbConfig",
    "GovernanceConfig",
    "IndexConfig",
    "McpConfig",
    "McpServerConfig",
    "MountConfig",
    "PolicyConfig",
    "Profile",
    "RulesConfig",
    "SandboxConfig",
    "SkillsConfig",
    "load_config",
    "tool_ctxnb_changed",
]

CONFIG_FILE = "ctxnb.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MountConfig(_Strict):
    """A mount mapping: what the agent sees at ``agent_prefix`` lives at ``canonical_prefix``."""

    agent_prefix: str
    canonical_prefix: str
    filesystem_id: str | None = Field(
        default=None, description="defaults to this machine's filesystem id"
    )


class IndexConfig(_Strict):
    """What ``index_tree`` walks: extra ignore patterns (gitignore syntax) and limits."""

    ignore: list[str] = Field(default_factory=list)
    max_file_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    use_gitignore: bool = True
    batch_size: int = Field(default=2000, gt=0)
    compact_after: int = Field(
        default=COMPACT_AFTER, ge=0, description="compact the store when more transactions wait"
    )


class PolicyConfig(_Strict):
    """Path policy of the file tools: allow and deny globs (gitignore syntax)."""

    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY))
    max_path_bytes: int = Field(default=MAX_PATH_BYTES, gt=0)
    sensitive: list[str] = Field(
        default_factory=list,
        description="globs of files whose reading or writing waits for a human's approval "
        "(governed workspaces)",
    )


class Profile(_Strict):
    """How much one read may return to the model."""

    max_read_chars: int = Field(gt=0)
    excerpt_lines: int = Field(gt=0)
    summary_tokens: int = Field(gt=0)


DEFAULT_PROFILES: dict[str, Profile] = {
    # A small local model: a read returns at most ~4k tokens.
    "local": Profile(max_read_chars=16_000, excerpt_lines=60, summary_tokens=400),
    # A large cloud model: a read returns at most ~25k tokens.
    "cloud": Profile(max_read_chars=100_000, excerpt_lines=200, summary_tokens=1500),
}


class GovernanceConfig(_Strict):
    """Settings of the hook engine."""

    unknown_command: Literal["SAFE", "DESTRUCTIVE"] = UNKNOWN_COMMAND_DEFAULT
    safe_commands: list[str] = Field(default_factory=list)
    quality_commands: list[str] = Field(default_factory=list)
    breaker_threshold: int = Field(default=DEFAULT_BREAKER_THRESHOLD, gt=0)
    command_timeout: float = Field(default=120.0, gt=0)
    model_id: str | None = None


class McpServerConfig(_Strict):
    """One outside MCP server: a command over stdio, or a URL over streamable HTTP.

    A bearer token is never written in the file: ``bearer_token_env`` names the
    environment variable that holds it.
    """

    command: str | None = Field(default=None, description="stdio: the program to start")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(default=None, description="streamable HTTP endpoint")
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    enabled: bool = True
    read_only_tools: list[str] = Field(
        default_factory=list,
        description="tool-name globs (on the names as listed) a human marks read-only: "
        "called without an intent; a tool's own readOnlyHint grants nothing",
    )
    sandbox: bool | None = Field(
        default=None,
        description="run this stdio server in bubblewrap with the workspace read-only "
        "(default: as [sandbox] agent says)",
    )
    allowed_domains: list[str] = Field(
        default_factory=list,
        description="domains this confined server may reach through ctxnb's proxy",
    )
    network: bool = Field(
        default=False, description="let this confined server share the host's network"
    )
    read_paths: list[str] = Field(
        default_factory=list,
        description="host paths this confined server may read (its own files outside the "
        "workspace)",
    )

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return [check_pattern(d) for d in value]

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give exactly one of 'command' (a stdio server) or 'url' (an HTTP server)"
            )
        return self


class McpConfig(_Strict):
    """Outside MCP servers that ctxnb connects to (``[mcp.servers.NAME]``)."""

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in v:
            if not name or "__" in name or not name.replace("-", "_").isidentifier():
                raise ValueError(
                    f"server name {name!r} must be a simple identifier without '__' (it "
                    "prefixes the server's tool names, e.g. 'github__create_issue')"
                )
        return v


class SkillsConfig(_Strict):
    """Where SKILL.md skills live, relative to the workspace root.

    ``root`` is searched first, then ``.ctxnb/skills`` and ``.claude/skills``.
    """

    root: str | None = None


class RulesConfig(_Strict):
    """Where AGENTS.md rules discovery looks, relative to the workspace root: only rules
    files in this subtree are found (``"."``, the default, is the whole workspace)."""

    root: str = "."


class ClaudeCodeAdapterConfig(_Strict):
    """The Claude Code hook adapter."""

    enabled: bool = True


class McpAdapterConfig(_Strict):
    """ctxnb's own MCP server."""

    enabled: bool = True
    expose_registry: bool = Field(
        default=False,
        description="re-expose the tools of [mcp.servers] through ctxnb's server, governed",
    )
    max_message_bytes: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        description="longest JSON-RPC line accepted over stdio; a longer one is refused "
        "with -32600",
    )
    tool_listing: Literal["intent", "all"] = Field(
        default="intent",
        description="'intent': tools/list shows what the client's intent may use plus "
        "search_tools (outside servers' tools are found with it); 'all': every tool",
    )


class AcpAdapterConfig(_Strict):
    """``ctxnb acp serve``: the live agent for ACP clients (flags override these)."""

    model: str | None = Field(default=None, description="a litellm model name")
    api_base: str | None = Field(default=None, description="an OpenAI-compatible endpoint")
    api_key_env: str | None = Field(
        default=None, description="the environment variable that holds the API key"
    )
    strategy: str = Field(default="keep-all", description="a context strategy spec")
    budget: int | None = Field(default=None, gt=0)
    intent: str | None = Field(default=None, description="the intent sessions start under")
    step_limit: int = Field(default=30, gt=0)
    command_timeout: float = Field(default=60.0, gt=0)
    permission_timeout: float = Field(default=300.0, gt=0)


class A2aAdapterConfig(AcpAdapterConfig):
    """``ctxnb a2a serve``: the live agent for A2A peers (flags override these)."""

    host: str = Field(default="127.0.0.1", description="the address to bind (loopback)")
    port: int = Field(default=9999, ge=0, le=65535, description="the TCP port (0: a free one)")


class AdaptersConfig(_Strict):
    """The integrations that put ctxnb between an agent and the workspace."""

    claude_code: ClaudeCodeAdapterConfig = Field(default_factory=ClaudeCodeAdapterConfig)
    mcp: McpAdapterConfig = Field(default_factory=McpAdapterConfig)
    acp: AcpAdapterConfig = Field(default_factory=AcpAdapterConfig)
    a2a: A2aAdapterConfig = Field(default_factory=A2aAdapterConfig)


class SandboxConfig(_Strict):
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

    backend: Literal["bwrap", "none"] = "bwrap"
    git: Literal["auto", "read"] = Field(
        default="auto",
        description="'read': let commands read git's object stores even when they hold "
        "denied bytes (by default such a store is hidden)",
    )
    network: bool = Field(default=False, description="let commands reach the network")
    agent: bool = Field(
        default=False,
        description="confine the agent too: outside MCP servers of the registry run in "
        "bubblewrap with the workspace read-only (per server: [mcp.servers.NAME] sandbox)",
    )
    production: bool = Field(
        default=False,
        description="refuse to start what should be confined when it cannot be: an outside "
        "MCP server with sandbox = false, or without a bubblewrap that works here",
    )
    allowed_domains: list[str] = Field(
        default_factory=list,
        description="domains commands may reach through ctxnb's proxy (pypi.org, "
        "*.pythonhosted.org); all others are refused",
    )
    env: list[str] = Field(default_factory=list, description="more variables passed through")
    read_paths: list[str] = Field(default_factory=list, description="more read-only host paths")
    max_memory_mb: int | None = Field(default=8192, gt=0)
    max_file_mb: int | None = Field(default=1024, gt=0)
    max_processes: int | None = Field(default=4096, gt=0)
    max_open_files: int | None = Field(default=4096, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"backend": data} if isinstance(data, str) else data

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return [check_pattern(d) for d in value]


class CtxnbConfig(_Strict):
    """All settings of one workspace."""

    profile: str = "cloud"
    profiles: dict[str, Profile] = Field(default_factory=lambda: dict(DEFAULT_PROFILES))
    mounts: list[MountConfig] = Field(default_factory=list)
    index: IndexConfig = Field(default_factory=IndexConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    governance: GovernanceConfig = Field(default_factory=GovernanceConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    rules: RulesConfig = Field(default_factory=RulesConfig)
    adapters: AdaptersConfig = Field(default_factory=AdaptersConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    source: str | None = Field(default=None, description="the file the settings came from")
    source_sha256: str | None = Field(
        default=None,
        description="SHA-256 of the settings file's bytes (recorded with each command's "
        "commit, so a trace says which settings governed it)",
    )

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


def _format_validation(where: str, err: ValidationError) -> str:
    lines = [f"invalid ctxnb settings in {where}:"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            parent = e["loc"][:-1]
            allowed = _allowed_keys(parent)
            lines.append(f"  unknown key {key!r}; allowed here: {', '.join(allowed) or '(none)'}")
        else:
            lines.append(f"  {key}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    model: Any = CtxnbConfig
    keyed = False  # the last field was a dict: the next part is a key the user chose
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        if keyed:
            keyed = False
            continue
        field = model.model_fields.get(str(part)) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        keyed = getattr(ann, "__origin__", None) is dict
        model = next(
            (a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
    if model is None:
        return []
    return sorted(k for k in model.model_fields if k != "source")


def _merge_profiles(data: dict[str, Any]) -> dict[str, Any]:
    # User profiles add to (or override) the built-in ones instead of replacing all of them.
    if "profiles" in data and isinstance(data["profiles"], dict):
        merged: dict[str, Any] = {k: v.model_dump() for k, v in DEFAULT_PROFILES.items()}
        merged.update(data["profiles"])
        data = {**data, "profiles": merged}
    return data


def load_config(root: str | os.PathLike[str]) -> CtxnbConfig:
    """Load the settings of the workspace at ``root``.

    ``ctxnb.toml`` wins over ``[tool.ctxnb]`` in ``pyproject.toml``; with neither,
    every default applies.

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
    try:
        cfg = CtxnbConfig.model_validate(
            {**_merge_profiles(data), "source": where, "source_sha256": digest}
        )
    except ValidationError as e:
        raise ConfigError(_format_validation(where, e)) from None
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
