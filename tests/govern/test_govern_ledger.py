"""The Agent Trace ledger: records valid against the published schema, git, crashes."""

from __future__ import annotations

import doctest
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
from _data import TEST_DATA, data_dirs

import ctxnb.govern.ledger as ledger_mod
from ctxnb.errors import PolicyError, StoreError
from ctxnb.govern.ledger import (
    TraceLedger,
    build_trace_record,
    check_record,
    git_head_revision,
    normalized_content_hash,
    record_intent_id,
    validate_record,
)

# The published schema as vendored with the tests (independent of the packaged copy).
SHARED_SCHEMA = TEST_DATA / "agent-trace-0.1.0.schema.json"
PACKAGED_SCHEMA = Path(ledger_mod.__file__).parent.parent / "data" / SHARED_SCHEMA.name


def shared_validator() -> jsonschema.protocols.Validator:
    """A validator built only from the shared schema file, with strict formats."""
    schema = json.loads(SHARED_SCHEMA.read_text())
    checker = jsonschema.FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def _dt(value: object) -> bool:
        if not isinstance(value, str) or value[10:11] not in ("T", "t"):
            return False
        datetime.fromisoformat(value)
        return True

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        return isinstance(value, str) and ":" in value and " " not in value

    return jsonschema.Draft202012Validator(schema, format_checker=checker)


def assert_valid_against_shared(record: dict) -> None:
    errors = list(shared_validator().iter_errors(record))
    assert not errors, [e.message for e in errors]


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def make(**kw: object) -> dict:
    args: dict = {
        "file_path": "src/a.py",
        "ranges": [(1, 2)],
        "new_text": "a = 1\nb = 2\nc = 3\n",
        "intent_id": "INT-001",
        "session_id": "sess-1",
        "model_id": "anthropic/claude-sonnet-4",
        "repo_root": None,
    }
    args.update(kw)
    return build_trace_record(**args)


@pytest.mark.parametrize("data_dir", data_dirs(), ids=lambda p: p.parent.name)
def test_packaged_schema_is_the_published_one(data_dir: Path) -> None:
    assert PACKAGED_SCHEMA.read_bytes() == (data_dir / SHARED_SCHEMA.name).read_bytes()


def test_record_shape_and_validity() -> None:
    rec = make(tool="write_file", mutation_class="INTENT_EVOLUTION", extra_metadata={"k": 1})
    assert_valid_against_shared(rec)
    validate_record(rec)
    assert rec["version"] == "0.1.0"
    assert uuid.UUID(rec["id"]).version == 4
    assert rec["timestamp"].endswith("Z")
    assert "vcs" not in rec
    conv = rec["files"][0]["conversations"][0]
    assert rec["files"][0]["path"] == "src/a.py"
    assert conv["contributor"] == {"type": "ai", "model_id": "anthropic/claude-sonnet-4"}
    assert conv["related"] == [
        {"type": "intent", "url": "urn:ctxnb:intent:INT-001"},
        {"type": "session", "url": "urn:ctxnb:session:sess-1"},
    ]
    assert conv["ranges"] == [
        {"start_line": 1, "end_line": 2, "content_hash": normalized_content_hash("a = 1\nb = 2")}
    ]
    assert rec["metadata"] == {
        "intent_id": "INT-001",
        "session_id": "sess-1",
        "tool": "write_file",
        "mutation_class": "INTENT_EVOLUTION",
        "k": 1,
    }


def test_content_hash_is_position_independent_and_normalized() -> None:
    top = make(new_text="def f():\n    return 1\nrest\n", ranges=[(1, 2)])
    moved = make(new_text="head\r\nmore\r\ndef f():   \r\n    return 1\r\n", ranges=[(3, 4)])
    h1 = top["files"][0]["conversations"][0]["ranges"][0]["content_hash"]
    h2 = moved["files"][0]["conversations"][0]["ranges"][0]["content_hash"]
    assert h1 == h2
    assert h1.startswith("sha256:") and len(h1) == len("sha256:") + 64
    other = make(new_text="def f():\n    return 2\n", ranges=[(1, 2)])
    assert other["files"][0]["conversations"][0]["ranges"][0]["content_hash"] != h1


