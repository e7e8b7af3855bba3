"""The offline cl100k_base file and the pure-Python BPE (``ctxnb._util.bpe``).

The counts of the pure-Python tokenizer against tiktoken's are compared in
``tests/redaction/test_efficiency.py``; here: the file is found where tiktoken would look,
a file with the wrong hash is refused, and the merge follows tiktoken's rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb._util import bpe


def test_the_cache_directory_is_searched_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / "cl100k_base.tiktoken").write_bytes(b"YQ== 0\n")
    assert bpe.encoding_file("cl100k_base") == tmp_path / "cl100k_base.tiktoken"


def test_a_file_with_another_hash_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "cl100k_base.tiktoken"
    p.write_bytes(b"YQ== 0\nYg== 1\n")
    with pytest.raises(ValueError, match="SHA-256"):
        bpe.load_ranks(p)
    assert bpe.load_ranks(p, sha256=None) == {b"a": 0, b"b": 1}


def test_merges_take_the_lowest_rank_first_and_the_leftmost_on_a_tie() -> None:
    # "abc": ab (rank 3) beats bc (rank 4): [ab, c]; "aaa" merges the leftmost pair.
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"aa": 5}
    tok = bpe.PythonBPE(ranks)
    assert tok.count("abc") == 2
    assert tok.count("aaa") == 2
    assert tok.count("") == 0
    assert tok.count("ab") == 1
