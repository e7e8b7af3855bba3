"""The ``ctxnb`` command, in process and (for everything a git user meets) as a real
process: interrupts (a real SIGINT mid-index), one-line errors, ids that ``history`` prints and
``show`` takes, ``context``, ``mcp serve --http``/``tools``/``call``, progress bars on a
real pseudo-terminal and duplicate runs in ``replay``.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require
from _paths import REPO

from ctxnb.cli.app import main

CTXNB = [sys.executable, "-m", "ctxnb"]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}


def ctxnb(
    *args: str, cwd: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CTXNB, *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The process failed with exit 1 and said so in exactly one line, no traceback."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ctxnb {command}: error: "), lines[0]
    return lines[0]


# -- in process ------------------------------------------------------------------------------
def test_index_history_show(sample_ws, capsys, monkeypatch):
    assert main(["index", str(sample_ws), "--no-progress", "--list"]) == 0
    out = capsys.readouterr().out
    assert "created" in out and "inventory/models.py" in out

    (sample_ws / "inventory" / "models.py").write_text("# replaced\n")
    assert main(["index", str(sample_ws), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["updated"] == 1

    monkeypatch.chdir(sample_ws)
    assert main(["history", "inventory/models.py"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and "created" in lines[1] and "updated" in lines[2]

    from ctxnb import Workspace

    oid = Workspace.open(sample_ws).object_id("inventory/models.py")
    assert main(["show", oid]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["content"] == "# replaced\n"
    assert main(["show", oid, "--as-of", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["content"] != "# replaced\n"


def test_errors_are_one_line_and_exit_1(sample_ws, capsys, monkeypatch):
    monkeypatch.chdir(sample_ws)
    assert main(["index", str(sample_ws), "--no-progress"]) == 0  # a store to look in
    capsys.readouterr()
    assert main(["show", "no-such-id"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ctxnb show: error:") and "no-such-id" in err
    assert main(["history", "nope.py"]) == 1
    assert "ctxnb index" in capsys.readouterr().err
    assert main(["index", str(sample_ws / "missing")]) == 1


def test_python_dash_m(sample_ws):
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb", "index", str(sample_ws), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["created"] > 5


# -- interrupts -------------------------------------------------------------------------------

BATCH = 40


def _big_tree(root: Path, n: int) -> None:
    root.mkdir()
    # Small batches, so that the index is many transactions and SIGINT lands between
    # (or inside) them.
    (root / "ctxnb.toml").write_text(f"[index]\nbatch_size = {BATCH}\n", encoding="utf-8")
    for d in range(n // 100):
        sub = root / f"pkg{d:03}"
        sub.mkdir()
        for f in range(100):
            (sub / f"m{f:03}.py").write_text(f"# {d} {f}\n" + "x = 1\n" * 200, encoding="utf-8")


def _committed(root: Path) -> int:
    log = root / ".ctxnb" / "store" / "txlog"
    try:
        return log.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_sigint_mid_index_exits_130_with_one_line_and_a_consistent_store(tmp_path: Path) -> None:
    from ctxnb import Workspace

    root = tmp_path / "big"
    n = 4000
    _big_tree(root, n)
    proc = subprocess.Popen(
        [*CTXNB, "index", str(root), "--no-progress"],
        env=ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while _committed(root) < 3:  # a few transactions in, far from the last of 100
        assert proc.poll() is None, f"index ended before it was interrupted: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "no transaction committed in 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err == "ctxnb index: interrupted\n"
    assert "Traceback" not in out

    with Workspace.open(root) as ws:
        frame = ws.store.scan(type="file")
        assert 0 < len(frame) < n, "the interrupt did not land mid-index"
        # Every transaction is whole: the one SIGINT cut is absent, not half there.
        sizes = frame.groupby("tx_id").size()
        assert (sizes == BATCH).all(), sizes.value_counts()
        for oid in ws.store.ids("file")[:50]:
            doc = ws.store.get(oid)
            assert doc is not None
            path = Path(doc["source"]["path"])
            assert path.read_text(encoding="utf-8") == doc["content"]
        stored = len(frame)

    again = ctxnb("index", str(root), "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["created"] == n + 1 - stored  # + ctxnb.toml
    assert report["unchanged"] == stored


# -- one clear line for bad input --------------------------------------------------------------


def test_bad_input_is_one_line_without_traceback(sample_ws: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".ctxnb").write_text("not a directory\n")
    line = one_line_error(ctxnb("index", str(blocked)), "index")
    assert ".ctxnb is a file" in line and "move or delete" in line

    line = one_line_error(ctxnb("index", str(tmp_path / "missing")), "index")
    assert "does not exist" in line

    assert ctxnb("index", str(sample_ws)).returncode == 0
    line = one_line_error(ctxnb("show", "nosuchid", "-w", str(sample_ws)), "show")
    assert "'nosuchid'" in line and "ctxnb history" in line
    line = one_line_error(ctxnb("show", "abc@tx9", "-w", str(sample_ws)), "show")
    assert "<id>@<tx>" in line
    line = one_line_error(ctxnb("history", "nope.py", "-w", str(sample_ws)), "history")
    assert "ctxnb index" in line

    bad_json = ctxnb("mcp", "call", "read_file", '{"path": ', "-w", str(sample_ws))
    assert "not valid JSON" in one_line_error(bad_json, "mcp")
    not_obj = ctxnb("mcp", "call", "read_file", "[1, 2]", "-w", str(sample_ws))
    assert "must be a JSON object" in one_line_error(not_obj, "mcp")
    unknown = ctxnb("mcp", "call", "no_such_tool", "{}", "-w", str(sample_ws))
    assert "ctxnb mcp tools" in one_line_error(unknown, "mcp")

    strategy = ctxnb("context", "x", "--strategy", "nope", "-w", str(sample_ws))
    assert "unknown strategy 'nope'" in one_line_error(strategy, "context")


def test_a_mistyped_command_names_the_nearest_and_creates_nothing(tmp_path: Path) -> None:
    """``ctxnb indx`` is a usage error (exit 2) in one line that names ``index``, not
    argparse's usage line and list of all 20-odd choices; nothing is created where it ran."""
    for typed, meant in (
        ("indx", "'index'"),
        ("histroy", "'history'"),
        ("tutorial", "'tutorials'"),
    ):
        proc = ctxnb(typed, cwd=tmp_path)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith(
            f"ctxnb: {typed!r} is not a ctxnb command; did you mean {meant}?"
        )
        assert "a2a" not in lines[0] and "ctxnb --help" in lines[0]
    far = ctxnb("zzzz", "--json", cwd=tmp_path)
    assert far.returncode == 2
    assert far.stderr == "ctxnb: 'zzzz' is not a ctxnb command (`ctxnb --help` lists them)\n"
    assert list(tmp_path.iterdir()) == []


