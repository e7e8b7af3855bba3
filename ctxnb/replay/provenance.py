"""Where a results frame comes from: what made it, from what, priced by which table.

Every frame :func:`~ctxnb.replay.experiment.run_experiment` and
:func:`~ctxnb.live.experiment.run_experiment` return carries a provenance record in
``df.attrs["ctxnb"]``, and :func:`~ctxnb.replay.experiment.write_parquet` writes it
into the Parquet files' metadata under the key ``ctxnb`` (JSON), so that a figure read
back a year later still names the ctxnb version, the price table (date and hash), the
inputs (SHA-256 of every trajectory file or task suite), the strategies with their
settings, the token counter, and every other setting of the run.

The version is the installed package's (its metadata); a version number alone names
every commit between two releases, so when ctxnb runs from a git checkout the record
also names the commit (``ctxnb_commit``) and whether the checkout had uncommitted
changes (``ctxnb_dirty``). Settings that may hold credentials (an API key, headers,
a URL with a password) pass :func:`redact_settings` first: a key is recorded as set or
not, never its value.

Example:
    >>> from ctxnb.strategies import KeepAll
    >>> p = provenance(strategies=[KeepAll()], labels=["keep-all"], prices=None,
    ...                inputs={}, token_counter=None)
    >>> sorted(p)[:4]
    ['ctxnb_commit', 'ctxnb_dirty', 'ctxnb_version', 'inputs']
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..llm.prices import PriceTable, resolve_prices
from ..llm.tokens import resolve_token_counter
from ..strategies.builtin import ContextStrategy, strategy_spec

__all__ = [
    "PARQUET_KEY",
    "ctxnb_commit",
    "ctxnb_version",
    "file_sha256",
    "provenance",
    "redact_settings",
]

#: The key of the provenance record in a Parquet file's metadata.
PARQUET_KEY = b"ctxnb"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (a trajectory as it was read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ctxnb_version() -> str:
    """The installed ctxnb's version, from its package metadata (the source's own
    number when ctxnb runs from files that are not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxnb")
    except PackageNotFoundError:
        return __version__


@functools.cache
def ctxnb_commit() -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git checkout ctxnb runs from, or ``(None, None)``.

    Only a checkout whose top level holds this very package counts (an installed
    ctxnb inside some other repository's folder names no commit of that repository).
    """
    package = Path(__file__).resolve().parents[1]
    try:
        top = _git(package, "rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() / "ctxnb" != package:
            return (None, None)
        commit = _git(package, "rev-parse", "HEAD")
        status = _git(package, "status", "--porcelain", "--untracked-files=no")
    except OSError:  # no git here
        return (None, None)
    return (commit, None if status is None else bool(status))


def _git(cwd: Path, *args: str) -> str | None:
    r = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )
    return r.stdout.strip() if r.returncode == 0 else None


# Setting names whose values are credentials: recorded as set or not, never as they are.
# A token counter counts tokens: its name says how, and is no credential.
_SECRET_NAME = re.compile(
    r"(?i)(key|token(?!_?counter)|secret|passw|auth|cookie|credential|header)"
)


def redact_settings(value: Any, name: str = "") -> Any:
    """A setting as a provenance record may keep it (plain JSON types).

    A value under a name like ``api_key``, ``extra_headers`` or ``Authorization`` is
    replaced by ``"[set]"`` (or None when unset); every string passes ctxnb's
    redaction pass, and a URL loses its ``user:password@``.

    Example:
        >>> redact_settings({"api_key": "sk-x", "api_base": "http://u:p@host:1/v1",
        ...                  "temperature": 0.0})
        {'api_key': '[set]', 'api_base': 'http://host:1/v1', 'temperature': 0.0}
        >>> redact_settings({"token_counter": "chars4", "access_token": "t"})
        {'token_counter': 'chars4', 'access_token': '[set]'}
    """
    from ..redaction.redactor import redact_text

    if name and _SECRET_NAME.search(name):
        return None if value is None else "[set]"
    if isinstance(value, Mapping):
        return {str(k): redact_settings(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_settings(v, name) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = re.sub(r"(?<=://)[^/@\s]+@", "", str(value))
    return redact_text(text)


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
    commit, dirty = ctxnb_commit()
    return {
        "ctxnb_version": ctxnb_version(),
        "ctxnb_commit": commit,
        "ctxnb_dirty": dirty,
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
