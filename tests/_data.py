"""Where the tests' fixtures live.

Everything a test needs is vendored in ``tests/data`` (sources and licences in its
README), so ``make test`` passes in a fresh clone on its own. The project's development
checkouts also keep a ``shared/data`` folder beside the repository; when it is there,
tests run their checks over it as extra cases. Nothing may depend on it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_DATA = REPO / "tests" / "data"
SHARED_DATA = REPO.parent / "shared" / "data"
# Every test reaches ../shared/data through data_dirs() (tests/test_data_isolation.py
# checks that no other test names it), so CI proves the suite passes without it by
# running the tests that use it once more with it hidden: CTXNB_TEST_WITHOUT_SHARED=1.
WITHOUT_SHARED = os.environ.get("CTXNB_TEST_WITHOUT_SHARED") == "1"


def data_dirs() -> list[Path]:
    """The vendored test data, then ``../shared/data`` when it exists (extra cases only)."""
    shared = SHARED_DATA.is_dir() and not WITHOUT_SHARED
    return [TEST_DATA, *([SHARED_DATA] if shared else [])]


def trajectory_files(kind: str, pattern: str) -> list[Path]:
    """Trajectory files of one source format: the vendored ones, plus shared extras.

    A file present in both places is listed once (by name, the vendored copy).
    """
    seen: dict[str, Path] = {}
    for d in data_dirs():
        for p in sorted((d / "trajectories" / kind).glob(pattern)):
            seen.setdefault(p.name, p)
    return list(seen.values())


def age_files(root: Path, seconds: float = 60) -> None:
    """Set every regular file below ``root`` (not ``.ctxnb``) ``seconds`` into the past,
    out of the stat cache's racy window."""
    old = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and ".ctxnb" not in p.parts:
            os.utime(p, (old, old))


def swap_inode_keeping_stat(path: Path, old: str, new: str) -> os.stat_result:
    """Replace ``path`` by a new inode whose text has ``old`` replaced by ``new`` (same
    length), with the same mtime: what a stat cache must still tell apart. Returns the
    stat from before."""
    st = path.stat()
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(path.read_text().replace(old, new))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    return st
