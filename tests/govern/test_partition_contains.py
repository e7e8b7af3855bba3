"""``glob_contains`` against brute force: a containment it proves holds for every path,
and it proves the shapes workers are given (``*.py``, ``src/*.py``, ``src/*/``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxnb.errors import PolicyError
from ctxnb.govern.core import files_in_scope
from ctxnb.govern.partition import check_subset, glob_contains

# Names chosen to sit on the edges of the globs below: a suffix as a whole name (".py",
# "py"), a directory named like a file ("a.py" holding files), prefixes ("t", "tests").
NAMES = ["src", "a.py", "test_a.py", "a", "b", "t", "py", ".py", "x.y", "ab.py", "tests", "sr"]
UNIVERSE = ["/".join(p) for n in (1, 2, 3) for p in itertools.product(NAMES, repeat=n)]

SEGMENTS = ["src", "a.py", "*.py", "*", "**", "test_*", "t*", "?.py", "[ab]*", "a", "*.y", "x*y"]
GLOBS = sorted(
    {
        lead + "/".join(segs) + trail
        for n in (1, 2)
        for segs in itertools.product(SEGMENTS, repeat=n)
        for lead in ("", "/")
        for trail in ("", "/")
    }
)


@pytest.fixture(scope="module")
def owned() -> dict[str, frozenset[str]]:
    return {g: frozenset(files_in_scope([g], UNIVERSE)) for g in GLOBS}


def test_every_proved_containment_holds_on_every_path(owned):
    """Exhaustive over 624 globs squared: no proof is wrong on 1,884 paths (the code before
    claimed 108 containments that were wrong: `**/` of top-level files, `src/` of a
    literal `a/src` that may be a file)."""
    proved = 0
    for outer, inner in itertools.product(GLOBS, repeat=2):
        if glob_contains(outer, inner):
            proved += 1
            extra = owned[inner] - owned[outer]
            assert not extra, (outer, inner, sorted(extra)[:5])
    assert proved > 20_000  # and it proves a lot: the check above is not vacuous


_SEG = st.one_of(st.sampled_from(SEGMENTS), st.sampled_from(NAMES))
_GLOB = st.builds(
    lambda lead, segs, trail: lead + "/".join(segs) + trail,
    st.sampled_from(["", "/"]),
    st.lists(_SEG, min_size=1, max_size=4),
    st.sampled_from(["", "/"]),
)
_PATH = st.lists(st.sampled_from(NAMES), min_size=1, max_size=6).map("/".join)


@settings(max_examples=1500, deadline=None)
@given(_GLOB, _GLOB, st.lists(_PATH, max_size=40))
def test_a_proved_containment_holds_for_deeper_globs_and_paths(outer, inner, paths):
    if glob_contains(outer, inner):
        inside = files_in_scope([inner], paths)
        assert files_in_scope([outer], inside) == inside


@pytest.mark.parametrize(
    ("outer", "inner", "contained"),
    [
        ("*.py", "src/a.py", True),
        ("*.py", "src/*.py", True),
        ("*.py", "src/**/test_*.py", True),
        ("*.py", "test_*.py", True),  # both at any depth
        ("*.py", "a.py/data.txt", True),  # a directory named like a .py file owns it
        ("**/*.py", "src/a.py", True),
        ("*.py", "src/**", False),
        ("*.py", "src/*.pyc", False),
        ("*.py", "src/*", False),
        ("*.py", "src/?.py", True),
        ("*.py", "src/[ab].py", True),
        ("*.py/", "src/a.py", False),  # dir-only: the file src/a.py is not a directory
        ("*.py/", "a.py/x", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/t*.py", True),
        ("src/*.py", "src/api/*.py", False),  # * stays within one directory
        ("src/*", "src/api/**", True),  # src/api is matched, and owns what is under it
        ("src/*/", "src/a.py", False),
        ("src/*/", "src/api/x.py", True),
        ("src/t*", "src/tests/", True),
        ("src/t*", "src/*", False),
        (" src/**", "src/a.py", False),  # a leading space is part of the glob
        ("src/**/x", "src/x", False),  # ** inside the outer glob: not decided
    ],
)
def test_containment_of_the_usual_worker_shapes(outer, inner, contained):
    assert glob_contains(outer, inner) is contained


def test_a_worker_under_an_extension_glob_is_narrowed_and_one_outside_refused():
    check_subset(["*.py"], ["src/billing/*.py", "tests/test_billing.py"], ["src/billing/a.py"])
    with pytest.raises(PolicyError) as err:
        check_subset(["*.py"], ["src/billing/**"], [])
    assert err.value.error_code == "SCOPE_NOT_SUBSET" and "src/billing/**" in err.value.message