# -- ids: what history prints, show takes ----------------------------------------------------


def test_show_takes_the_ids_history_prints_and_unique_prefixes(sample_ws: Path) -> None:
    from ctxnb import Workspace

    rel = "inventory/models.py"
    assert ctxnb("index", str(sample_ws)).returncode == 0
    (sample_ws / rel).write_text("# replaced\n")
    assert ctxnb("index", str(sample_ws)).returncode == 0

    hist = ctxnb("history", rel, "-w", str(sample_ws))
    assert hist.returncode == 0, hist.stderr
    rows = hist.stdout.splitlines()[1:]
    ids = [r.split()[0] for r in rows]
    assert len(ids) == 2
    with Workspace.open(sample_ws) as ws:
        versions = ws.history(rel)
    for vid, v in zip(ids, versions, strict=True):
        shown = ctxnb("show", vid, "-w", str(sample_ws))
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout) == v.doc
        assert v.version_id.startswith(vid.split("@")[0])  # a prefix of the real id

    oid = versions[0].doc["xt/id"]
    latest = ctxnb("show", oid[:7], "-w", str(sample_ws))
    assert json.loads(latest.stdout)["content"] == "# replaced\n"
    full = ctxnb("show", versions[0].version_id, "-w", str(sample_ws))
    assert json.loads(full.stdout)["content"] == versions[0].doc["content"]