def test_clock_and_timezone() -> None:
    tz = timezone(timedelta(hours=2))
    rec = make(clock=lambda: datetime(2025, 6, 1, 14, 0, 0, 123456, tzinfo=tz))
    assert rec["timestamp"] == "2025-06-01T12:00:00.123Z"
    naive = make(clock=lambda: datetime(2025, 6, 1, 14, 0, 0))
    assert naive["timestamp"] == "2025-06-01T14:00:00.000Z"


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"ranges": [(0, 1)]}, "1-based"),
        ({"ranges": [(3, 2)]}, "1-based"),
        ({"ranges": [(1, 9)]}, "3 lines"),
        ({"extra_metadata": {"intent_id": "x"}}, "may not set"),
    ],
)
def test_bad_arguments(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make(**kw)


def test_odd_ids_make_valid_urns() -> None:
    rec = make(intent_id="INT 7/ä", session_id="a b")
    assert_valid_against_shared(rec)
    urls = [r["url"] for r in rec["files"][0]["conversations"][0]["related"]]
    assert urls == ["urn:ctxnb:intent:INT%207%2F%C3%A4", "urn:ctxnb:session:a%20b"]
    assert record_intent_id({"files": rec["files"]}) == "INT 7/ä"  # from the URN alone


def test_no_session_no_model() -> None:
    rec = make(session_id=None, model_id=None, contributor_type="human")
    conv = rec["files"][0]["conversations"][0]
    assert conv["contributor"] == {"type": "human"}
    assert [r["type"] for r in conv["related"]] == ["intent"]
    assert_valid_against_shared(rec)


def test_vcs_from_real_git_repo(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    rec = make(repo_root=repo, file_path=str(repo / "src" / "a.py"))
    assert rec["vcs"] == {"type": "git", "revision": head}
    assert rec["files"][0]["path"] == "src/a.py"
    assert_valid_against_shared(rec)
    # a new commit moves HEAD; packed refs are read too
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "second")
    git(repo, "pack-refs", "--all")
    assert git_head_revision(repo) == git(repo, "rev-parse", "HEAD") != head
    git(repo, "checkout", "-q", "--detach")
    assert git_head_revision(repo) == git(repo, "rev-parse", "HEAD")


def test_workspace_below_git_root(repo: Path) -> None:
    rec = make(repo_root=repo / "src", file_path="a.py")
    assert rec["files"][0]["path"] == "src/a.py"  # relative to the repository root
    assert rec["vcs"]["revision"] == git(repo, "rev-parse", "HEAD")


def test_no_vcs_outside_repo_or_without_commits(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    rec = make(repo_root=plain, file_path="x.py")
    assert "vcs" not in rec and rec["files"][0]["path"] == "x.py"
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert git_head_revision(empty) is None
    assert "vcs" not in make(repo_root=empty, file_path="x.py")
    with pytest.raises(ValueError, match="outside the repository root"):
        make(repo_root=plain, file_path=str(tmp_path / "elsewhere.py"))


def test_validate_record_rejects_bad_records() -> None:
    rec = make()
    for mutate, where in [
        (lambda r: r.pop("id"), "'id' is a required"),
        (lambda r: r.update(id="not-a-uuid"), "uuid"),
        (lambda r: r.update(timestamp="yesterday"), "date-time"),
        (lambda r: r["files"][0]["conversations"][0]["ranges"][0].update(start_line=0), "0"),
        (lambda r: r["files"][0]["conversations"][0]["contributor"].update(type="bot"), "bot"),
    ]:
        bad = json.loads(json.dumps(rec))
        mutate(bad)
        with pytest.raises(StoreError, match=where):
            validate_record(bad)


def _mutations() -> list[tuple[str, object]]:
    """(JSON path, value) pairs; each makes a record invalid or probes an edge."""
    conv = "files.0.conversations.0"
    return [
        ("version", "1.0"),
        ("version", 1),
        ("id", "not-a-uuid"),
        ("id", "12345678-1234-1234-1234-1234567890ab"),
        ("timestamp", "yesterday"),
        ("timestamp", "2025-01-01 12:00:00Z"),
        ("timestamp", "2025-13-01T12:00:00Z"),
        ("timestamp", "2025-01-01T12:00:00+02:00"),
        ("vcs", {"type": "cvs", "revision": "1"}),
        ("vcs", {"type": "git"}),
        ("vcs", {"type": "jj", "revision": "abc"}),
        ("tool", {"name": 3}),
        ("metadata", []),
        ("files", {}),
        ("files.0.path", None),
        (f"{conv}.url", "not a uri"),
        (f"{conv}.url", "https://example.com/c/1"),
        (f"{conv}.contributor", {"type": "bot"}),
        (f"{conv}.contributor", {"type": "ai", "model_id": "m" * 251}),
        (f"{conv}.contributor", {"type": "ai", "model_id": "m" * 250}),
        (f"{conv}.ranges", None),
        (f"{conv}.ranges.0.start_line", 0),
        (f"{conv}.ranges.0.end_line", "3"),
        (f"{conv}.ranges.0.end_line", True),
        (f"{conv}.ranges.0.content_hash", 5),
        (f"{conv}.ranges.0.contributor", {"type": "human"}),
        (f"{conv}.related", [{"type": "intent"}]),
        (f"{conv}.related", [{"type": "x", "url": "urn:x:y"}]),
        (f"{conv}.related", [{"type": "x", "url": "no scheme"}]),
    ]


@pytest.mark.parametrize(("where", "value"), _mutations())
def test_check_record_agrees_with_the_schema(where: str, value: object) -> None:
    rec = make(repo_root=None)
    target: object = rec
    keys = where.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]  # type: ignore[index]
    target[keys[-1]] = value  # type: ignore[index]
    schema_ok = not list(shared_validator().iter_errors(rec))
    assert (check_record(rec) == []) is schema_ok, check_record(rec)
    if schema_ok:
        validate_record(rec)
    else:
        with pytest.raises(StoreError):
            validate_record(rec)


def test_check_record_on_missing_keys() -> None:
    for key in ("version", "id", "timestamp", "files"):
        rec = make()
        del rec[key]
        assert check_record(rec) == [f"$: {key!r} is required"]
    assert check_record([]) == ["$: a record is a JSON object"]


def test_append_validates_first(tmp_path: Path) -> None:
    ledger = TraceLedger(tmp_path / ".orchestration" / "agent_trace.jsonl")
    with pytest.raises(StoreError):
        ledger.append({"version": "0.1.0"})
    assert not ledger.path.exists()


@pytest.mark.parametrize("planted", ["ledger", "folder", "dangling"])
def test_append_never_follows_a_planted_link(tmp_path: Path, planted: str) -> None:
    # .orchestration/ may be writable by an agent: a link there must not send the
    # ledger's lines into a file outside the workspace.
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "agent_trace.jsonl"
    victim.write_text("precious\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    folder = ws / ".orchestration"
    if planted == "folder":
        folder.symlink_to(outside)
    else:
        folder.mkdir()
        target = victim if planted == "ledger" else outside / "new.jsonl"
        (folder / "agent_trace.jsonl").symlink_to(target)
    ledger = TraceLedger(folder / "agent_trace.jsonl")
    with pytest.raises(PolicyError) as caught:
        ledger.append(make())
    assert caught.value.error_code == "PATH_DENIED"
    assert caught.value.details["rule"] == "symlink"
    assert "symbolic link" in caught.value.message and caught.value.required_action
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["agent_trace.jsonl"]


def test_append_makes_a_missing_folder_but_never_one_a_dangling_link_names(
    tmp_path: Path,
) -> None:
    # The folder is made only when opening it finds nothing; a link to a folder that
    # does not exist yet is not "nothing": it is refused, and nothing is made there.
    ws = tmp_path / "ws"
    (ws / "deep").mkdir(parents=True)
    made = TraceLedger(ws / "deep" / "new" / "agent_trace.jsonl")
    made.append(make())
    assert len(made.tail(5)) == 1
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / ".orchestration").symlink_to(outside / "missing")
    with pytest.raises(PolicyError) as caught:
        TraceLedger(ws / ".orchestration" / "agent_trace.jsonl").append(make())
    assert caught.value.details["rule"] == "symlink"
    assert list(outside.iterdir()) == []


def test_the_ledger_tail_is_read_once_and_finds_the_last_line_however_long() -> None:
    from ctxnb.govern import chain

    for content in (
        b"",
        b"\n",
        b"a",
        b"a\n",
        b"a\nb",
        b"a\nb\n",
        b"x" * 10000 + b"\n",
        b"a\n" + b"y" * 9000,
        b"a\n" + b"y" * 4095 + b"\n",
        b"a\n" + b"y" * 4094 + b"\n",
        b"a\n" + b"z" * 20000 + b"\n\n",
    ):
        with tempfile.TemporaryFile() as f:
            f.write(content)
            f.flush()
            last, ended = chain.tail(f.fileno(), len(content))
            body = content[:-1] if content.endswith(b"\n") else content
            assert last == body.rsplit(b"\n", 1)[-1]
            assert ended == content.endswith(b"\n")
            assert chain.last_line(f.fileno(), len(content)) == last
            os.lseek(f.fileno(), 0, 0)


def test_a_ledger_given_another_path_appends_there_and_heads_it_there(tmp_path: Path) -> None:
    # The folder, name and head strings are kept for the path they were made from.
    from ctxnb.govern.ledgercheck import verify_ledger

    ledger = TraceLedger(tmp_path / "a" / "agent_trace.jsonl")
    ledger.append(make())
    ledger.path = tmp_path / "b" / "other.jsonl"
    ledger.append(make())
    ledger.append(make())
    assert len(TraceLedger(tmp_path / "a" / "agent_trace.jsonl").tail(9)) == 1
    assert len(ledger.tail(9)) == 2
    assert (tmp_path / "b" / "other.jsonl.head").exists()
    assert verify_ledger(tmp_path / "a" / "agent_trace.jsonl").ok
    assert verify_ledger(ledger.path).ok


def test_append_read_filter_tail(tmp_path: Path) -> None:
    ledger = TraceLedger(tmp_path / ".orchestration" / "agent_trace.jsonl")
    for n in range(6):
        ledger.append(make(intent_id=f"INT-{n % 2}", file_path=f"f{n % 3}.py"))
    lines = ledger.path.read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        assert_valid_against_shared(json.loads(line))
    assert len(list(ledger.records())) == 6
    assert [r["files"][0]["path"] for r in ledger.records(intent_id="INT-1")] == [
        "f1.py",
        "f0.py",
        "f2.py",
    ]
    assert len(list(ledger.records(file="f0.py"))) == 2
    assert len(list(ledger.records(intent_id="INT-0", file="f0.py"))) == 1
    assert [r["files"][0]["path"] for r in ledger.tail(2)] == ["f1.py", "f2.py"]
    assert ledger.tail(0) == []
    assert ledger.skipped_lines == []


def test_append_later_lines_are_whole_and_ordered_with_plain_appends(tmp_path: Path) -> None:
    import threading

    ledger = TraceLedger(tmp_path / "agent_trace.jsonl")
    waits = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        for n in range(10):
            rec = make(file_path=f"t{w}.py", extra_metadata={"n": n, "pad": "p" * 3000})
            if n % 2:
                ledger.append(rec)
            else:
                durable = ledger.append_later(rec)
                with lock:
                    waits.append(durable)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for durable in waits:
        assert durable() is None
    records = list(ledger.records())
    assert ledger.skipped_lines == []
    assert len(records) == 40
    for w in range(4):  # each writer's records in its own order
        mine = [r["metadata"]["n"] for r in records if r["files"][0]["path"] == f"t{w}.py"]
        assert mine == list(range(10))


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert list(TraceLedger(tmp_path / "none.jsonl").records()) == []


def test_cut_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    ledger = TraceLedger(tmp_path / "agent_trace.jsonl")
    ledger.append(make(file_path="one.py"))
    ledger.append(make(file_path="two.py"))
    data = ledger.path.read_bytes()
    ledger.path.write_bytes(data[: len(data) - 40])  # a crash in the middle of a write
    recs = list(ledger.records())
    assert [r["files"][0]["path"] for r in recs] == ["one.py"]
    assert len(ledger.skipped_lines) == 1
    assert ledger.skipped_lines[0].lineno == 2
    assert "cut line" in ledger.skipped_lines[0].reason
    # the next append starts on a fresh line and survives
    ledger.append(make(file_path="three.py"))
    assert [r["files"][0]["path"] for r in ledger.records()] == ["one.py", "three.py"]
    assert [s.lineno for s in ledger.skipped_lines] == [2]
    assert ledger.skipped_lines[0].reason == "not valid JSON"


_WRITER = """
import sys
import tempfile
from ctxnb.govern.ledger import TraceLedger, build_trace_record
ledger = TraceLedger(sys.argv[1])
text = "x" * 5000 + "\\n"
for n in range(int(sys.argv[3])):
    ledger.append(build_trace_record(
        file_path=f"w{sys.argv[2]}.py", ranges=[(1, 1)], new_text=text,
        intent_id="INT-C", session_id=sys.argv[2], model_id=None, repo_root=None,
        extra_metadata={"pad": "y" * 8000, "n": n}))
"""


@pytest.mark.slow
def test_concurrent_appends_from_processes_make_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "agent_trace.jsonl"
    writers, per_writer = 4, 12
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(w), str(per_writer)])
        for w in range(writers)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == writers * per_writer
    seen: set[tuple[str, int]] = set()
    for line in lines:
        rec = json.loads(line)  # every line is one whole record
        seen.add((rec["metadata"]["session_id"], rec["metadata"]["n"]))
    assert len(seen) == writers * per_writer
    ledger = TraceLedger(path)
    assert len(list(ledger.records())) == writers * per_writer
    assert ledger.skipped_lines == []


