"""What model calls cost, as providers bill them: input, cache writes, cache reads, output.

Providers bill a prompt in up to three parts: tokens read from the prompt cache (about
a tenth of the input price), tokens written to it (Anthropic charges 1.25× input for a
5-minute write; OpenAI and Gemini cache implicitly at the input price) and the rest at
the input price; output is billed apart. A flat per-token price cannot tell a strategy
that keeps the prompt's prefix stable from one that rewrites it every step, so ctxnb
prices every step both ways.

The table shipped with ctxnb (``ctxnb/data/prices.json``) is dated and names its
source; prices change, so pass your own wherever ctxnb takes ``prices=`` (a
:class:`PriceTable`, a mapping of model to prices, or the path of a JSON file in the
same shape), or set ``CTXNB_PRICES`` to such a file.

Example:
    >>> table = PriceTable.default()
    >>> p = table.get("anthropic/claude-sonnet-4-5")
    >>> (p.input, p.cache_read, p.output)
    (3.0, 0.3, 15.0)
    >>> round(p.cost(new=1_000_000, output=100_000), 2)   # cache writes at 1.25× input
    5.25
    >>> round(p.cost(new=1_000_000, output=100_000, caching=False), 2)
    4.5
    >>> mine = table.with_prices({"my-model": {"input": 1, "cache_write": 1,
    ...                                        "cache_read": 0.1, "output": 2}})
    >>> mine.get("my-model").cost(cache_read=1_000_000)
    0.1
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, NotFoundError

__all__ = [
    "ONE_HOUR_WRITE_FACTOR",
    "CacheTTL",
    "ModelPrice",
    "PriceTable",
    "UnpricedModelWarning",
    "normalize_model",
    "recorded_cost",
    "resolve_prices",
]

_PER = 1_000_000

CacheTTL = Literal["5m", "1h"]
"""How long a prompt cache keeps what is written to it: the price of a cache write."""

ONE_HOUR_WRITE_FACTOR = 2.0
"""Anthropic bills a write to its one-hour cache at twice the input price."""
# Routing prefixes (litellm, OpenRouter, mini-swe-agent's model names) that do not change
# the price of the model behind them.
_PREFIXES = ("anthropic/", "openai/", "google/", "gemini/", "vertex_ai/", "openrouter/")
# A dated release of a listed model (``claude-sonnet-4-5-20250929``, Vertex AI's
# ``claude-sonnet-4-5@20250929``) costs what the model costs.
_DATED = re.compile(r"(?:-|@)(?:20\d{6}|20\d\d-\d\d-\d\d)$")


class UnpricedModelWarning(UserWarning):
    """A model has no price in the table: its dollars are NaN (never counted as $0)."""


def normalize_model(model: str) -> str:
    """A model's name as the price table spells it.

    Routing prefixes (``openrouter/``, ``google/``, ...), the ``@`` of names written
    ``@provider/model`` and surrounding whitespace are dropped; case is kept.

    Example:
        >>> normalize_model("@google/gemini-3-pro-preview")
        'gemini-3-pro-preview'
        >>> normalize_model("openrouter/anthropic/claude-sonnet-4-5")
        'claude-sonnet-4-5'
    """
    name = model.strip().lstrip("@")
    while True:
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        else:
            return name


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices, in USD per million tokens.

    Attributes:
        model: the model's name in the table.
        input: uncached prompt tokens.
        cache_write: prompt tokens written to the cache.
        cache_read: prompt tokens read from the cache.
        output: completion tokens.
        source: where the prices come from.
        as_of: the date they were taken.
    """

    model: str
    input: float
    cache_write: float
    cache_read: float
    output: float
    source: str = ""
    as_of: str = ""

    def with_cache_ttl(self, ttl: CacheTTL) -> ModelPrice:
        """These prices, with cache writes billed at the rate of a cache kept ``ttl``.

        ``"5m"`` is the table's ``cache_write``; ``"1h"`` is Anthropic's one-hour cache,
        whose writes cost :data:`ONE_HOUR_WRITE_FACTOR` times the input price (Claude
        Code asks for it).

        Example:
            >>> p = PriceTable.default().get("claude-sonnet-4-5")
            >>> (p.cache_write, p.with_cache_ttl("1h").cache_write)
            (3.75, 6.0)
        """
        if ttl == "5m":
            return self
        if ttl == "1h":
            return replace(self, cache_write=ONE_HOUR_WRITE_FACTOR * self.input)
        raise ValueError(f"cache_write_ttl must be '5m' or '1h', got {ttl!r}")

    def cost(
        self, *, cache_read: int = 0, new: int = 0, output: int = 0, caching: bool = True
    ) -> float:
        """Dollars for one call.

        Args:
            cache_read: prompt tokens the provider can read from its cache.
            new: the other prompt tokens (written to the cache when caching).
            output: completion tokens.
            caching: False bills every prompt token at the input price.
        """
        if not caching:
            return ((cache_read + new) * self.input + output * self.output) / _PER
        return (cache_read * self.cache_read + new * self.cache_write + output * self.output) / _PER


