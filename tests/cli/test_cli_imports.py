"""What each ``ctxnb`` command imports, as a real process.

A user meets the command line as a fresh process: every module it imports is paid on
every run. pandas, pyarrow and pydantic (with numpy under them) take about half a second
together, so a command that the store's files and the ledger answer without them must
not load them. The CLI parses and dispatches before it imports anything a command needs,
and builds the arguments of the one command it runs, so ``ctxnb --help`` pays for no
command's libraries. The Claude Code hook's own list is pinned in
``tests/integrations/test_claude_hooks.py``.

``index`` of a tree the stat cache answers for is pinned: the store's log says nothing
was committed since, so the store (pyarrow) is not opened, and settings are validated
by pydantic only when a file gives them. Not pinned here: ``history``, ``show``, ``why``
and a governed ``sandbox exec`` read versions from the object store, whose Parquet
segments need pyarrow (``docs/performance.md`` says what that costs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _data import age_files
from _paths import REPO
from _tracewal_setup import governed, ledger_path, tools_of

from ctxnb.samples import copy_sample_workspace

HEAVY = {"pandas", "pyarrow", "pydantic", "numpy"}
# The command line's own modules and the base it stands on: all that `ctxnb --help` needs.
HELP_MODULES = {
    "ctxnb",
    "ctxnb._util",
    "ctxnb._util.lazy",
    "ctxnb._version",
    "ctxnb.cli",
    "ctxnb.cli.app",
    "ctxnb.cli.files",
    "ctxnb.cli.govern",
    "ctxnb.cli.integrations",
    "ctxnb.cli.merge",
    "ctxnb.cli.replay",
    "ctxnb.cli.samples",
    "ctxnb.cli.tasks",
    "ctxnb.errors",
    "ctxnb.hashing",
}
# What one command's arguments would bring in (replay's strategies and process pools),
# and shutil, which argparse imports for the terminal's width (the command line asks).
NOT_FOR_HELP = ("multiprocessing", "concurrent", "dataclasses", "pandas", "shutil")

_PROBE = """
import json, sys
from ctxnb.cli.app import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _run(*args: str, cwd: Path | None = None) -> tuple[int, set[str], str]:
    """Run ``ctxnb ARGS`` in a fresh interpreter; its exit code, modules and stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"]), proc.stdout


def _heavy(modules: set[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & HEAVY)


def test_help_builds_no_command_and_imports_only_the_command_line() -> None:
    code, modules, out = _run("--help")
    assert code == 0
    # Every command is listed, though none of their arguments was built.
    for name in ("index", "history", "replay", "sandbox", "trace", "why", "hook"):
        assert f"    {name} " in out
    ours = {m for m in modules if m == "ctxnb" or m.startswith("ctxnb.")}
    assert ours == HELP_MODULES
    assert sorted(m for m in modules if m.split(".")[0] in NOT_FOR_HELP) == []


def test_a_commands_help_still_shows_what_its_arguments_are_built_from() -> None:
    # replay's --strategy help is made from the strategy table when replay's parser is
    # built: asked for, it is there; the table is not imported for `ctxnb --help`.
    code, modules, out = _run("replay", "--help")
    assert code == 0
    assert "observation-masking[:KEEP_LAST]" in " ".join(out.split())
    assert "ctxnb.strategies.registry" in modules
    assert _heavy(modules) == []


def test_a_command_given_wrong_arguments_is_still_refused() -> None:
    # Only the named command's arguments are built: its own options are still checked.
    code, _, _ = _run("index", "--no-such-option")
    assert code == 2
    code, _, _ = _run("no-such-command")
    assert code == 2


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A governed sample workspace with one traced write in its ledger and store."""
    root = governed(copy_sample_workspace(tmp_path / "ws"))
    # One writer here: no ctxnb.toml saying how writers share (reading one is not the
    # light path these tests measure).
    (root / "ctxnb.toml").unlink()
    workspace, tools = tools_of(root)
    try:
        assert tools.write_file("inventory/new.py", "x = 1\n").success
    finally:
        workspace.close()
    assert ledger_path(root).read_text().count("\n") == 1
    return root


def test_trace_verify_reads_the_ledger_and_the_log_without_heavy_modules(ws: Path) -> None:
    code, modules, out = _run("trace", "verify", str(ws))
    assert code == 0 and "agent_trace.jsonl" in out
    assert _heavy(modules) == []


def test_a_forged_ledger_is_still_found_on_the_light_path(ws: Path) -> None:
    # The light path checks the chain as the full one does: a rewritten line fails.
    ledger = ledger_path(ws)
    ledger.write_text(ledger.read_text().replace("inventory/new.py", "inventory/old.py"))
    code, modules, _ = _run("trace", "verify", str(ws))
    assert code == 1
    assert _heavy(modules) == []


def test_sandbox_exec_without_an_intent_imports_no_store(ws: Path) -> None:
    code, modules, out = _run("sandbox", "exec", "-w", str(ws), "--", "echo", "confined")
    assert code == 0 and "confined" in out
    assert _heavy(modules) == []


