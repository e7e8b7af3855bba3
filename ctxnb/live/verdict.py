"""An honest verdict on a live run: the task's own tests, in a fresh sandbox.

An agent that may edit the tests can make them pass without fixing anything (change
``assertEqual(add(2, 3), 5)`` to expect ``-1``). So a task names its test files; they
lie outside the intent the agent works under, and the verdict does not trust the
workspace's copy of them at all:

1. the pristine test files (and the task's hidden checks, which the agent never saw)
   are taken from the task's own copy, read before the run;
2. the workspace the agent left is copied, file by file through the access layer's
   race-free walk (no symbolic link followed, denied names left out), into a new
   directory; the pristine tests and hidden checks are written over it;
3. the test command, then the hidden check, run there in a sandbox with nothing
   writable.

A run that tried to change a test file (seen in what its commands changed, kept or
put back, or in the workspace's bytes afterwards) is flagged ``tests_tampered`` and is
not solved, whatever the verdict.

Example:
    >>> pristine = {"test_a.py": b"assert True\\n"}
    >>> touched_tests({"changed": [{"path": "test_a.py"}], "dropped": []}, pristine)
    ['test_a.py']
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..access.fdio import PathPolicy

__all__ = ["Verdict", "judge", "pristine_files", "refused_tests", "touched_tests"]


@dataclass(frozen=True)
class Verdict:
    """What the task's tests said about the work.

    Attributes:
        passed: the test command (and the hidden check, when the task has one) exited 0.
        output: what they printed.
        tests_tampered: the run changed (or tried to change) a test file.
        tampered: the test files it touched.
    """

    passed: bool
    output: str
    tests_tampered: bool
    tampered: tuple[str, ...] = ()

    @property
    def solved(self) -> bool:
        """Passed, and without touching the tests."""
        return self.passed and not self.tests_tampered


def pristine_files(
    tests: Sequence[str], *, source: str | os.PathLike[str], hidden: str | os.PathLike[str] | None
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The test files and hidden checks of a task, read before the agent runs.

    Args:
        tests: the test files, relative to the task's root.
        source: the task's pristine copy (or the workspace before the run).
        hidden: a directory of checks the agent never sees, or None.

    Returns:
        ``(tests, hidden)``: relative path to bytes.
    """
    policy = PathPolicy([Path(source)])
    pristine = {rel: policy.read_bytes(rel) for rel in tests}
    extra: dict[str, bytes] = {}
    if hidden is not None:
        extra = {e.safe.rel: e.read() or b"" for e in PathPolicy([Path(hidden)]).walk()}
    return pristine, extra


def touched_tests(effects: Mapping[str, Any], pristine: Mapping[str, bytes]) -> list[str]:
    """The test files one command's effects name (committed, or dropped: a change to a
    test is tampering even when the sandbox did not let it reach the workspace)."""
    out: list[str] = []
    for key in ("changed", "dropped"):
        for entry in effects.get(key) or ():
            path = entry.get("path") if isinstance(entry, Mapping) else entry
            if isinstance(path, str) and os.path.normpath(path) in pristine and path not in out:
                out.append(os.path.normpath(path))
    return out


def refused_tests(command: str, pristine: Mapping[str, bytes]) -> list[str]:
    """The test files a refused command would have changed (it never ran: its text is
    all there is to go on, so the shell parser of :mod:`ctxnb.replay` reads it)."""
    from ..replay._shell import FileMemory, parse_command

    parse = parse_command(command, "", FileMemory())
    return [
        os.path.normpath(f.path)
        for f in parse.files
        if f.op != "read" and os.path.normpath(f.path) in pristine
    ]


def judge(
    root: str | os.PathLike[str],
    test: str,
    *,
    pristine: Mapping[str, bytes],
    hidden: Mapping[str, bytes] | None = None,
    check: str | None = None,
    touched: Sequence[str] = (),
    timeout: float = 60.0,
    read_paths: Sequence[str] = (),
    max_output_bytes: int = 64_000,
) -> Verdict:
    """Run the task's tests on a fresh copy of the workspace with the pristine tests.

    Args:
        root: the workspace the agent left.
        test: the test command (shell).
        pristine: the test files as the task ships them.
        hidden: checks the agent never saw, added to the copy.
        check: the command that runs the hidden checks, or None.
        touched: test files the run's commands changed or tried to change.
        timeout: seconds per command.
        read_paths: more host paths the tests may read (the agent's sandbox had the same:
            a Python environment outside ctxnb's, say).
        max_output_bytes: output kept per stream (the head and tail halves).
    """
    from ..sandbox import Sandbox

    policy = PathPolicy([Path(root)])
    tampered = list(dict.fromkeys(os.path.normpath(t) for t in touched))
    for rel, data in pristine.items():
        try:
            now = policy.read_bytes(rel)
        except Exception:  # deleted or turned into a link: either way, not the test
            now = None
        if now != data and rel not in tampered:
            tampered.append(rel)
    fresh = Path(tempfile.mkdtemp(prefix="ctxnb-verdict-"))
    try:
        for entry in policy.walk():
            rel = entry.safe.rel
            if rel.split("/", 1)[0] in (".ctxnb", ".orchestration"):
                continue
            data = entry.read()
            if data is not None:
                _write(fresh, rel, data)
        for rel, data in {**pristine, **(hidden or {})}.items():
            _write(fresh, rel, data)
        # One confined command for the tests and the hidden check (a sandbox start
        # is most of a verdict's time); the check runs only when the tests pass.
        command = f"{test}\n" + (f"{check}\n" if check else "")
        from ..redaction.redactor import redact_text

        # What the tests print leaves like any command's output: redacted.
        res = (
            Sandbox(fresh, read_paths=read_paths)
            .run(
                f"set -e\n{command}",
                shell=True,
                timeout=timeout * (2 if check else 1),
                redact=redact_text,
                max_output_bytes=max_output_bytes,
            )
            .result
        )
        passed = res.returncode == 0 and not res.timed_out
        output = res.stdout + res.stderr
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return Verdict(
        passed=passed,
        output=output,
        tests_tampered=bool(tampered),
        tampered=tuple(tampered),
    )


def _write(base: Path, rel: str, data: bytes) -> None:
    # ``rel`` comes from the policy's walk or from the task's own copy: normalized,
    # relative, no ``..``; the directory is new and ours.
    target = base / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.write_bytes(data)