def test_timestamp_is_utc_now_by_default() -> None:
    rec = make()
    stamp = datetime.fromisoformat(rec["timestamp"])
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60


def test_append_does_not_import_jsonschema(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ctxnb.govern.ledger import TraceLedger, build_trace_record\n"
        "TraceLedger(sys.argv[1]).append(build_trace_record(file_path='a.py', ranges=[],"
        " new_text='', intent_id='I', session_id=None, model_id=None, repo_root=None))\n"
        "print('jsonschema' in sys.modules)"
    )
    path = tmp_path / "t.jsonl"
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
    assert len(path.read_text().splitlines()) == 1


def test_import_is_light() -> None:
    code = (
        "import sys, ctxnb.govern.ledger, ctxnb.govern\n"
        "bad = [m for m in ('jsonschema', 'pandas', 'pyarrow', 'pydantic') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_docstring_examples() -> None:
    result = doctest.testmod(ledger_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5
    assert result.failed == 0


def test_head_revision_cache_follows_new_commits(tmp_path):
    from ctxnb.govern.ledger import git_head_revision

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    (tmp_path / "a.txt").write_text("1\n")
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    first = git_head_revision(tmp_path)
    assert first == git("rev-parse", "HEAD")
    assert git_head_revision(tmp_path) == first  # served from the cache
    (tmp_path / "a.txt").write_text("2\n")
    git("commit", "-q", "-am", "two")
    assert git_head_revision(tmp_path) == git("rev-parse", "HEAD") != first
    git("pack-refs", "--all")
    assert git_head_revision(tmp_path) == git("rev-parse", "HEAD")
    git("checkout", "-q", "-b", "other")
    (tmp_path / "a.txt").write_text("3\n")
    git("commit", "-q", "-am", "three")
    assert git_head_revision(tmp_path) == git("rev-parse", "HEAD")


# --- the hash chain and `ctxnb trace verify` ------------------------------------------------


def _chained_ledger(root: Path, n: int = 6) -> Path:
    ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
    for i in range(n):
        ledger.append(
            build_trace_record(
                file_path=f"src/f{i}.py",
                ranges=[(1, 1)],
                new_text=f"x = {i}\n",
                intent_id="INT-1",
                session_id="s",
                model_id=None,
                repo_root=None,
            )
        )
    return ledger.path


def _verify(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from ctxnb.cli.app import main

    code = main(["trace", "verify", str(root)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_every_record_links_to_the_line_before_and_stays_schema_valid(tmp_path: Path) -> None:
    path = _chained_ledger(tmp_path)
    raw = path.read_bytes().splitlines()
    validator = shared_validator()
    prev = "sha256:" + hashlib.sha256(b"").hexdigest()
    for line in raw:
        record = json.loads(line)
        assert not list(validator.iter_errors(record))
        assert record["metadata"]["prev_hash"] == prev
        prev = "sha256:" + hashlib.sha256(line).hexdigest()


def _forge(lines: list[bytes], how: str) -> tuple[list[bytes], int]:
    """The forged ledger's lines and the line `trace verify` must name."""
    out = list(lines)
    if how == "edit":
        out[2] = out[2].replace(b"src/f2.py", b"src/f9.py")
        return out, 3
    if how == "edit-last":
        out[-1] = out[-1].replace(b"src/f5.py", b"src/f9.py")
        return out, len(lines)
    if how == "insert-copy":
        out.insert(3, lines[0])
        return out, 4
    if how == "insert-forged":
        forged = json.loads(lines[1])
        forged["metadata"]["prev_hash"] = "sha256:" + "0" * 64
        out.insert(3, json.dumps(forged).encode())
        return out, 4
    if how == "append":
        forged = json.loads(lines[-1])
        forged["metadata"]["prev_hash"] = "sha256:" + hashlib.sha256(lines[-1]).hexdigest()
        out.append(json.dumps(forged, separators=(",", ":")).encode())
        return out, len(lines) + 1
    if how == "delete":
        del out[3]
        return out, 3
    if how == "delete-first":
        del out[0]
        return out, 1
    if how == "delete-last":
        del out[-1]
        return out, len(lines)
    if how == "reorder":
        out[2], out[3] = out[3], out[2]
        return out, 3
    raise AssertionError(how)


FORGERIES = [
    "edit",
    "edit-last",
    "insert-copy",
    "insert-forged",
    "append",
    "delete",
    "delete-first",
    "delete-last",
    "reorder",
]


@pytest.mark.parametrize("how", FORGERIES)
def test_trace_verify_names_the_first_forged_line(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _chained_ledger(tmp_path)
    assert _verify(tmp_path, capsys)[0] == 0
    lines, bad = _forge(path.read_bytes().splitlines(), how)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    code, text = _verify(tmp_path, capsys)
    assert code == 1
    assert f"agent_trace.jsonl:{bad}: " in text, text


def test_trace_verify_accepts_a_line_cut_by_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _chained_ledger(tmp_path, 2)
    with path.open("ab") as f:
        f.write(b'{"version":"0.1.0","id":')  # a writer killed mid-line
    _chained_ledger(tmp_path, 2)  # the next appends link to the cut line as it is
    code, text = _verify(tmp_path, capsys)
    assert code == 0 and "cut by a crash): [3]" in text, text
    lines = path.read_bytes().splitlines()
    del lines[2]  # removing the cut line is a deletion like any other
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    assert _verify(tmp_path, capsys)[0] == 1


def test_trace_verify_needs_the_head_to_rule_out_a_cut_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _chained_ledger(tmp_path, 3)
    path.with_name(path.name + ".head").unlink()
    code, text = _verify(tmp_path, capsys)
    assert code == 1 and ".head is missing" in text


def test_conversation_url_is_recorded_and_schema_valid() -> None:
    rec = build_trace_record(
        file_path="a.py",
        ranges=[(1, 1)],
        new_text="x\n",
        intent_id="I",
        session_id=None,
        model_id=None,
        repo_root=None,
        conversation_url="file:///home/u/.claude/projects/p/abc.jsonl",
    )
    conv = rec["files"][0]["conversations"][0]
    assert conv["url"] == "file:///home/u/.claude/projects/p/abc.jsonl"
    assert not list(shared_validator().iter_errors(rec))


def test_a_batch_of_records_is_one_chained_write_or_nothing(tmp_path: Path) -> None:
    """A command's commit appends one trace line per file as one write with one fsync;
    the chain links every line to the one before, across the batch, and a batch with
    one bad record writes none of it."""
    from ctxnb.govern.chain import PREV_KEY
    from ctxnb.govern.ledgercheck import verify_ledger

    ledger = TraceLedger(tmp_path / "agent_trace.jsonl")

    def rec(path: str) -> dict:
        return build_trace_record(
            file_path=path,
            ranges=[],
            new_text="",
            intent_id="INT-1",
            session_id=None,
            model_id=None,
            repo_root=None,
        )

    ledger.append(rec("first.py"))
    ledger.append_many_later([rec(f"f{i}.py") for i in range(5)])()
    lines = (tmp_path / "agent_trace.jsonl").read_bytes().splitlines()
    assert len(lines) == 6
    report = verify_ledger(tmp_path / "agent_trace.jsonl")
    assert report.ok and report.lines == 6, report
    for before, line in zip(lines, lines[1:], strict=False):
        prev = json.loads(line)["metadata"][PREV_KEY]
        assert prev == "sha256:" + hashlib.sha256(before).hexdigest()
    bad = rec("bad.py")
    bad["files"] = "not a list"
    with pytest.raises(StoreError):
        ledger.append_many_later([rec("g.py"), bad])
    assert (tmp_path / "agent_trace.jsonl").read_bytes().splitlines() == lines
    assert ledger.append_many_later([])() is None


def test_a_file_where_the_ledger_folder_goes_is_refused_and_named_as_such(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".orchestration").write_text("not a folder\n")
    with pytest.raises(PolicyError) as caught:
        TraceLedger(ws / ".orchestration" / "agent_trace.jsonl").append(make())
    assert caught.value.error_code == "PATH_DENIED"
    assert caught.value.details["rule"] == "not-a-directory"
    assert "not a folder" in caught.value.message
    assert (ws / ".orchestration").read_text() == "not a folder\n"