def test_restore_takes_the_version_ids_history_prints(sample_ws: Path) -> None:
    rel = "inventory/models.py"
    original = (sample_ws / rel).read_text()
    assert ctxnb("index", str(sample_ws)).returncode == 0
    (sample_ws / rel).write_text("# replaced\n")
    assert ctxnb("index", str(sample_ws)).returncode == 0
    first = ctxnb("history", rel, "-w", str(sample_ws)).stdout.splitlines()[1].split()[0]
    done = ctxnb("restore", rel, "--version", first, "-w", str(sample_ws))
    assert done.returncode == 0, done.stderr
    assert (sample_ws / rel).read_text() == original
    other = ctxnb("history", "README.md", cwd=sample_ws).stdout.splitlines()[1].split()[0]
    wrong = ctxnb("restore", rel, "--version", other, "-w", str(sample_ws))
    assert "belongs to another object" in one_line_error(wrong, "restore")


def test_an_ambiguous_prefix_lists_its_candidates(sample_ws: Path) -> None:
    from ctxnb import Workspace

    assert ctxnb("index", str(sample_ws)).returncode == 0
    with Workspace.open(sample_ws) as ws:
        ids = ws.store.ids()
    by_first: dict[str, list[str]] = {}
    for oid in ids:
        by_first.setdefault(oid[0], []).append(oid)
    prefix, clash = max(by_first.items(), key=lambda kv: len(kv[1]))
    assert len(clash) >= 2, "the sample workspace has more objects than hex digits"
    line = one_line_error(ctxnb("show", prefix, "-w", str(sample_ws)), "show")
    assert f"id prefix {prefix!r} is ambiguous" in line
    assert f"matches {len(clash)} objects" in line
    for oid in clash[:8]:
        assert oid[:12] in line


# -- context -------------------------------------------------------------------------------


def _tokens(out: str) -> dict[str, int]:
    return {
        m.group(1): int(m.group(2).replace(",", ""))
        for m in re.finditer(r"^  (\w+) +([\d,]+) tokens", out, flags=re.M)
    }


def test_context_prints_tokens_per_section_and_item(sample_ws: Path) -> None:
    from ctxnb import Workspace
    from ctxnb.strategies.builtin import ObservationMasking

    with Workspace.open(sample_ws) as ws:
        s = ws.session("review-42", system_prompt="You review code.")
        for rel in ("inventory/models.py", "README.md"):
            s.activate(s.add_path(rel))
        s.save()
        s.close()

    out = ctxnb("context", "review", "-w", str(sample_ws), "--budget", "50000")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("session review-42 · context at turn 0 · strategy keep-all")
    assert "of 50,000 tokens" in first
    with Workspace.open(sample_ws) as ws:
        s = ws.session("review-42")
        expected = s.assemble(None, 50000, record=False)
        masked = s.assemble(ObservationMasking(1), 50000, record=False)
        s.close()
    got = _tokens(out.stdout)
    assert {k: got[k] for k in expected.tokens_by_section()} == expected.tokens_by_section()
    assert got["free"] == 50000 - expected.total_tokens
    for item in expected.items:
        pinned = r" \[pinned\]" if item.pinned else ""  # the root AGENTS.md, by default
        assert re.search(rf"^ +{item.tokens:,}  {item.type} +{re.escape(item.label)}{pinned}$",
                         out.stdout, flags=re.M), item.label  # fmt: skip

    other = ctxnb("context", "review-42", "-w", str(sample_ws), "--strategy",
                  "observation-masking:1", "--budget", "50000")  # fmt: skip
    assert other.returncode == 0, other.stderr
    assert _tokens(other.stdout)["active"] == masked.tokens_by_section()["active"]

    missing = one_line_error(ctxnb("context", "nobody", "-w", str(sample_ws)), "context")
    assert "no session with id 'nobody'" in missing and "review-42" in missing


