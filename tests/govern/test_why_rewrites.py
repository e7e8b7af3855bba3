"""Attribution survives history rewrites: ``why`` on a real git repository after rebase,
squash, fixup, amend, reorder and cherry-pick.

Human and AI changes are interleaved; each is recorded in the Agent Trace ledger (as
ctxnb's recorders do: a record, and the new version observed into the store) and
committed with the git CLI. Some changes are nobody's record (the base, an upstream
branch, an unrecorded amend). Every line carries its author's label in a trailing
comment, except blank lines and a ``pass`` that appears in an AI block and in a human
block alike; those take the label of the lines around them. After each rewrite, every
line of the file must resolve to exactly the record that wrote it, and no line may be
claimed by a record that did not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.ledger import TraceLedger, build_trace_record
from ctxnb.tools.patching import changed_line_ranges

FILE = "app.py"
LABEL = re.compile(r"#\s*(\w+)\s*$")
UNRECORDED = {"base", "upstream", "other", "amend"}


def git(root: Path, *args: str, author: str = "human", **env: str) -> str:
    ident = {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@ctxnb.invalid",
        "GIT_COMMITTER_NAME": author,
        "GIT_COMMITTER_EMAIL": f"{author}@ctxnb.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **ident, **env},
    ).stdout.strip()


def base_lines() -> list[str]:
    out = []
    for i in range(30):
        out.append("" if i % 7 == 6 else f"b{i} = {i}  # base")
    return out


def replace(lines: list[str], old: list[str], new: list[str]) -> list[str]:
    i = lines.index(old[0])
    assert lines[i : i + len(old)] == old
    return lines[:i] + new + lines[i + len(old) :]


def insert_after(lines: list[str], anchor: str, new: list[str]) -> list[str]:
    i = lines.index(anchor) + 1
    return lines[:i] + new + lines[i:]


# The edits, applied by content so that they apply on any base.
def h1(lines):  # a human replaces two lines with three
    return replace(
        lines,
        ["b2 = 2  # base", "b3 = 3  # base"],
        ["h1_a = 'x'  # H1", "h1_b = 'y'  # H1", "h1_c = 'z'  # H1"],
    )


def a1(lines):  # the AI inserts a function with a blank line and a bare `pass`
    return insert_after(
        lines,
        "b10 = 10  # base",
        [
            "def a1():  # A1",
            "    v = compute()  # A1",
            "",
            "    pass",
            "    w = v + 1  # A1",
            "    return w  # A1",
        ],
    )


def h2(lines):  # a human writes a function with the same bare `pass`
    return replace(
        lines,
        ["b22 = 22  # base"],
        ["def h2():  # H2", "    pass", "", "    return 0  # H2"],
    )


def a2(lines):  # the AI rewrites two lines near the end and appends one
    out = replace(
        lines, ["b24 = 24  # base", "b25 = 25  # base"], ["a2_x = 1  # A2", "a2_y = 2  # A2"]
    )
    return [*out, "a2_tail()  # A2"]


class Repo:
    """A governed git repository whose changes are recorded and committed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        init_governance(root)
        # ctxnb's own state is not part of the history being rewritten.
        (root / ".git" / "info" / "exclude").write_text(".ctxnb/\n.orchestration/\n")
        self.ws = Workspace.open(root)
        self.ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
        self.ids: dict[str, str] = {}  # label -> record id
        self.who: dict[str, tuple[str, str | None]] = {}  # label -> contributor
        self.write(base_lines())
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "base")

    def lines(self) -> list[str]:
        return (self.root / FILE).read_text().splitlines()

    def write(self, lines: list[str]) -> None:
        (self.root / FILE).write_text("\n".join(lines) + "\n")

    def change(self, label: str, edit, *, ai: bool, record: bool = True, turn: int = 1) -> str:
        old = (self.root / FILE).read_text()
        self.write(edit(self.lines()))
        new = (self.root / FILE).read_text()
        if record:
            who = ("ai", f"acme/model-{label.lower()}") if ai else ("human", None)
            rec = build_trace_record(
                file_path=FILE,
                ranges=changed_line_ranges(old, new),
                new_text=new,
                intent_id="INT-1",
                session_id="s-1",
                contributor_type=who[0],  # type: ignore[arg-type]
                model_id=who[1],
                repo_root=self.root,
                tool="write_file" if ai else "human-edit",
                extra_metadata={"turn": turn, "context_id": f"ctx-{label}"},
            )
            self.ledger.append(rec)
            self.ws.observe([FILE])  # the recorder stores the new version
            self.ids[label], self.who[label] = rec["id"], who
        git(self.root, "commit", "-q", "-am", label, author="ai" if ai else "human")
        return git(self.root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    r.change("H1", h1, ai=False)
    r.change("A1", a1, ai=True, turn=2)
    r.change("H2", h2, ai=False)
    r.change("A2", a2, ai=True, turn=4)
    return r


def expected_labels(lines: list[str]) -> list[str]:
    """Each line's author: its label, or for an unlabelled line the label of the
    labelled lines on both sides (which must agree)."""
    tags = [m[1] if (m := LABEL.search(line)) else None for line in lines]
    out = []
    for i, tag in enumerate(tags):
        if tag is None:
            before = next(t for t in reversed(tags[:i]) if t is not None)
            after = next((t for t in tags[i + 1 :] if t is not None), before)
            assert before == after, f"line {i + 1} is between {before} and {after}"
            tag = before
        out.append(tag)
    return out


def check(repo: Repo) -> None:
    """Every line resolves to the record that wrote it; no line to a wrong contributor."""
    lines = repo.lines()
    labels = expected_labels(lines)
    result = repo.ws.why(FILE)
    assert [lw.line for lw in result.lines] == list(range(1, len(lines) + 1))
    wrong, unresolved, misplaced = [], [], []
    for lw, label, text in zip(result.lines, labels, lines, strict=True):
        assert lw.text == text
        got = result.records[lw.record] if lw.record else None
        if label in UNRECORDED:
            if got is not None:
                wrong.append((lw.line, text, got.contributor))
            continue
        want_type, want_model = repo.who[label]
        if got is None:
            unresolved.append((lw.line, text))
        elif (got.contributor_type, got.model_id) != (want_type, want_model):
            wrong.append((lw.line, text, got.contributor))
        elif got.record_id != repo.ids[label]:
            misplaced.append((lw.line, text, got.record_id))
        else:
            assert got.context_id == f"ctx-{label}"
    assert wrong == [], "lines attributed to the wrong contributor"
    assert unresolved == [], "changed lines no record resolves"
    assert misplaced == [], "lines attributed to another record of the same contributor"
    # The answer for one line is the answer for that line in the whole-file answer.
    for n in (1, len(lines) // 2, len(lines)):
        assert repo.ws.why(FILE, n).lines[0] == result.line(n)


def commits(repo: Repo) -> dict[str, str]:
    """Commit subject -> sha on main."""
    out = git(repo.root, "log", "--format=%H %s", "main")
    return {subject: sha for sha, subject in (ln.split(" ", 1) for ln in out.splitlines())}


def rebase_todo(repo: Repo, onto: str, tmp: Path, body: str) -> None:
    """``git rebase -i onto`` with the todo list rewritten by ``body`` (python code over
    the list ``todo`` of its lines); squashed messages are kept as git proposes them."""
    script = tmp / "edit_todo.py"
    script.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "todo = [ln for ln in open(path).read().splitlines() if ln.startswith('pick')]\n"
        f"{body}\n"
        "open(path, 'w').write('\\n'.join(todo) + '\\n')\n"
    )
    editor = f"{sys.executable} {script}"
    git(repo.root, "rebase", "-q", "-i", onto, GIT_SEQUENCE_EDITOR=editor, GIT_EDITOR="true")


def test_before_any_rewrite(repo: Repo):
    check(repo)
    # The reference: git blame's authors agree with why's contributors, line by line.
    blame = git(repo.root, "blame", "--line-porcelain", FILE)
    authors = [ln.removeprefix("author ") for ln in blame.splitlines() if ln.startswith("author ")]
    result = repo.ws.why(FILE)
    for lw, author in zip(result.lines, authors, strict=True):
        if lw.record is not None:
            assert result.records[lw.record].contributor_type == author, lw


def test_rebase_onto_a_moved_base(repo: Repo):
    base = commits(repo)["base"]
    git(repo.root, "checkout", "-q", "-b", "upstream", base)
    repo.write(
        ["# header  # upstream", "import os  # upstream", "", "import sys  # upstream"]
        + repo.lines()
    )
    git(repo.root, "commit", "-q", "-am", "upstream header")
    git(repo.root, "checkout", "-q", "main")
    git(repo.root, "rebase", "-q", "upstream")
    assert repo.lines()[0] == "# header  # upstream"  # every change moved down
    check(repo)


def test_squash_everything(repo: Repo, tmp_path: Path):
    base = commits(repo)["base"]
    rebase_todo(repo, base, tmp_path, "todo = todo[:1] + ['squash' + t[4:] for t in todo[1:]]")
    assert git(repo.root, "rev-list", "--count", "HEAD") == "2"
    check(repo)


def test_reorder(repo: Repo, tmp_path: Path):
    base = commits(repo)["base"]
    rebase_todo(repo, base, tmp_path, "todo[1], todo[2] = todo[2], todo[1]")  # A1 after H2
    subjects = git(repo.root, "log", "--reverse", "--format=%s").splitlines()
    assert subjects == ["base", "H1", "H2", "A1", "A2"]
    check(repo)


def test_fixup_by_a_human_inside_an_ai_block(repo: Repo):
    a1_sha = commits(repo)["A1"]
    fix = ["    return w or None  # fix"]
    repo.who["fix"] = ("human", None)
    # A recorded human fix of one line the AI wrote, folded into the AI's commit.
    repo.change("fix", lambda ls: replace(ls, ["    return w  # A1"], fix), ai=False)
    git(repo.root, "reset", "-q", "--soft", "HEAD~1")
    git(repo.root, "commit", "-q", f"--fixup={a1_sha}")
    git(
        repo.root,
        "rebase",
        "-q",
        "-i",
        "--autosquash",
        commits(repo)["base"],
        GIT_SEQUENCE_EDITOR="true",
    )
    assert "fixup!" not in git(repo.root, "log", "--format=%s")
    check(repo)


def test_amend_by_an_unrecorded_human(repo: Repo):
    repo.write(replace(repo.lines(), ["a2_y = 2  # A2"], ["a2_y = 3  # amend"]))
    git(repo.root, "commit", "-q", "-a", "--amend", "--no-edit")
    check(repo)
    n = repo.lines().index("a2_y = 3  # amend") + 1
    assert repo.ws.why(FILE, n).record_for(n) is None
    # The AI's other lines of that change still resolve, now as a partial match.
    assert repo.ws.why(FILE, n - 1).line(n - 1).match == "partial"


def test_cherry_pick_onto_another_branch(repo: Repo):
    shas = commits(repo)
    git(repo.root, "checkout", "-q", "-b", "other", shas["base"])
    lines = insert_after(repo.lines(), "b8 = 8  # base", ["o1 = 1  # other", "o2 = 2  # other"])
    repo.write([ln for ln in lines if ln != "b5 = 5  # base"])
    git(repo.root, "commit", "-q", "-am", "other work")
    git(repo.root, "cherry-pick", shas["A1"], shas["A2"])
    text = "\n".join(repo.lines())
    assert "a2_tail()" in text and "h1_a" not in text and "def h2" not in text
    check(repo)


def test_a_checkout_of_another_branch_indexed_in_between(repo: Repo):
    """Another branch's version of the file enters the store (indexed while it was
    checked out); back on main, every line still resolves."""
    git(repo.root, "checkout", "-q", "-b", "elsewhere", commits(repo)["base"])
    repo.write(["completely = 'different'  # other"] * 3)
    git(repo.root, "commit", "-q", "-am", "elsewhere")
    repo.ws.index(progress=False)
    git(repo.root, "checkout", "-q", "main")
    check(repo)


# -- random edit sequences ----------------------------------------------------------------------
EDIT = st.tuples(
    st.sampled_from(["ai", "human", "unrecorded", "unrecorded-indexed"]),
    st.sampled_from(["insert", "replace", "delete"]),
    st.integers(0, 10_000),  # where, modulo the file's length
    st.integers(1, 4),  # how many lines
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(EDIT, min_size=1, max_size=8))
# A blank line that occurs once in the record's version and once today anchored the
# diff in place of the written line beside it, which then resolved to no record.
@example(
    steps=[
        ("ai", "insert", 0, 1),
        ("ai", "insert", 0, 1),
        ("unrecorded", "replace", 157, 2),
        ("ai", "delete", 0, 3),
        ("ai", "delete", 0, 4),
        ("ai", "replace", 254, 4),
        ("ai", "replace", 1, 4),
        ("unrecorded", "insert", 159, 1),
    ]
)
def test_random_edit_sequences_resolve_every_line_to_its_writer(
    tmp_path_factory: pytest.TempPathFactory, steps
):
    """Recorded and unrecorded edits at random places (unrecorded ones add blank lines
    too, and some are indexed into the store): every line resolves to the record that
    wrote it, and no line to a record that did not. Each written line is unique, so its
    writer is known; a blank line is never an AI's or a recorded human's."""
    root = tmp_path_factory.mktemp("random")
    init_governance(root)
    ws = Workspace.open(root)
    ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
    lines = [f"base_{i} = {i}" for i in range(12)]
    (root / FILE).write_text("\n".join(lines) + "\n")
    ws.observe([FILE])
    owner: dict[str, str | None] = {}
    for k, (who, kind, where, count) in enumerate(steps):
        old = "\n".join(lines) + "\n" if lines else ""
        at = where % (len(lines) + 1)
        fresh = [f"{who.split('-')[0]}_{k}_{j} = {j}" for j in range(count)]
        if who.startswith("unrecorded"):
            fresh.insert(count // 2, "")
        if kind == "insert" or not lines:
            lines[at:at] = fresh
        elif kind == "replace":
            lines[at : at + count] = fresh
        else:
            del lines[at : at + count]
            fresh = []
        new = "\n".join(lines) + "\n" if lines else ""
        (root / FILE).write_text(new)
        rid = None
        if who in ("ai", "human") and new and changed_line_ranges(old, new):
            rec = build_trace_record(
                file_path=FILE,
                ranges=changed_line_ranges(old, new),
                new_text=new,
                intent_id="INT-1",
                session_id=None,
                contributor_type=who,  # type: ignore[arg-type]
                model_id="acme/m" if who == "ai" else None,
                repo_root=root,
            )
            ledger.append(rec)
            rid = rec["id"]
        if who != "unrecorded":
            ws.observe([FILE])
        owner.update((text, rid) for text in fresh if text)
    if not lines:
        return
    result = ws.why(FILE)
    for lw in result.lines:
        want = owner.get(lw.text) if lw.text else None
        got = result.records[lw.record].record_id if lw.record else None
        assert got == want, (lw.line, lw.text, steps)
    ws.close()


def test_a_blank_line_does_not_anchor_the_diff_in_place_of_a_written_one():
    """The record's version and today's file each hold one blank line, on opposite sides
    of the written line: the diff may keep only one of the two, and must keep the
    written line (the blank one is matched inside the gaps, where it can be)."""
    from ctxnb.govern._linematch import _line_map

    old = ["head", "", "w0", "w1", "w2", "kept", "tail"]
    new = ["head", "x0", "x1", "x2", "kept", "", "u", "tail"]
    m = _line_map(old, new)
    assert m[old.index("kept")] == new.index("kept")
    assert m[0] == 0 and m[6] == 7
    # The blank line is still carried over when nothing written competes with it.
    assert _line_map(["a", "", "b"], ["a", "", "c", "b"]) == {0: 0, 1: 1, 2: 3}
