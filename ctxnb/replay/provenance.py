"""Where a results frame comes from: what made it, from what, priced by which table.

Every frame :func:`~ctxnb.replay.experiment.run_experiment` and
:func:`~ctxnb.live.experiment.run_experiment` return carries a provenance record in
``df.attrs["ctxnb"]``, and :func:`~ctxnb.replay.experiment.write_parquet` writes it
into the Parquet files' metadata under the key ``ctxnb`` (JSON), so that a figure read
back a year later still names the ctxnb version, the price table (date and hash), the
inputs (SHA-256 of every trajectory file or task suite), the strategies with their
settings, and the token counter.

Example:
    >>> from ctxnb.strategies import KeepAll
    >>> p = provenance(strategies=[KeepAll()], labels=["keep-all"], prices=None,
    ...                inputs={}, token_counter=None)
    >>> sorted(p)[:4]
    ['ctxnb_version', 'inputs', 'price_table_as_of', 'price_table_hash']
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._version import __version__
from ..llm.prices import PriceTable, resolve_prices
from ..llm.tokens import resolve_token_counter
from ..strategies.builtin import ContextStrategy, strategy_spec

__all__ = ["PARQUET_KEY", "file_sha256", "provenance"]

#: The key of the provenance record in a Parquet file's metadata.
PARQUET_KEY = b"ctxnb"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (a trajectory as it was read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def provenance(
    *,
    strategies: Sequence[ContextStrategy],
    labels: Sequence[str],
    prices: PriceTable | None,
    inputs: Mapping[str, str],
    token_counter: Any,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance record of a results frame (plain JSON types only)."""
    table = prices if prices is not None else resolve_prices(None)
    return {
        "ctxnb_version": __version__,
        "price_table_as_of": table.as_of,
        "price_table_hash": table.hash,
        "inputs": dict(inputs),
        "strategies": [
            {"label": label, **strategy_spec(s)}
            for s, label in zip(strategies, labels, strict=True)
        ],
        "token_counter": resolve_token_counter(token_counter).name,
        **dict(extra or {}),
    }