def recorded_cost(price: ModelPrice | None, usage: Any) -> float:
    """Dollars of one recorded model call: the provider's own figure when the run kept
    it (``usage.cost_usd``), else its recorded tokens at these prices; NaN without either.

    Recorded tokens are billed as the provider split them: cache reads, 5-minute
    writes (``cache_write``), 1-hour writes (:data:`ONE_HOUR_WRITE_FACTOR` times the input
    price, Anthropic's rate),
    the rest of the prompt at the input price, and the output.

    Example:
        >>> from ctxnb.replay.model import Usage
        >>> p = PriceTable.default().get("claude-sonnet-4-5")
        >>> u = Usage(prompt_tokens=1_000_000, completion_tokens=0, cached_tokens=500_000,
        ...           cache_write_1h_tokens=500_000)
        >>> recorded_cost(p, u)   # 0.5M reads at $0.30 + 0.5M 1-hour writes at $6
        3.15
    """
    if usage is None:
        return float("nan")
    if usage.cost_usd is not None:
        return float(usage.cost_usd)
    if price is None or usage.prompt_tokens is None:
        return float("nan")
    read = usage.cached_tokens or 0
    w5 = usage.cache_write_tokens or 0
    w1h = usage.cache_write_1h_tokens or 0
    rest = max(0, usage.prompt_tokens - read - w5 - w1h)
    out = usage.completion_tokens or 0
    return (
        read * price.cache_read
        + w5 * price.cache_write
        + w1h * ONE_HOUR_WRITE_FACTOR * price.input
        + rest * price.input
        + out * price.output
    ) / _PER


