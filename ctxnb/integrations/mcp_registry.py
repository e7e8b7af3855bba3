"""Use other MCP servers: one client per configured server and one registry of what they offer.

:class:`McpRegistry` connects to each server of ``[mcp.servers]`` in ``ctxnb.toml``
(stdio or streamable HTTP, a bearer token from an environment variable), lists every
page of their tools, resources and prompts, and makes them searchable by words and by
meaning (:meth:`McpRegistry.search`, :meth:`McpRegistry.discover_relevant`) with the
shared embedder of :mod:`ctxnb.retrieval.embedding`. Tool names are qualified by their server
(``docs__search``) so that two servers never collide.

Calls go through the registry. :meth:`McpRegistry.attach` puts every outside tool into a
:class:`~ctxnb.tools.filetools.FileTools`, so that a call passes the same governance as
ctxnb's own tools: in a governed workspace a tool with side effects needs the intent
handshake, a destructive one a human's approval, and every call is audited and traced.
ctxnb's own MCP server re-exposes them that way when ``[adapters.mcp] expose_registry``
is set (a governed proxy).

What an outside server says of itself is a claim, not a grant. A tool is read-only (called
without an intent) only when a human says so in ``ctxnb.toml`` (``read_only_tools``); its
own ``readOnlyHint`` is kept as :attr:`RegisteredTool.claims_read_only` and decides
nothing. Its name and description are redacted and escaped when they are listed (a tool
is called by the name shown, the registry sends the server its own), and its error
messages are redacted whole before they are cut (:mod:`._mcp_outside`).

The clients run on an event loop of their own, in a background thread, so the registry is
used synchronously from a script or a notebook cell (whose own loop is already running).

A stdio server may be confined (``[sandbox] agent = true``, or its own ``sandbox =
true``): it then runs in bubblewrap with the workspace read-only, a private ``HOME``,
the ``[sandbox]`` limits and no network but its ``allowed_domains`` through ctxnb's
proxy (:mod:`ctxnb.sandbox.service`). :meth:`McpRegistry.sandbox_status` says, per
server, whether it is isolated and its process id. With ``[sandbox] production =
true`` a server that would run unconfined is refused before it starts.

Example ``ctxnb.toml``::

    [mcp.servers.docs]
    command = "python"
    args = ["docs_server.py"]

    [mcp.servers.github]
    url = "http://127.0.0.1:8931/mcp"
    bearer_token_env = "GITHUB_MCP_TOKEN"
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..config import McpServerConfig, load_config
from ..errors import (
    ConfigError,
    CtxnbError,
    NotFoundError,
    RegistryError,
    SandboxError,
)
from ..redaction.redactor import redact_data
from ..retrieval.embedding import DEFAULT, HybridIndex
from ..tools.schemas import ToolInfo
from ._mcp_outside import cap_result, error_text, schema_model, shown
from ._mcp_sdk import (
    Client,
    ClientSession,
    StdioServerParameters,
    anyio,
    get_default_environment,
    httpx2,
    stdio_client,
    streamable_http_client,
    types,
)

if TYPE_CHECKING:
    from ..config import SandboxConfig
    from ..govern.intents import Intent
    from ..sandbox.service import ConfinedService
    from ..tools.filetools import FileTools

__all__ = [
    "McpRegistry",
    "RegisteredPrompt",
    "RegisteredResource",
    "RegisteredTool",
    "RegistryHit",
    "ToolCallResult",
]

SEPARATOR = "__"
Kind = Literal["tool", "resource", "prompt"]
RequestHook = Callable[[str, str, dict[str, Any]], None]
ResponseHook = Callable[[str, str, Any], None]


# -- what the registry holds ------------------------------------------------------------------


@dataclass(frozen=True)
class RegisteredTool:
    """A tool of an outside server.

    Attributes:
        server: the server's name in ``[mcp.servers]``. name: the tool's own name, as
            the server is called with it. shown_name: that name redacted and escaped,
            as it is listed. qualified: ``server__shown_name``, unique in the registry.
        description: the tool's description, redacted and escaped.
        read_only: a human marked it read-only (the server's ``read_only_tools`` globs
            in ``ctxnb.toml``, matched against the shown name): it is called without an
            intent. claims_read_only: the tool's own ``readOnlyHint``, which grants
            nothing. destructive: MCP's ``destructiveHint``, which defaults to true for a
            tool that is not read-only (a claim of read-only does not change that).
    """

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool
    destructive: bool
    claims_read_only: bool = False
    shown_name: str = ""

    @property
    def qualified(self) -> str:
        return f"{self.server}{SEPARATOR}{self.shown_name or self.name}"


@dataclass(frozen=True)
class RegisteredResource:
    """A resource of an outside server (``qualified`` is ``server__uri``)."""

    server: str
    uri: str
    name: str
    description: str
    mime_type: str | None

    @property
    def qualified(self) -> str:
        return f"{self.server}{SEPARATOR}{self.uri}"


@dataclass(frozen=True)
class RegisteredPrompt:
    """A prompt of an outside server (``qualified`` is ``server__name``)."""

    server: str
    name: str
    description: str
    arguments: tuple[str, ...]

    @property
    def qualified(self) -> str:
        return f"{self.server}{SEPARATOR}{self.name}"


@dataclass(frozen=True)
class RegistryHit:
    """One search result: what it is, how well it matched, and the entry itself."""

    kind: Kind
    qualified: str
    score: float
    entry: RegisteredTool | RegisteredResource | RegisteredPrompt = field(repr=False)


@dataclass(frozen=True)
class ToolCallResult:
    """What an outside tool returned: its text, its structured content, whether it failed."""

    text: str
    structured: dict[str, Any] | None
    is_error: bool

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "is_error": self.is_error}
        if self.structured is not None:
            out["structured"] = self.structured
        return out


def _text_of(content: Any) -> str:
    parts = []
    for c in content or []:
        text = getattr(c, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            parts.append(f"[{getattr(c, 'type', 'content')} content]")
    return "\n".join(parts)


# -- the registry ------------------------------------------------------------------------------


class McpRegistry:
    """Clients of the configured MCP servers and one registry of their tools, resources, prompts.

    Args:
        servers: ``{name: McpServerConfig}`` (``load_config(root).mcp.servers``).
        root: the directory relative ``cwd`` settings of stdio servers start from.
        embedder: for :meth:`search` (the shared embedder by default; ``None`` for BM25).
        on_request: called as ``on_request(server, method, params)`` before each request.
        on_response: called as ``on_response(server, method, result)`` after each answer.
        sandbox: the workspace's ``[sandbox]`` settings: whether stdio servers are
            confined by default (``agent``), refused unconfined (``production``), their
            limits and read paths (None: the defaults, nothing confined).
        deny: the deny list masked in a confined server's view (None: the default).
        proxy_hosts: names a confined server's proxy resolves without DNS (a seam for
            tests and notebooks, see :class:`~ctxnb.sandbox.Sandbox`).

    Raises:
        ConfigError: a server's bearer token variable is unset, or a server would run
            unconfined under ``[sandbox] production = true``.

    Use it as a context manager (or call :meth:`connect` and :meth:`close`).
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        root: str | os.PathLike[str] = ".",
        embedder: Any = DEFAULT,
        on_request: RequestHook | None = None,
        on_response: ResponseHook | None = None,
        sandbox: SandboxConfig | None = None,
        deny: list[str] | None = None,
        proxy_hosts: Mapping[str, str] | None = None,
    ) -> None:
        from ..config import SandboxConfig

        self.servers = {n: s for n, s in servers.items() if s.enabled}
        self.sandbox = sandbox if sandbox is not None else SandboxConfig()
        self.deny = deny
        self.proxy_hosts = dict(proxy_hosts or {})
        self._confined: dict[str, ConfinedService] = {}
        self.root = Path(root)
        self._embedder = embedder
        self.on_request = on_request
        self.on_response = on_response
        self.tools: dict[str, RegisteredTool] = {}
        self.resources: dict[str, RegisteredResource] = {}
        self.prompts: dict[str, RegisteredPrompt] = {}
        self._index: HybridIndex | None = None
        self._sessions: dict[str, ClientSession] = {}
        #: The protocol revision each server was found to speak: 2026-07-28 when it
        #: answers ``server/discover``, else the ``initialize`` handshake's.
        self.protocol_versions: dict[str, str] = {}
        self._stack = contextlib.ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._lock = threading.Lock()
        for name, cfg in self.servers.items():
            if cfg.bearer_token_env and not os.environ.get(cfg.bearer_token_env):
                raise ConfigError(
                    f"MCP server {name!r} takes its bearer token from ${cfg.bearer_token_env}, "
                    "which is not set; export it before connecting"
                )
            if self.sandbox.production and cfg.command is not None and not self.confines(name):
                raise ConfigError(
                    f"MCP server {name!r} would run on the host with the user's rights, and "
                    "[sandbox] production = true refuses that; remove its 'sandbox = false' "
                    "(or set [sandbox] agent = true) in ctxnb.toml"
                )

    @classmethod
    def from_workspace(cls, root: str | os.PathLike[str], **kwargs: Any) -> McpRegistry:
        """The registry of the servers in ``root``'s ``ctxnb.toml`` (not yet connected).

        Example:
            >>> import tempfile
            >>> McpRegistry.from_workspace(tempfile.mkdtemp()).servers
            {}
        """
        cfg = load_config(root)
        kwargs.setdefault("sandbox", cfg.sandbox)
        kwargs.setdefault("deny", cfg.policy.deny)
        return cls(cfg.mcp.servers, root=root, **kwargs)

    def confines(self, name: str) -> bool:
        """Whether the stdio server ``name`` runs in a sandbox: its own ``sandbox``
        setting, else ``[sandbox] agent``."""
        cfg = self.servers[name]
        return cfg.sandbox if cfg.sandbox is not None else self.sandbox.agent

    def sandbox_status(self) -> dict[str, dict[str, Any]]:
        """``sandboxStatus`` of each server: ``isolated``, ``pid`` (the sandbox's, while
        connected), the network it has; for one that is not, the reason.

        Example:
            >>> import tempfile
            >>> McpRegistry.from_workspace(tempfile.mkdtemp()).sandbox_status()
            {}
        """
        from ..sandbox.service import unconfined_status

        out: dict[str, dict[str, Any]] = {}
        for name, cfg in self.servers.items():
            if name in self._confined:
                out[name] = self._confined[name].status()
            elif cfg.url is not None:
                out[name] = unconfined_status("a remote server over HTTP: ctxnb does not run it")
            elif self.confines(name):
                out[name] = {**unconfined_status("not connected"), "isolated": None}
            else:
                why = "sandbox = false" if cfg.sandbox is False else "[sandbox] agent is off"
                out[name] = unconfined_status(f"runs on the host ({why})")
        return out

    def __repr__(self) -> str:
        state = "connected" if self._portal is not None else "not connected"
        return (
            f"McpRegistry({len(self.servers)} servers, {len(self.tools)} tools, "
            f"{len(self.resources)} resources, {len(self.prompts)} prompts; {state})"
        )

    # -- connections ----------------------------------------------------------------------

    def __enter__(self) -> McpRegistry:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> McpRegistry:
        """Connect to every server and list every page of what each offers."""
        if self._portal is not None:
            return self
        try:
            self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
            for name, cfg in self.servers.items():
                session = self._stack.enter_context(
                    self._portal.wrap_async_context_manager(self._open(name, cfg))
                )
                self._sessions[name] = session
                self._portal.call(self._load, name, session, cfg)
        except BaseException as exc:
            self.close()
            if isinstance(exc, CtxnbError):
                raise
            raise RegistryError(
                "could not connect to the MCP servers "
                f"({type(exc).__name__}: {error_text(str(exc))}); check "
                "[mcp.servers] in ctxnb.toml and that each server starts on its own"
            ) from exc
        self._index = None
        return self

    def close(self) -> None:
        """Disconnect every server (stdio servers are stopped)."""
        with contextlib.suppress(Exception):
            self._stack.close()
        self._stack = contextlib.ExitStack()
        self._sessions.clear()
        self._portal = None
        for svc in self._confined.values():
            svc.close()
        self._confined.clear()

    @contextlib.asynccontextmanager
    async def _open(self, name: str, cfg: McpServerConfig) -> AsyncIterator[ClientSession]:
        if cfg.command is not None:
            env = {**get_default_environment(), **cfg.env}
            cwd = self.root / cfg.cwd if cfg.cwd else self.root
            command, args = cfg.command, list(cfg.args)
            if self.confines(name):
                svc = self._confine(name, cfg, env, cwd)
                command, args = svc.argv[0], svc.argv[1:]
            params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
            with open(os.devnull, "w") as errlog:
                transport = stdio_client(params, errlog=errlog)
                async with Client(
                    transport, mode="auto", read_timeout_seconds=cfg.timeout
                ) as client:
                    self.protocol_versions[name] = client.protocol_version
                    yield client.session
        else:
            assert cfg.url is not None
            headers = dict(cfg.headers)
            if cfg.bearer_token_env:
                headers["Authorization"] = f"Bearer {os.environ[cfg.bearer_token_env]}"
            http = httpx2.AsyncClient(headers=headers, timeout=cfg.timeout)
            async with http:
                transport = streamable_http_client(cfg.url, http_client=http)
                async with Client(
                    transport, mode="auto", read_timeout_seconds=cfg.timeout
                ) as mcp_client:
                    self.protocol_versions[name] = mcp_client.protocol_version
                    yield mcp_client.session

    def _confine(
        self, name: str, cfg: McpServerConfig, env: dict[str, str], cwd: Path
    ) -> ConfinedService:
        from ..sandbox.plan import SandboxLimits
        from ..sandbox.service import confine_service

        s = self.sandbox
        try:
            svc = confine_service(
                self.root,
                [cfg.command or "", *cfg.args],
                cwd=cwd,
                env=env,
                env_allow=list(cfg.env),  # what a human named for this server passes
                deny=self.deny,
                network=cfg.network,
                allowed_domains=[*s.allowed_domains, *cfg.allowed_domains],
                read_paths=[*s.read_paths, *cfg.read_paths],
                limits=SandboxLimits(
                    max_memory_mb=s.max_memory_mb,
                    max_file_mb=s.max_file_mb,
                    max_processes=s.max_processes,
                    max_open_files=s.max_open_files,
                ),
                proxy_hosts=self.proxy_hosts,
                git=s.git,
            )
        except SandboxError as e:
            raise SandboxError(
                f"MCP server {name!r} is to run confined, and cannot be: {e.message}",
                required_action="Fix the sandbox set-up, or (a human, outside production) "
                f"set sandbox = false under [mcp.servers.{name}] in ctxnb.toml.",
            ) from e
        self._confined[name] = svc
        return svc

    async def _request(self, server: str, method: str, params: dict[str, Any], send: Any) -> Any:
        if self.on_request is not None:
            self.on_request(server, method, params)
        result = await send()
        if self.on_response is not None:
            self.on_response(server, method, result)
        return result

    async def _pages(self, server: str, method: str, fetch: Any, attr: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page_params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            res = await self._request(
                server, method, {"cursor": cursor}, lambda p=page_params: fetch(params=p)
            )
            items.extend(getattr(res, attr) or [])
            cursor = res.next_cursor
            if not cursor or cursor in seen:  # a server repeating a cursor must not loop us
                return items
            seen.add(cursor)

    async def _load(self, name: str, session: ClientSession, cfg: McpServerConfig) -> None:
        caps = session.server_capabilities if hasattr(session, "server_capabilities") else None
        tools = await self._pages(name, "tools/list", session.list_tools, "tools")
        for t in tools:
            ann = t.annotations
            label = shown(t.name)
            # Only a human grants read-only; the server's readOnlyHint is its own claim, and
            # a server that lies about it would otherwise act with no intent at all.
            read_only = any(fnmatch.fnmatchcase(label, g) for g in cfg.read_only_tools)
            hint = ann.destructive_hint if ann is not None else None
            reg = RegisteredTool(
                server=name,
                name=t.name,
                description=shown(t.description or ""),
                input_schema=dict(t.input_schema or {}),
                read_only=read_only,
                # MCP's default: a tool that is not read-only may destroy (destructiveHint).
                destructive=(not read_only) and (hint is None or bool(hint)),
                claims_read_only=bool(ann and ann.read_only_hint),
                shown_name=label,
            )
            # Two names that show alike (two secrets redacted to one marker) would make one
            # call reach the other tool: the first keeps the name, the other is not offered.
            self.tools.setdefault(reg.qualified, reg)
        if caps is None or getattr(caps, "resources", True):
            with contextlib.suppress(Exception):  # a server without resources says so
                for r in await self._pages(
                    name, "resources/list", session.list_resources, "resources"
                ):
                    res = RegisteredResource(
                        name,
                        str(r.uri),
                        shown(r.name or ""),
                        shown(r.description or ""),
                        r.mime_type,
                    )
                    self.resources[res.qualified] = res
        if caps is None or getattr(caps, "prompts", True):
            with contextlib.suppress(Exception):
                for p in await self._pages(name, "prompts/list", session.list_prompts, "prompts"):
                    args = tuple(shown(a.name) for a in (p.arguments or []))
                    pr = RegisteredPrompt(name, p.name, shown(p.description or ""), args)
                    self.prompts[pr.qualified] = pr

    def _require(self) -> anyio.from_thread.BlockingPortal:
        if self._portal is None:
            raise RegistryError(
                "the MCP registry is not connected; use `with McpRegistry(...) as registry:` "
                "or call registry.connect()"
            )
        return self._portal

    # -- search ------------------------------------------------------------------------------

    def _entries(self) -> dict[str, tuple[Kind, Any]]:
        out: dict[str, tuple[Kind, Any]] = {}
        for q, t in self.tools.items():
            out[f"tool:{q}"] = ("tool", t)
        for q, r in self.resources.items():
            out[f"resource:{q}"] = ("resource", r)
        for q, p in self.prompts.items():
            out[f"prompt:{q}"] = ("prompt", p)
        return out

    @staticmethod
    def _text(kind: Kind, e: Any) -> str:
        if kind == "tool":
            props = " ".join(
                f"{k} {v.get('description', '')}" if isinstance(v, dict) else str(k)
                for k, v in (e.input_schema.get("properties") or {}).items()
            )
            return f"{e.name} {e.description} {props}"
        if kind == "resource":
            return f"{e.name} {e.uri} {e.description}"
        return f"{e.name} {e.description} {' '.join(e.arguments)}"

    def search(self, query: str, k: int = 5, *, kind: Kind | None = None) -> list[RegistryHit]:
        """Tools, resources and prompts ranked against ``query`` (words and meaning fused).

        Args:
            query: a task or a question.
            k: how many results.
            kind: only ``"tool"``, ``"resource"`` or ``"prompt"`` entries.
        """
        entries = self._entries()
        with self._lock:
            if self._index is None or len(self._index) != len(entries):
                self._index = HybridIndex(
                    {key: self._text(kd, e) for key, (kd, e) in entries.items()},
                    embedder=self._embedder,
                )
            index = self._index
        hits = index.search(query, k=len(entries) if kind else k)
        out = []
        for h in hits:
            kd, e = entries[h.id]
            if kind is None or kd == kind:
                out.append(RegistryHit(kd, e.qualified, h.score, e))
        return out[:k]

    def discover_relevant(self, intent: Intent | str, k: int = 5) -> list[RegistryHit]:
        """What the registry offers for an intent (its name, constraints and criteria)."""
        if isinstance(intent, str):
            query = intent
        else:
            query = " ".join([intent.name, *intent.constraints, *intent.acceptance_criteria])
        return self.search(query, k=k)

    # -- calls -------------------------------------------------------------------------------

    def _split(self, qualified: str) -> tuple[str, str]:
        if qualified not in self.tools:
            known = ", ".join(sorted(self.tools)) or "(none)"
            raise NotFoundError(f"no registered MCP tool {qualified!r}; known: {known}")
        t = self.tools[qualified]
        return t.server, t.name

    def call_tool(self, qualified: str, arguments: dict[str, Any] | None = None) -> ToolCallResult:
        """Call an outside tool as it is, without governance (see :meth:`attach` for that).

        Raises:
            NotFoundError: no such tool. RegistryError: the server failed to answer.
        """
        portal = self._require()
        server, name = self._split(qualified)
        session = self._sessions[server]
        args = dict(arguments or {})

        async def call() -> Any:
            return await self._request(
                server,
                "tools/call",
                {"name": name, "arguments": args},
                lambda: session.call_tool(name, args),
            )

        try:
            res = portal.call(call)
        except CtxnbError:
            raise
        except Exception as exc:
            # The message is the server's (an MCP error it sent): redacted whole, then cut.
            raise RegistryError(
                f"{qualified} failed on server {server!r}: {error_text(str(exc))}"
            ) from exc
        structured = getattr(res, "structured_content", None)
        return ToolCallResult(_text_of(res.content), structured, bool(res.is_error))

    def read_resource(self, qualified: str) -> str:
        """The text of an outside resource (``server__uri``)."""
        portal = self._require()
        if qualified not in self.resources:
            raise NotFoundError(f"no registered MCP resource {qualified!r}")
        r = self.resources[qualified]
        session = self._sessions[r.server]

        async def read() -> Any:
            return await self._request(
                r.server, "resources/read", {"uri": r.uri}, lambda: session.read_resource(r.uri)
            )

        res = portal.call(read)
        return "\n".join(getattr(c, "text", "") or "" for c in res.contents)

    def get_prompt(self, qualified: str, arguments: dict[str, str] | None = None) -> list[dict]:
        """The messages of an outside prompt, as ``{"role", "content"}`` dicts."""
        portal = self._require()
        if qualified not in self.prompts:
            raise NotFoundError(f"no registered MCP prompt {qualified!r}")
        p = self.prompts[qualified]
        session = self._sessions[p.server]
        args = dict(arguments or {})

        async def get() -> Any:
            return await self._request(
                p.server,
                "prompts/get",
                {"name": p.name, "arguments": args},
                lambda: session.get_prompt(p.name, args),
            )

        res = portal.call(get)
        return [{"role": m.role, "content": _text_of([m.content])} for m in res.messages]

    # -- governance --------------------------------------------------------------------------

    def tool_info(self, qualified: str) -> ToolInfo:
        """The :class:`~ctxnb.tools.schemas.ToolInfo` under which governance sees a tool."""
        t = self.tools[qualified]
        # The description and the schema go to the model in every tool list: what an
        # outside server wrote there was redacted and escaped when it was listed.
        return ToolInfo(
            name=t.qualified,
            description=f"[{t.server}] {t.description}".strip(),
            args=schema_model(t.qualified, t.input_schema, server=t.server),
            mutating=not t.read_only,
            idempotent=t.read_only,
            destructive=t.destructive,
            external=True,
        )

    def attach(self, tools: FileTools) -> list[str]:
        """Offer every outside tool through ``tools``, governed like ctxnb's own.

        Each call then goes through ``tools.dispatch``: the path of every engine (intent,
        approval for destructive tools, audit line, tool call in the session, trace
        record) before this registry forwards it. Returns the qualified names added.
        """
        self._require()
        added = []
        for q in self.tools:

            def run(_q: str = q, **kwargs: Any) -> dict[str, Any]:
                result = self.call_tool(_q, kwargs)
                # What an outside server says goes toward the model: the one redaction pass.
                if result.is_error:
                    raise RegistryError(f"{_q} reported an error: {error_text(result.text)}")
                return cap_result(redact_data(result.to_dict()))

            tools.register_tool(self.tool_info(q), run, governed=True)
            added.append(q)
        return added


@contextlib.contextmanager
def connected(root: str | os.PathLike[str], **kwargs: Any) -> Iterator[McpRegistry]:
    """``with connected(root) as registry:`` — the workspace's registry, connected."""
    registry = McpRegistry.from_workspace(root, **kwargs)
    with registry:
        yield registry