# -- mcp -------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_mcp_http_says_where_it_listens_and_tools_and_call_match_it(sample_ws: Path) -> None:
    # A dev dependency: skipped only where it is missing outside CI, never hidden in CI.
    require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc = subprocess.Popen(
        [*CTXNB, "mcp", "serve", str(sample_ws), "--http", "0"],
        env=ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 120)
        assert ready, "the server said nothing in 120 s"
        line = proc.stderr.readline()
        listening = r"ctxnb mcp: listening on (http://127\.0\.0\.1:(\d+)/mcp) \(Ctrl-C stops\)\n"
        m = re.fullmatch(listening, line)
        assert m, line
        url = m.group(1)

        async def over_http() -> tuple[dict[str, str], str]:
            with anyio.fail_after(120):
                return await _tools_and_read(url)

        async def _tools_and_read(url: str) -> tuple[dict[str, str], str]:
            async with streamable_http_client(url) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as s:
                    await s.initialize()
                    tools = {t.name: t.description or "" for t in (await s.list_tools()).tools}
                    res = await s.call_tool("read_file", {"path": "README.md"})
                    return tools, res.content[0].text  # type: ignore[union-attr]

        served, read_text = anyio.run(over_http)
    finally:
        _stop(proc)

    listed = ctxnb("mcp", "tools", "-w", str(sample_ws))
    assert listed.returncode == 0, listed.stderr
    names = [ln.split()[0] for ln in listed.stdout.splitlines()]
    assert names == sorted(served)
    for ln in listed.stdout.splitlines():
        name, _, desc = ln.partition(" ")
        assert served[name].startswith(desc.strip().rstrip("…")), name

    called = ctxnb("mcp", "call", "read_file", '{"path": "README.md"}', "-w", str(sample_ws))
    assert called.returncode == 0, called.stderr
    assert called.stdout == (read_text if read_text.endswith("\n") else read_text + "\n")

    refused = ctxnb("mcp", "call", "read_file", '{"path": "../outside"}', "-w", str(sample_ws))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert re.fullmatch(r"ctxnb mcp call: read_file refused: [A-Z_]+: .+\n", refused.stderr)

    as_json = ctxnb("mcp", "call", "list_files", "{}", "--json", "-w", str(sample_ws))
    paths = [f["path"] if isinstance(f, dict) else f for f in _files(json.loads(as_json.stdout))]
    assert "README.md" in paths


def _files(body: dict[str, Any]) -> list[Any]:
    result = body["result"]
    return result["files"] if isinstance(result, dict) else result


# -- progress and listing ------------------------------------------------------------------------


