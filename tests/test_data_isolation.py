"""The suite passes without ``../shared/data``: only ``tests/_data.py`` may name it.

``.ci/run`` runs the tests that read it (through :func:`_data.data_dirs`) a second time
with ``CTXNB_TEST_WITHOUT_SHARED=1``; that proves the suite passes in a fresh clone only
if no other test, helper or tutorial reaches the folder some other way.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

from _data import REPO, data_dirs

# `shared` as a path part: "shared" / …, "../shared", 'shared/data'.
_NAMES_SHARED = re.compile(r"""\.\./shared\b|shared/data|["']shared["']\s*/""")
# This file names the folder in its own examples of what the pattern finds.
_ALLOWED = {"tests/_data.py", "tests/test_data_isolation.py"}


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--", *patterns], cwd=REPO, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def _without_comments(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py" or not _NAMES_SHARED.search(text):
        return text
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return tokenize.untokenize(t for t in tokens if t.type != tokenize.COMMENT)


def test_only_the_data_module_names_the_shared_folder() -> None:
    files = _tracked("tests", "notebooks", "Makefile", "ctxnb")
    assert "tests/_data.py" in files
    naming = [
        f
        for f in files
        if f not in _ALLOWED
        and not f.startswith("tests/data/")
        and Path(REPO / f).suffix in {".py", ".ipynb", ".cfg", ""}
        and _NAMES_SHARED.search(_without_comments(REPO / f))
    ]
    assert naming == [], "read ../shared/data through _data.data_dirs(), which CI can hide"


def test_the_pattern_finds_the_ways_a_path_names_it() -> None:
    for text in ('REPO.parent / "shared" / "data"', "Path('../shared/data')", '"shared/data/x"'):
        assert _NAMES_SHARED.search(text), text
    plain = ('shared = tmp_path / "shared-data"', 'Node("shared")', '"shared_prefix"')
    for text in plain:
        assert not _NAMES_SHARED.search(text), text


def test_hidden_shared_data_leaves_only_the_vendored_fixtures(monkeypatch) -> None:
    import _data

    monkeypatch.setattr(_data, "WITHOUT_SHARED", True)
    assert data_dirs() == [_data.TEST_DATA]
