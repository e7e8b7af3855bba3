"""The derived protected set: what runs on the host is found from the real files.

Claude Code's settings, git (asked, not parsed), the Python environments in the
workspace, byte code by name; the hook's cache follows the files the set came from. The
doors that refuse the set are attacked in ``test_protected_doors.py`` and
``tests/sandbox/test_protected_sandbox.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from _protected_ws import git, make_workspace

from ctxnb.access.pathrules import PathRules
from ctxnb.access.protected import STATIC, ProtectedSet, protected_set
from ctxnb.errors import ConfigError


# -- what is derived ---------------------------------------------------------------------------
def test_commands_in_claude_code_settings_name_what_is_protected(tmp_path):
    root = tmp_path / "ws"
    (root / ".claude").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "lint.sh").write_text("#!/bin/sh\n")
    (root / "sub" / ".claude").mkdir(parents=True)

    def cmd(text: str) -> dict:
        return {"type": "command", "command": text}

    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [cmd('"$CLAUDE_PROJECT_DIR"/.claude/a.sh')]}],
            "Stop": [{"hooks": [cmd("${CLAUDE_PROJECT_DIR}/.claude/b.py --fast")]}],
            "PostToolUse": [
                {"hooks": [cmd("cd tools && bash lint.sh; python3 -m checks.style")]},
                {"hooks": [cmd("make -s lint 2>/dev/null || npm run lint")]},
                {"hooks": [cmd("$UNKNOWN_DIR/.claude/c.sh")]},
            ],
        },
        "statusLine": cmd("bash .claude/status.sh"),
        "apiKeyHelper": "./.claude/key.sh",
    }
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    local = {"hooks": {"Stop": [{"hooks": [cmd("./.claude/local.sh")]}]}}
    (root / ".claude" / "settings.local.json").write_text(json.dumps(local))
    mcp = {"mcpServers": {"tickets": {"command": "python3", "args": ["servers/tickets.py"]}}}
    (root / ".mcp.json").write_text(json.dumps(mcp))
    # Claude Code started in sub/ reads sub/.claude/settings.json.
    sub = {"hooks": {"Stop": [{"hooks": [cmd("./hooks/sub.sh")]}]}}
    (root / "sub" / ".claude" / "settings.json").write_text(json.dumps(sub))

    derived = protected_set(root, env={"HOME": str(tmp_path / "home")}, cwd=str(root / "sub"))
    assert {
        ".claude/a.sh",
        ".claude/b.py",
        "tools/lint.sh",
        "checks/style.py",
        "checks/__init__.py",
        "Makefile",
        "package.json",
        ".claude/c.sh",
        ".claude/status.sh",
        ".claude/key.sh",
        ".claude/local.sh",
        "servers/tickets.py",
        "sub/hooks/sub.sh",
    } <= set(derived.entries)
    why = derived.entries[".claude/a.sh"]
    assert ".claude/settings.json" in why and "hooks.PreToolUse" in why
    for rel in ("src/app.py", "tools/other.sh", ".claude/CLAUDE.md", "README.md"):
        assert derived.refusal(tuple(rel.split("/"))) is None, rel
    # Without cwd in sub/, sub's own settings are not Claude Code's project settings.
    assert "sub/hooks/sub.sh" not in protected_set(root, env={}).entries


def test_git_is_asked_for_its_hooks_and_the_programs_its_configuration_names(tmp_path):
    root = make_workspace(tmp_path)
    git(root, "config", "filter.crypt.clean", "./scripts/clean.sh %f")
    git(root, "config", "diff.pdf.textconv", "tools/pdf2txt")
    git(root, "config", "credential.helper", "!./bin/cred-helper get")
    git(root, "config", "core.fsmonitor", "scripts/fsmon.py")
    git(root, "config", "include.path", "../team.gitconfig")  # relative to .git/
    (root / "team.gitconfig").write_text("[core]\n\thooksPath = tools/githooks\n")
    derived = protected_set(root, env=dict(os.environ))
    for rel in (
        "tools/githooks",  # core.hooksPath, from an included file: asked of git
        "team.gitconfig",  # that file is git configuration itself
        "scripts/clean.sh",
        "tools/pdf2txt",
        "bin/cred-helper",
        "scripts/fsmon.py",
    ):
        assert rel in derived.entries, (rel, derived.entries)
    assert derived.refusal(("tools", "githooks", "pre-commit")) is not None
    assert derived.refusal(("tools", "other.py")) is None


def test_python_environments_in_the_workspace_are_protected_whole(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], check=True)
    (root / "conda" / "conda-meta").mkdir(parents=True)
    (root / "node_modules" / ".bin").mkdir(parents=True)
    env = {"PATH": f"{root / 'node_modules' / '.bin'}:/usr/bin:.", "HOME": str(tmp_path)}
    derived = protected_set(root, env=env)
    assert {"env", "conda", "node_modules/.bin"} <= set(derived.entries)
    assert "pyvenv.cfg" in derived.entries["env"]
    assert derived.refusal(("env", "lib", "python3.11", "site-packages", "x.py")) is not None
    assert derived.refusal(("node_modules", "left-pad", "index.js")) is None


def test_byte_code_and_startup_packages_are_protected_by_name(tmp_path):
    derived = ProtectedSet(tmp_path, {})
    for rel in (
        "src/__pycache__/mod.cpython-311.pyc",
        "src/__PYCACHE__/x.txt",
        "mod.pyc",
        "deep/a/b.pyo",
        "lib/sitecustomize/__init__.py",
        "usercustomize/x.py",
        "somewhere/pyvenv.cfg",
        ".claude/agents/reviewer.md",
        "sub/.claude/skills/x/SKILL.md",
        ".claude/commands/deploy.md",
    ):
        assert derived.refusal(tuple(rel.split("/"))) is not None, rel
    assert len(STATIC) == 9 and derived.refusal(("src", "mod.py")) is None


def test_the_hook_cache_follows_the_files_it_was_derived_from(tmp_path):
    root = make_workspace(tmp_path)
    states = tmp_path / "state"
    # A source changed within the last 50 ms may be changing still: not cached. Past
    # that window (no timing is asserted), the set is cached and used while nothing changes.
    time.sleep(0.1)
    first = protected_set(root, env={}, state_dir=states)
    path = states / "cache" / "protected.json"
    cache = json.loads(path.read_text())
    assert cache["entries"] == first.entries
    cache["entries"]["only/in/the/cache"] = "a marker"
    path.write_text(json.dumps(cache))
    assert "only/in/the/cache" in protected_set(root, env={}, state_dir=states).entries
    # A file added beside the top-level directories changes nothing derived: still cached.
    (root / "notes.txt").write_text("x\n")
    assert "only/in/the/cache" in protected_set(root, env={}, state_dir=states).entries
    # A new environment at the top is a change.
    (root / "env2").mkdir()
    (root / "env2" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    with_env = protected_set(root, env={}, state_dir=states).entries
    assert "env2" in with_env and "only/in/the/cache" not in with_env
    # Another environment is another derivation.
    assert (
        "only/in/the/cache" not in protected_set(root, env={"HOME": "/x"}, state_dir=states).entries
    )
    # A human adds a hook: the next call sees it (the settings file's stat changed).
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    settings["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "./late.sh"}]}]
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    second = protected_set(root, env={}, state_dir=states)
    assert "late.sh" in second.entries and "late.sh" not in first.entries
    assert "only/in/the/cache" not in second.entries
    assert second.sha256 != first.sha256
    # A settings file that did not exist before counts as a change when it appears.
    (root / ".claude" / "settings.local.json").write_text(
        json.dumps({"statusLine": {"type": "command", "command": "./status.sh"}})
    )
    assert "status.sh" in protected_set(root, env={}, state_dir=states).entries


def test_a_policy_without_a_protected_set_writes_anything(tmp_path):
    # ctxnb's own policy (the store's reads, its own state) is not an agent's.
    rules = PathRules([tmp_path])
    assert rules.protected_set is None and rules.protected_by("a/__pycache__/x.pyc") is None


# -- what ctxnb's own settings start -----------------------------------------------------------
CTXNB_TOML_SERVERS = """\
[mcp.servers.tickets]
command = "python3"
args = ["tools/tickets_server.py", "--db", "data/tickets.sqlite"]

