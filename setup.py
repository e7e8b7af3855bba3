"""One build step pyproject.toml cannot say: ship the repository's ``data/`` and the
tutorials of ``notebooks/`` in the wheel.

The sample workspace and the recorded trajectories live once, in ``data/`` at the top of
the repository, where the tests, the notebooks and ``ctxnb replay data/trajectories`` read
them. A wheel must carry them too, or ``copy_sample_workspace`` (the README's quickstart,
``python -m ctxnb.demo``, every tutorial) fails after a plain ``pip install``. Setuptools'
package data only takes files under a package's folder, so this step copies ``data/`` to
``ctxnb/_sample_data`` in the build tree (never in the checkout), where
``ctxnb.samples.data_dir`` looks first. The sdist carries ``data/`` (MANIFEST.in), so a
wheel built from it gets the same files. The tutorial notebooks go to
``ctxnb/_sample_data/notebooks`` the same way, so that ``ctxnb tutorials`` can hand a pip
user the notebooks the README starts them on. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("sample_workspace", "trajectories", "tasks")
# A store or caches left by running the sample in place are not part of it.
LEFTOVERS = shutil.ignore_patterns("__pycache__", "*.pyc", ".ctxnb", ".pytest_cache")


class BuildWithSampleData(build_py):
    """``build_py`` that also copies ``data/`` into the built package."""

    def run(self) -> None:
        super().run()
        # An editable install reads data/ of the checkout itself (data_dir's fallback).
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "ctxnb" / "_sample_data"
        for name in SHIPPED:
            source = HERE / "data" / name
            if not source.is_dir():
                raise SystemExit(
                    f"cannot build ctxnb: {source} is missing (a checkout or sdist has it)"
                )
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name, ignore=LEFTOVERS)
        # The notebooks alone: their conftest.py and sanitize.cfg are for ctxnb's own tests.
        tutorials = sorted((HERE / "notebooks").glob("*.ipynb"))
        if not tutorials:
            raise SystemExit(f"cannot build ctxnb: no tutorials in {HERE / 'notebooks'}")
        shutil.rmtree(target / "notebooks", ignore_errors=True)
        (target / "notebooks").mkdir(parents=True)
        for nb in tutorials:
            shutil.copyfile(nb, target / "notebooks" / nb.name)


setup(cmdclass={"build_py": BuildWithSampleData})