@dataclass(frozen=True)
class PriceTable:
    """Prices per model, with the date and source of the table.

    Use :meth:`default` for the table shipped with ctxnb and :meth:`with_prices` to
    add or override models.
    """

    models: Mapping[str, ModelPrice] = field(default_factory=dict)
    as_of: str = ""
    source: str = ""

    @property
    def hash(self) -> str:
        """SHA-256 of the table's prices (canonical JSON): which table priced a frame."""
        from ..hashing import stable_stringify

        data = {
            "as_of": self.as_of,
            "models": {
                n: [p.input, p.cache_write, p.cache_read, p.output] for n, p in self.models.items()
            },
        }
        return hashlib.sha256(stable_stringify(data).encode()).hexdigest()

    @classmethod
    def default(cls) -> PriceTable:
        """The table shipped with ctxnb (``ctxnb/data/prices.json``)."""
        text = files("ctxnb").joinpath("data/prices.json").read_text(encoding="utf-8")
        return cls.from_dict(json.loads(text), where="ctxnb/data/prices.json")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PriceTable:
        """A table from a JSON file shaped like ``ctxnb/data/prices.json``.

        Raises:
            ConfigError: the file cannot be read or a model lacks a price.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"cannot read the price table {path}: {exc}. Give a JSON file shaped like "
                'ctxnb/data/prices.json: {"as_of": ..., "source": ..., "models": {"name": '
                '{"input": ..., "cache_write": ..., "cache_read": ..., "output": ...}}}'
            ) from None
        return cls.from_dict(data, where=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "prices") -> PriceTable:
        """A table from ``{"as_of", "source", "models": {name: {input, ...}}}``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("models"), Mapping):
            raise ConfigError(f'{where}: a price table needs a "models" mapping')
        as_of, source = str(data.get("as_of", "")), str(data.get("source", ""))
        return cls(
            {
                name: _price(name, p, where=where, as_of=as_of, source=source)
                for name, p in data["models"].items()
            },
            as_of=as_of,
            source=source,
        )

    def with_prices(self, prices: Mapping[str, ModelPrice | Mapping[str, Any]]) -> PriceTable:
        """A copy with these models added or replaced (prices in USD per million)."""
        models = dict(self.models)
        for name, p in prices.items():
            models[name] = (
                replace(p, model=name)
                if isinstance(p, ModelPrice)
                else _price(name, p, where="with_prices", as_of="", source="user")
            )
        return PriceTable(models, as_of=self.as_of, source=self.source)

    def find(self, model: str | None) -> ModelPrice | None:
        """The prices of ``model`` (see :func:`normalize_model`), or None.

        Example:
            >>> PriceTable.default().find("@google/gemini-3-pro-preview").model
            'gemini-3-pro-preview'
        """
        if not model:
            return None
        if model in self.models:
            return self.models[model]
        name = normalize_model(model)
        found = self.models.get(name)
        if found is None and _DATED.search(name):
            found = self.models.get(_DATED.sub("", name))
        return found

    def price_or_warn(self, model: str | None) -> ModelPrice | None:
        """Like :meth:`find`, with an :class:`UnpricedModelWarning` when there is no price.

        Every cost computed from a missing price is NaN, and sums keep it NaN: an
        unpriced run is never counted as $0.
        """
        found = self.find(model)
        if found is None and model:  # a run that names no model has no price to miss
            warnings.warn(
                f"no price for model {model!r} in the price table (as of {self.as_of or '?'}): "
                "its dollars are NaN. Add it with PriceTable.default().with_prices({name: "
                "{'input': ..., 'cache_write': ..., 'cache_read': ..., 'output': ...}}) "
                "and pass prices=.",
                UnpricedModelWarning,
                stacklevel=3,
            )
        return found

    def get(self, model: str) -> ModelPrice:
        """The prices of ``model``.

        Raises:
            NotFoundError: the table has no such model (the message lists those it has).
        """
        p = self.find(model)
        if p is None:
            raise NotFoundError(
                f"no price for model {model!r}; known: {', '.join(sorted(self.models))}. "
                "Add it with PriceTable.default().with_prices({name: {'input': ..., "
                "'cache_write': ..., 'cache_read': ..., 'output': ...}}) (USD per million)."
            )
        return p

    def __repr__(self) -> str:
        return f"PriceTable({len(self.models)} models, as_of={self.as_of!r})"


def _price(name: str, p: Mapping[str, Any], *, where: str, as_of: str, source: str) -> ModelPrice:
    keys = ("input", "cache_write", "cache_read", "output")
    if not isinstance(p, Mapping):
        raise ConfigError(f"{where}: the prices of {name!r} must be a mapping of {keys}")
    missing = [k for k in keys if not isinstance(p.get(k), int | float) or p[k] < 0]
    if missing:
        raise ConfigError(
            f"{where}: model {name!r} needs non-negative numbers for {missing} "
            "(USD per million tokens)"
        )
    return ModelPrice(
        name,
        input=float(p["input"]),
        cache_write=float(p["cache_write"]),
        cache_read=float(p["cache_read"]),
        output=float(p["output"]),
        source=source,
        as_of=as_of,
    )


def resolve_prices(
    prices: PriceTable | Mapping[str, Any] | str | os.PathLike[str] | None,
) -> PriceTable:
    """One resolver for the ``prices=`` option.

    An explicit table wins; a whole table as a mapping (with ``"models"``) is used as
    it is; a mapping of model to prices overrides the shipped table;
    a path is read as a JSON table; None reads ``CTXNB_PRICES`` (a path) or falls back
    to the shipped table.

    Example:
        >>> resolve_prices(None).as_of >= "2026-01-01"
        True
    """
    if isinstance(prices, PriceTable):
        return prices
    if isinstance(prices, Mapping):
        if "models" in prices:
            return PriceTable.from_dict(prices)
        return PriceTable.default().with_prices(prices)
    if prices is not None:
        return PriceTable.from_file(prices)
    env = os.environ.get("CTXNB_PRICES")
    return PriceTable.from_file(env) if env else PriceTable.default()