[mcp.servers.docs]
command = "./bin/docs-server"
cwd = "services"
"""


def test_outside_mcp_servers_ctxnb_starts_are_protected(tmp_path):
    """Old hole: ``[mcp.servers.NAME]`` of ctxnb's own settings starts a program on the
    host (``[sandbox] agent`` is off by default) each time ctxnb connects to it; the
    files its command and arguments name were ordinary files an agent could rewrite."""
    root = make_workspace(tmp_path)
    (root / "tools").mkdir()
    (root / "tools" / "tickets_server.py").write_text("print('server')\n")
    (root / "ctxnb.toml").write_text(CTXNB_TOML_SERVERS)
    derived = protected_set(root, env={})
    assert "ctxnb.toml" in derived.entries["tools/tickets_server.py"]
    assert "mcp.servers.tickets" in derived.entries["tools/tickets_server.py"]
    assert derived.refusal(("services", "bin", "docs-server")) is not None  # its own cwd
    assert derived.refusal(("tools", "other.py")) is None
    # The same table in pyproject.toml's [tool.ctxnb], when there is no ctxnb.toml.
    (root / "ctxnb.toml").unlink()
    tool_table = CTXNB_TOML_SERVERS.replace("[mcp.", "[tool.ctxnb.mcp.")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n\n" + tool_table)
    derived = protected_set(root, env={})
    assert "pyproject.toml" in derived.entries["tools/tickets_server.py"]
    assert derived.refusal(("services", "bin", "docs-server")) is not None


def test_ctxnb_settings_that_cannot_be_read_stop_the_derivation(tmp_path):
    root = make_workspace(tmp_path)
    (root / "ctxnb.toml").write_text("[mcp.servers.x\ncommand = 1\n")
    with pytest.raises(ConfigError, match=r"ctxnb.toml: not valid TOML"):
        protected_set(root, env={})


# -- what protected code names in turn ---------------------------------------------------------
PRE_COMMIT_SHIM = """\
#!/usr/bin/env bash
# File generated by pre-commit: https://pre-commit.com
# ID: 138fd403232d2ddd5efb44317e38bf03
ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)
HERE="$(cd "$(dirname "$0")" && pwd)"
ARGS+=(--hook-dir "$HERE" -- "$@")
if [ -x "$INSTALL_PYTHON" ]; then
    exec "$INSTALL_PYTHON" -mpre_commit "${ARGS[@]}"
