"""The sample data and tutorials ship whole: every tutorial reads only what the package
carries (:func:`ctxnb.samples.data_dir`), so the copy ``ctxnb tutorials`` makes runs from
a plain install, and the extras it names for each are the ones its imports need.

The installed package itself is exercised in ``tests/test_packaging.py`` (slow); these
read the notebooks' code, which is what decides where they look.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _notebooks import code
from _paths import REPO

from ctxnb.samples import (
    TUTORIAL_EXTRAS,
    TUTORIAL_PACKAGES,
    copy_tutorials,
    data_dir,
    tutorials_dir,
)

TUTORIALS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _code(nb: Path) -> str:
    cells = nbformat.read(nb, as_version=4).cells
    return "\n".join(code(c.source) for c in cells if c.cell_type == "code")


def _outside_paths(source: str) -> list[str]:
    """String constants with a parent-directory component: from ``notebooks/`` of a
    checkout they reach its ``data/`` or ``tests/``, which an install does not have.
    (Paths inside a tutorial's own workspace, such as ``tests/**``, are fine.)"""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if ".." in node.value.replace("\\", "/").split("/"):
                found.append(node.value)
    return found


def test_the_checkout_has_tutorials_and_the_library_finds_them() -> None:
    assert len(TUTORIALS) >= 8
    assert tutorials_dir() == REPO / "notebooks"
    assert data_dir() == REPO / "data"


@pytest.mark.parametrize("nb", TUTORIALS, ids=lambda p: p.name[:2])
def test_no_tutorial_reads_the_repository(nb: Path) -> None:
    """A tutorial that reads ``../data`` or ``../tests`` works in ``notebooks/`` of a
    checkout and fails for everyone who got it from ``ctxnb tutorials``."""
    assert _outside_paths(_code(nb)) == []


def test_the_path_check_finds_what_the_tutorials_once_did() -> None:
    # The three forms tutorials 05, 06 and 07 used, and one that is fine.
    assert _outside_paths('DATA = Path("../data/trajectories")') == ["../data/trajectories"]
    assert _outside_paths('DATA = Path("..") / "data" / "trajectories"') == [".."]
    bundle = 'B = Path("..") / "tests" / "data" / "tasks" / "parse.bundle"'
    assert _outside_paths(bundle) == [".."]
    assert _outside_paths('open("data\\\\..\\\\secret")') == ["data\\..\\secret"]
    assert _outside_paths('DATA = data_dir() / "trajectories"') == []


def _imports(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("nb", TUTORIALS, ids=lambda p: p.name[:2])
def test_each_tutorial_names_the_extras_its_imports_need(nb: Path) -> None:
    """``ctxnb tutorials`` tells a pip user which extra each notebook needs: an ACP
    notebook needs ``acp`` (which brings the live agent's packages too), one that runs
    an agent live needs ``live``; the others need nothing beyond ``notebook``."""
    mods = _imports(_code(nb))
    roots = {m.split(".")[0] for m in mods}
    live = any(m == "ctxnb.live" or m.startswith(("ctxnb.live.", "ctxnb.tasks")) for m in mods)
    want: tuple[str, ...] = ()
    if "acp" in roots:
        want = ("acp",)
    elif live:
        want = ("live",)
    assert TUTORIAL_EXTRAS.get(nb.name[:2], ()) == want
    # Mining or grading tasks runs the repository's tests under pytest, which no extra
    # brings (ctxnb.tasks refuses an interpreter without it, naming the fix).
    tasks = any(m == "ctxnb.tasks" or m.startswith("ctxnb.tasks.") for m in mods)
    assert TUTORIAL_PACKAGES.get(nb.name[:2], ()) == (("pytest",) if tasks else ())


# A Python without the extra: the SDK's import fails as a missing package's does.
_WITHOUT = """
import sys
for name in sys.argv[2:]:
    sys.modules[name] = None
exec(compile(open(sys.argv[1]).read(), "first cell", "exec"), {"__name__": "__main__"})
"""


ACP_TUTORIALS = [nb for nb in TUTORIALS if "acp" in TUTORIAL_EXTRAS.get(nb.name[:2], ())]


def test_there_is_an_acp_tutorial_for_the_check_below() -> None:
    assert [nb.name[:2] for nb in ACP_TUTORIALS] == ["08"]


@pytest.mark.parametrize("nb", ACP_TUTORIALS, ids=lambda p: p.name[:2])
def test_an_acp_tutorial_without_the_extra_fails_at_its_first_cell_naming_the_install(
    nb: Path, tmp_path: Path
) -> None:
    """Run as a pip user without ``[acp]`` would: the first cell that imports the SDK
    stops with ctxnb's message naming ``pip install 'ctxnb[acp]'``, not a bare ``No module
    named 'acp'``. (The other extras' notebooks reach them through ctxnb's own imports,
    which raise the same kind of message.)"""
    cells = [c for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code"]
    first = next(c for c in cells if "acp" in {m.split(".")[0] for m in _imports(code(c.source))})
    (tmp_path / "cell.py").write_text(code(first.source))
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, str(tmp_path / "cell.py"), "acp"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ctxnb.errors.MissingDependencyError: "), proc.stderr
    assert "pip install 'ctxnb[acp]'" in last


def test_copy_tutorials_copies_every_notebook_and_never_overwrites(tmp_path: Path) -> None:
    target = copy_tutorials(tmp_path)
    assert sorted(p.name for p in target.iterdir()) == [p.name for p in TUTORIALS]
    for nb in TUTORIALS:
        assert (target / nb.name).read_bytes() == nb.read_bytes()
    edited = target / TUTORIALS[0].name
    edited.write_text("mine")
    with pytest.raises(FileExistsError):
        copy_tutorials(tmp_path)
    assert edited.read_text() == "mine"
