"""Model calls through litellm, offline by default, with their tokens and dollars counted.

litellm downloads its model cost map from the network when it is imported, unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is set; ctxnb never downloads at run time, so
:func:`litellm_module` sets it (when the user has not) before the first import.
mini-swe-agent's banner and telemetry-free start are arranged the same way.

:class:`LiteLLMSummarizer` is a summarizer for :class:`~ctxnb.strategies.builtin.Summarize` that
asks any litellm model; every call's tokens and dollars are counted, and
:meth:`LiteLLMSummarizer.take_usage` hands them to the replay results.

Example:
    >>> s = LiteLLMSummarizer("openai/gpt-5-mini", api_base="http://127.0.0.1:9/v1")
    >>> s.model, s.calls
    ('openai/gpt-5-mini', 0)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from ..redaction.redactor import redact_text
from .prices import PriceTable, resolve_prices

if TYPE_CHECKING:
    from .semcache import SemanticCache

__all__ = ["CallUsage", "LiteLLMSummarizer", "call_usage", "litellm_module"]

_OFFLINE_ENV = {
    # The cost map ships inside the litellm package; never fetch it.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # mini-swe-agent prints a banner on import unless told not to.
    "MSWEA_SILENT_STARTUP": "1",
}


def offline_environment() -> None:
    """Set the variables that keep litellm and mini-swe-agent off the network at import."""
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def litellm_module() -> Any:
    """The ``litellm`` module, imported with its cost map read from the package.

    Raises:
        MissingDependencyError: litellm is not installed.
    """
    offline_environment()
    try:
        import litellm
    except ImportError:
        raise MissingDependencyError(
            "litellm is not installed; install it with: pip install 'ctxnb[live]'"
        ) from None
    litellm.suppress_debug_info = True  # no "Give Feedback" banners in notebooks and logs
    _filter_litellm_schema_warning()
    return litellm


def _filter_litellm_schema_warning() -> None:
    """Keep litellm's own schema note out of the caller's notebook and log.

    litellm's first ``completion()`` imports modules whose TypedDicts (its GitHub Copilot
    authenticator, its thinking blocks …) make pydantic warn that ``ReadOnly`` items are
    not protected: a library's note to itself, about no call of ctxnb, printed in the
    middle of a run (and an error where warnings are). Which modules do it changes with
    litellm's version, so the one message is filtered, not a list of modules."""
    import warnings

    warnings.filterwarnings(
        "ignore", message=r"Items? .* (is|are) using the `ReadOnly` qualifier", category=UserWarning
    )


@dataclass(frozen=True)
class CallUsage:
    """Tokens of one model call and what they cost.

    Attributes:
        prompt_tokens: every prompt token (cached ones included).
        cached_tokens: prompt tokens the provider read from its cache.
        completion_tokens: output tokens.
        cost_usd: dollars with caching as billed (NaN when the model has no price).
        cost_usd_uncached: dollars if every prompt token were billed as input.
    """

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cost_usd: float
    cost_usd_uncached: float


def call_usage(usage: Any, model: str, prices: PriceTable) -> CallUsage:
    """The tokens and dollars of one response's ``usage`` (an object or a mapping).

    Example:
        >>> u = call_usage({"prompt_tokens": 1000, "completion_tokens": 10,
        ...                 "prompt_tokens_details": {"cached_tokens": 800}},
        ...                "gpt-5-mini", PriceTable.default())
        >>> u.cached_tokens, round(u.cost_usd * 1e6)
        (800, 90)
    """

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    prompt = int(get(usage, "prompt_tokens") or 0)
    completion = int(get(usage, "completion_tokens") or 0)
    details = get(usage, "prompt_tokens_details")
    cached = int((get(details, "cached_tokens") if details is not None else 0) or 0)
    # Anthropic reports cache reads apart from the (uncached) prompt tokens.
    cached = max(cached, int(get(usage, "cache_read_input_tokens") or 0))
    cached = min(cached, prompt)
    price = prices.price_or_warn(model)
    nan = float("nan")
    return CallUsage(
        prompt_tokens=prompt,
        cached_tokens=cached,
        completion_tokens=completion,
        cost_usd=nan
        if price is None
        else price.cost(cache_read=cached, new=prompt - cached, output=completion),
        cost_usd_uncached=nan
        if price is None
        else price.cost(new=prompt, output=completion, caching=False),
    )


class LiteLLMSummarizer:
    """Summaries written by a model through litellm (for :class:`~ctxnb.strategies.Summarize`).

    Args:
        model: any litellm model name (``anthropic/claude-haiku-4-5``, ``openai/...``).
        api_base: an OpenAI-compatible endpoint, when not the provider's own.
        api_key: the key, when not in the provider's environment variable.
        prices: the price table its calls are billed with (see
            :func:`~ctxnb.llm.prices.resolve_prices`).
        instructions: the system prompt of each call.
        cache: a :class:`~ctxnb.llm.semcache.SemanticCache`; an output close enough in meaning
            to one summarized before (same model and budget) reuses that summary instead
            of calling the model. Its hits cost no tokens and no dollars.
        **completion_kwargs: passed on to ``litellm.completion``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        prices: Any = None,
        instructions: str = (
            "Summarize this tool output for a coding agent that will not see it again. Keep "
            "file paths, line numbers, error messages and numbers exactly; drop repetition."
        ),
        cache: SemanticCache | None = None,
        **completion_kwargs: Any,
    ) -> None:
        self.model = model
        self.cache = cache
        self.api_base = api_base
        self.api_key = api_key
        self.prices = resolve_prices(prices)
        self.instructions = instructions
        self.completion_kwargs = completion_kwargs
        self.calls = 0
        self.usage: list[CallUsage] = []
        self._taken = 0

    def __call__(self, label: str, text: str, max_tokens: int) -> str:
        # The output goes to a model: it leaves ctxnb redacted, like the context does.
        text = redact_text(text)
        if self.cache is None:
            return self._complete(label, text, max_tokens)
        summary, _hit = self.cache.get_or_call(
            text,
            lambda: self._complete(label, text, max_tokens),
            model=f"{self.model}|{max_tokens}",
        )
        return str(summary)

    def _complete(self, label: str, text: str, max_tokens: int) -> str:
        litellm = litellm_module()
        response = litellm.completion(
            model=self.model,
            messages=[
                {"role": "system", "content": self.instructions},
                {"role": "user", "content": f"Output of {label}:\n\n{text}"},
            ],
            max_tokens=max_tokens,
            api_base=self.api_base,
            api_key=self.api_key,
            **self.completion_kwargs,
        )
        self.calls += 1
        self.usage.append(call_usage(response.usage, self.model, self.prices))
        return str(response.choices[0].message.content or "").strip()

    def take_usage(self) -> tuple[int, float]:
        """(tokens, dollars) of the calls made since the last time this was asked."""
        new = self.usage[self._taken :]
        self._taken = len(self.usage)
        tokens = sum(u.prompt_tokens + u.completion_tokens for u in new)
        return tokens, sum(u.cost_usd for u in new)

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer({self.model!r})"