elif command -v pre-commit > /dev/null; then
    exec pre-commit "${ARGS[@]}"
fi
"""
PRE_COMMIT_CONFIG = """\
repos:
  - repo: local
    hooks:
      - id: check
        name: check
        entry: ./scripts/precommit_check.sh
        language: script
        exclude: tests/fixtures/
"""


def chained_workspace(tmp_path):
    """A hook script that runs two more files, one of them Python that imports beside it;
    git's pre-commit hook as pre-commit installs it, reading its configuration."""
    root = make_workspace(tmp_path)
    (root / ".claude" / "hooks" / "pre.sh").write_text(
        '#!/bin/sh\n# run the checks\n./scripts/lint.sh "$@"\npython3 tools/check.py\n'
    )
    (root / "scripts").mkdir()
    (root / "scripts" / "lint.sh").write_text("#!/bin/sh\nsh scripts/lint_more.sh\n")
    (root / "scripts" / "lint_more.sh").write_text("exit 0\n")
    (root / "scripts" / "precommit_check.sh").write_text("exit 0\n")
    (root / "tools" / "rules").mkdir(parents=True)
    (root / "tools" / "check.py").write_text(
        "import json\nimport helper\nfrom rules import style\n\nprint(json, helper, style)\n"
    )
    (root / "tools" / "helper.py").write_text("X = 1\n")
    (root / "tools" / "rules" / "style.py").write_text("Y = 2\n")
    (root / "tests" / "fixtures").mkdir(parents=True)
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(PRE_COMMIT_SHIM)
    hook.chmod(0o755)
    (root / ".pre-commit-config.yaml").write_text(PRE_COMMIT_CONFIG)
    return root