# What `ctxnb index` of an unchanged tree loads of ctxnb: the workspace, its settings,
# the access layer and the store's log. No other command's module (`index` is the
# command line's own), no store reader, no model.
INDEX_MODULES = {
    "ctxnb",
    "ctxnb._util",
    "ctxnb._util.defaults",
    "ctxnb._util.domains",
    "ctxnb._util.jsoncache",
    "ctxnb._util.lazy",
    "ctxnb._util.record",
    "ctxnb._util.seal",
    "ctxnb._util.wildmatch",
    "ctxnb._version",
    "ctxnb.access",
    "ctxnb.access._fdwalk",
    "ctxnb.access._gitindex",
    "ctxnb.access._gitsources",
    "ctxnb.access._judgments",
    "ctxnb.access._safepath",
    "ctxnb.access.door",
    "ctxnb.access.fdio",
    "ctxnb.access.ignore",
    "ctxnb.access.observe",
    "ctxnb.access.pathrules",
    "ctxnb.cli",
    "ctxnb.cli.app",
    "ctxnb.config",
    "ctxnb.errors",
    "ctxnb.hashing",
    "ctxnb.indexer",
    "ctxnb.resolver",
    "ctxnb.store",
    "ctxnb.store._append",
    "ctxnb.store._guard",
    "ctxnb.store._log",
    "ctxnb.store._tip",
    "ctxnb.workspace",
}
# Standard-library modules the unchanged index has no use for: a notebook's HTML escape,
# the log's time conversions, argparse's terminal width, OpenSSL's hashes (reading a
# pyproject.toml brings datetime with tomllib, and hashlib for its digest).
NOT_FOR_INDEX = ("html", "datetime", "shutil", "hashlib", "hmac")


def test_index_of_an_unchanged_tree_imports_no_heavy_module(tmp_path: Path) -> None:
    root = copy_sample_workspace(tmp_path / "ws")
    code, modules, _ = _run("index", "--no-progress", str(root))
    assert code == 0
    assert "pyarrow" in {m.split(".")[0] for m in modules}  # the first index stores files
    age_files(root)  # out of the stat cache's racy window
    assert _run("index", "--no-progress", str(root))[0] == 0  # the ctimes changed: hashed
    code, modules, out = _run("index", "--json", str(root))
    report = json.loads(out)
    assert code == 0 and report["unchanged"] > 0
    assert report["created"] == report["updated"] == report["deleted"] == 0
    assert _heavy(modules) == []
    assert {m for m in modules if m == "ctxnb" or m.startswith("ctxnb.")} == INDEX_MODULES
    assert sorted({"html", "shutil", "hmac"} & modules) == []
    # A change is still found (and then the store is opened to write it).
    (root / "README.md").write_text("# changed\n")
    code, modules, out = _run("index", "--json", str(root))
    assert code == 0 and json.loads(out)["updated"] == 1
    assert "pyarrow" in {m.split(".")[0] for m in modules}


def test_index_of_a_tree_without_settings_files_loads_no_time_module(tmp_path: Path) -> None:
    root = copy_sample_workspace(tmp_path / "ws")
    (root / "pyproject.toml").unlink()  # its [tool.ctxnb] is read with tomllib
    assert _run("index", "--no-progress", str(root))[0] == 0
    age_files(root)
    assert _run("index", "--no-progress", str(root))[0] == 0
    code, modules, out = _run("index", "--json", str(root))
    assert code == 0 and json.loads(out)["unchanged"] > 0
    assert sorted(m for m in modules if m.split(".")[0] in NOT_FOR_INDEX) == []


def test_settings_from_a_file_are_still_validated_on_the_light_path(tmp_path: Path) -> None:
    # Defaults need no validation; a file's values do, so pydantic is loaded for them and
    # an unknown key is refused with the file and the key named.
    root = copy_sample_workspace(tmp_path / "ws")
    (root / "ctxnb.toml").write_text("[index]\nbatch = 10\n")
    code, modules, _ = _run("index", "--no-progress", str(root))
    assert code == 1
    assert "pydantic" in {m.split(".")[0] for m in modules}
    proc = subprocess.run(
        [sys.executable, "-m", "ctxnb", "index", "--no-progress", str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert "unknown key 'index.batch'" in proc.stderr and "ctxnb.toml" in proc.stderr


def test_stats_reads_the_audit_log_without_heavy_modules(ws: Path) -> None:
    # Per-session figures come from the audit log alone: no store, no Parquet reader.
    code, modules, out = _run("stats", "-w", str(ws), "--json")
    assert code == 0 and json.loads(out)["agent-1"]["writes"] == 1
    assert _heavy(modules) == []


_FREEZE_PROBE = """
import gc, json, sys
from ctxnb.cli.app import main
called = main(["index", "--no-progress", sys.argv[1]])
after_call = gc.get_freeze_count()
sys.argv = ["ctxnb", "index", "--no-progress", sys.argv[1]]
code = main()
print(json.dumps([called, after_call, code, gc.get_freeze_count()]), file=sys.stderr)
"""


def test_the_index_process_leaves_its_heap_to_the_exit_and_a_caller_keeps_its_own(
    tmp_path: Path,
) -> None:
    # As the `ctxnb` process, the index freezes what is alive when it is done, so the
    # interpreter's last collection passes over it; called as main([...]) it does not
    # touch its caller's collector.
    root = copy_sample_workspace(tmp_path / "ws")
    proc = subprocess.run(
        [sys.executable, "-c", _FREEZE_PROBE, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    called, after_call, code, frozen = json.loads(proc.stderr.strip().splitlines()[-1])
    assert (called, after_call, code) == (0, 0, 0)
    assert frozen > 1000


@pytest.mark.parametrize("columns", [None, "60", "100", "0", "-5", "wide"])
def test_the_help_width_is_what_shutil_would_say(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from ctxnb.cli.app import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