def _run_on_pty(args: list[str], timeout: float = 180) -> tuple[int, str, str]:
    """Run with stderr on a real pseudo-terminal; stdout on a pipe."""
    master, slave = pty.openpty()
    # A new pty is 0x0 and tqdm draws nothing in no columns: give it a terminal's size.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        args, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.stdout is not None
    with proc.stdout:
        out = proc.stdout.read().decode()
    proc.wait(timeout=30)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def test_index_shows_a_bar_on_a_terminal_and_prints_a_summary(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _big_tree(root, 700)
    code, out, err = _run_on_pty([*CTXNB, "index", str(root)])
    assert code == 0, err
    assert re.search(r"ctxnb index: 701file \[", err), err  # tqdm's counter, at the end
    assert out.splitlines() == [out.splitlines()[0]]  # one summary line, no file list
    assert out.startswith("indexed 701 files") and "created 701" in out

    (root / "pkg000" / "m000.py").write_text("changed\n")
    piped = ctxnb("index", str(root), "--list")
    assert piped.returncode == 0 and piped.stderr == ""  # no bar when stderr is no terminal
    lines = piped.stdout.splitlines()
    assert lines[0].startswith("indexed 701 files") and "updated 1" in lines[0]
    assert lines[1:] == ["  updated  pkg000/m000.py"]


TRAJ = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


def test_replay_separates_duplicate_runs_with_a_warning(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(3):
        shutil.copy(TRAJ, runs / f"copy{i}.traj.json")
    code, out, err = _run_on_pty(
        [*CTXNB, "replay", str(runs), "--strategy", "keep-all", "--workers", "1", "--wide"]
    )
    assert code == 0, err
    assert re.search(r"replay: 100%.*3/3", err), err  # the bar, on the terminal
    warning = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warning) == 1 and warning[0].startswith("ctxnb replay: warning: 3 runs share")
    assert "copy0.traj.json" in warning[0] and "#2" in warning[0]
    row = next(ln for ln in out.splitlines() if ln.startswith("keep-all"))
    single = ctxnb("replay", str(TRAJ), "--strategy", "keep-all", "--workers", "1", "--wide")
    assert single.returncode == 0 and single.stderr == ""
    one = next(ln for ln in single.stdout.splitlines() if ln.startswith("keep-all")).split()
    runs_col, steps_col = int(row.split()[1]), int(row.split()[2])
    assert (runs_col, steps_col) == (3, 3 * int(one[2]))  # three runs, not one of 3x steps


# -- the README's command list ------------------------------------------------------------------


def test_readme_lists_every_command_as_the_parser_has_them() -> None:
    gen = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_cli_docs.py"), "--check"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, gen.stderr
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    helped = ctxnb("--help").stdout
    names = re.findall(r"^    ([a-z][a-z-]*)\b", helped, flags=re.M)
    assert len(names) >= 10, helped
    for name in names:
        assert re.search(rf"^ctxnb {name}\b", section, flags=re.M), name
    assert "ctxnb restore FILE" in section and "ctxnb sandbox exec" in section


# -- reads never write (issue 45) ----------------------------------------------------------
def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under root, hidden ones included, with its mode, size and bytes."""
    out: dict[str, tuple[int, int, bytes]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
        out[str(p.relative_to(root))] = (st.st_mode, st.st_size, data)
    return out


@pytest.mark.parametrize(
    "args",
    [
        ["files"],
        ["files", "--json"],
        ["history", "a.txt"],
        ["show", "abc"],
        ["context", "s1"],
        ["why", "a.txt"],
        ["stats"],
        # A restore in a folder with no store has no version to go back to.
        ["restore", "a.txt"],
    ],
)
def test_read_commands_on_a_tree_with_no_store_say_so_and_create_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".env").write_text("TOKEN=x\n")
    before = _snapshot(tmp_path)
    proc = ctxnb(*args, cwd=tmp_path)
    line = one_line_error(proc, args[0])
    assert proc.stdout == ""  # not an empty listing that looks like an answer
    assert f"{tmp_path} is not a ctxnb workspace" in line
    assert "`ctxnb index`" in line and "`ctxnb init`" in line
    assert _snapshot(tmp_path) == before  # no .ctxnb/, nothing else either
    # The same through -w from elsewhere.
    line = one_line_error(ctxnb(*args, "-w", str(tmp_path), cwd=tmp_path.parent), args[0])
    assert f"{tmp_path} is not a ctxnb workspace" in line and _snapshot(tmp_path) == before


def test_store_verify_on_a_tree_with_no_store_says_how_to_make_one(tmp_path: Path) -> None:
    line = one_line_error(ctxnb("store", "verify", str(tmp_path)), "store")
    assert f"{tmp_path} is not a ctxnb workspace" in line and "`ctxnb index`" in line
    assert "pass the workspace as PATH" in line and _listing(tmp_path) == []


def test_commands_meant_to_create_a_workspace_still_do(tmp_path: Path) -> None:
    # The refusal above is for reads only: index and open record what they see.
    (tmp_path / "a.txt").write_text("hello\n")
    assert ctxnb("open", "a.txt", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".ctxnb").is_dir()
    proc = ctxnb("files", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["a.txt"]


def test_trace_verify_on_an_ungoverned_tree_fails_and_says_why(tmp_path: Path) -> None:
    proc = ctxnb("trace", "verify", str(tmp_path))
    assert proc.returncode == 1 and "intact" not in proc.stdout + proc.stderr
    assert "no ledger, so nothing to verify" in proc.stderr
    assert _listing(tmp_path) == []


def test_index_prints_its_summary_before_the_store_is_compacted(
    sample_ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compaction after a large index takes seconds; the summary must not wait for it.
    from ctxnb.workspace import Workspace

    (sample_ws / "ctxnb.toml").write_text("[index]\ncompact_after = 0\n")
    seen: list[str] = []
    settle = Workspace.settle_store

    def watching(ws: Workspace) -> None:
        seen.append(capsys.readouterr().out)  # what the user had been shown by then
        settle(ws)
        seen.append(str(ws.store.pending_segments()))

    monkeypatch.setattr(Workspace, "settle_store", watching)
    assert main(["index", str(sample_ws), "--no-progress"]) == 0
    assert seen[0].startswith("indexed ") and "created" in seen[0]
    assert seen[1] == "0"  # and the compaction still ran after it