def test_what_a_protected_script_runs_is_protected_too(tmp_path):
    """Old hole: only the files a configuration names were protected; a hook script that
    runs ``./scripts/lint.sh`` or ``python3 tools/check.py``, and the configuration git's
    pre-commit hook reads, were ordinary files, run on the host at the next tool call or
    ``git commit``."""
    root = chained_workspace(tmp_path)
    derived = protected_set(root, env={"HOME": str(tmp_path / "home")})
    for rel in (
        "scripts/lint.sh",  # named by the hook script
        "scripts/lint_more.sh",  # named by what it names
        "tools/check.py",
        "tools/helper.py",  # imported from beside the script (sys.path[0])
        "tools/rules",  # a package beside it, whole
        "tools/json.py",  # not there: a file of that name would shadow the stdlib
        ".pre-commit-config.yaml",  # read by git's pre-commit hook
        "scripts/precommit_check.sh",  # which that configuration runs
    ):
        assert derived.refusal(tuple(rel.split("/"))) is not None, (rel, derived.entries)
    assert "named by .claude/hooks/pre.sh" in derived.entries["scripts/lint.sh"]
    assert "named by .git/hooks/pre-commit" in derived.entries[".pre-commit-config.yaml"]
    # A directory a script names is not taken whole, nor is what nothing names.
    assert derived.refusal(("tests", "fixtures", "data.json")) is None
    assert derived.refusal(("src", "app.py")) is None
    assert derived.refusal(("tools", "unrelated.txt")) is None


def test_the_cache_follows_the_scripts_followed(tmp_path):
    root = chained_workspace(tmp_path)
    states = tmp_path / "state"
    env = {"HOME": str(tmp_path / "home")}
    assert protected_set(root, env=env, state_dir=states).refusal(("bin", "x.sh")) is None
    time.sleep(0.1)  # past the window in which a just-written source is not cached
    lint = root / "scripts" / "lint_more.sh"
    lint.write_text("exit 0\nbash bin/x.sh\n")
    assert protected_set(root, env=env, state_dir=states).refusal(("bin", "x.sh")) is not None


def test_a_python_environment_anywhere_in_the_workspace_is_protected_by_what_it_is(tmp_path):
    """Old hole: only environments at the workspace's top level (or ctxnb's own, or
    $VIRTUAL_ENV) were found; ``services/api/.venv``'s ``bin/activate`` and
    ``site-packages`` were ordinary files, run by the next ``source .venv/bin/activate``
    or ``python`` there. A directory holding ``pyvenv.cfg`` or ``conda-meta/`` is an
    environment wherever it lies, found when a write is judged."""
    root = tmp_path / "ws"
    api = root / "services" / "api"
    api.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(api / ".venv")], check=True)
    (root / "deep" / "a" / "b" / "env" / "conda-meta").mkdir(parents=True)
    derived = protected_set(root, env={})
    site = ("services", "api", ".venv", "lib", "python3.11", "site-packages", "evil.py")
    for parts in (
        ("services", "api", ".venv", "bin", "activate"),
        site,
        ("services", "api", ".venv", "bin", "python3"),
        ("deep", "a", "b", "env", "lib", "python3.12", "site.py"),
    ):
        hit = derived.refusal(parts)
        assert hit is not None, parts
        assert "Python environment" in hit[1]
    assert derived.refusal(("services", "api", "app.py")) is None
    assert derived.refusal(("services", "api", ".venvs", "notes.txt")) is None
    # Through the file tools: the write is refused, the environment unchanged.
    from ctxnb import Workspace

    ws = Workspace.open(root)
    t = ws.tools(ws.session("agent"), caller="test-agent")
    out = t.dispatch("write_file", {"path": "/".join(site), "content": "import os\n"})
    assert not out["ok"] and out["error_code"] == "PATH_DENIED", out
    assert str(out["details"]["rule"]) == "protected:/services/api/.venv"
    assert not (root.joinpath(*site)).exists()
    assert t.dispatch("write_file", {"path": "services/api/app.py", "content": "x\n"})["ok"]
