"""``ctxnb tutorials``: a pip user's way to the notebooks ``make lab`` opens in a checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _paths import REPO


def _ctxnb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_tutorials_are_copied_with_the_extras_each_needs_and_the_next_steps(
    tmp_path: Path,
) -> None:
    out = _ctxnb("tutorials", cwd=tmp_path)  # default: the current directory
    assert out.returncode == 0, out.stderr
    target = tmp_path / "ctxnb-tutorials"
    shipped = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in target.iterdir()) == shipped
    assert f"copied {len(shipped)} tutorials to {target}" in out.stdout
    assert "08-sandboxed-agents-and-merges.ipynb  (also needs ctxnb[acp])" in out.stdout
    assert "01-quickstart.ipynb\n" in out.stdout  # nothing beyond the notebook extra
    assert "pip install 'ctxnb[notebook]' jupyterlab" in out.stdout
    assert f"{target}    # start with 01-quickstart.ipynb" in out.stdout


def test_an_existing_copy_is_never_overwritten(tmp_path: Path) -> None:
    assert _ctxnb("tutorials", str(tmp_path), cwd=tmp_path).returncode == 0
    mine = tmp_path / "ctxnb-tutorials" / "01-quickstart.ipynb"
    mine.write_text("my notes")
    again = _ctxnb("tutorials", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 1
    assert "exists already" in again.stderr and "remove it or pass another" in again.stderr
    assert mine.read_text() == "my notes"
    missing = _ctxnb("tutorials", str(tmp_path / "no" / "such"), cwd=tmp_path)
    assert missing.returncode == 1 and "is not a directory; create it first" in missing.stderr
    assert not (tmp_path / "no").exists()
