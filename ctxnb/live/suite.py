"""The live task suite: tiny real-shaped tasks with scripted solutions.

Each task of ``ctxnb/data/live/suite.json`` is a small Python module with a bug, a
unittest that fails because of it, a hidden check the agent never sees, and a
recorded solution (responses for :class:`~ctxnb.live.ScriptedModelServer`), so that
CI runs the whole suite without a model. Three recorded solutions overfit the visible
test on purpose (each says so in its ``note``): the hidden check fails them, which is
what a hidden check is for. Point :func:`~ctxnb.live.experiment.run_experiment` at a
real model (``model="anthropic/claude-haiku-4-5"``) to run the same tasks for real.

Example:
    >>> tasks = load_suite()
    >>> len(tasks) >= 20, tasks[0].id
    (True, 'add')
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from .run import Task

__all__ = ["SuiteTask", "load_suite"]


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite, as data (it crosses process boundaries as it is).

    Attributes:
        id: the task's name.
        prompt: the instruction.
        files: the repository: relative path to text.
        tests: the test files among ``files``.
        test: the test command.
        hidden: checks the agent never sees: relative path to text.
        check: the command that runs them.
        script: the recorded solution (responses for the scripted model).
        note: what is special about the task, if anything.
    """

    id: str
    prompt: str
    files: dict[str, str]
    tests: tuple[str, ...]
    test: str
    hidden: dict[str, str] = field(default_factory=dict)
    check: str | None = None
    script: tuple[dict[str, Any], ...] = ()
    note: str = ""

    def materialize(self, dest: str | os.PathLike[str]) -> Task:
        """Write the task under ``dest`` and return the :class:`~ctxnb.live.Task` to run.

        ``dest/work`` is the agent's workspace, ``dest/pristine`` the task's own copy
        (where the verdict reads the tests) and ``dest/hidden`` the hidden checks.
        """
        base = Path(dest)
        for rel in [*self.files, *self.hidden]:
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                raise ValueError(
                    f"task {self.id!r}: file name {rel!r} leaves the task's folder; "
                    "give names relative to it, without '..'"
                )
        for sub, content in (("work", self.files), ("pristine", self.files)):
            for rel, text in content.items():
                target = base / sub / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        (base / "hidden").mkdir(parents=True, exist_ok=True)
        for rel, text in self.hidden.items():
            (base / "hidden" / rel).write_text(text, encoding="utf-8")
        return Task(
            prompt=self.prompt,
            test=self.test,
            id=self.id,
            tests=self.tests,
            check=self.check,
            pristine=str(base / "pristine"),
            hidden=str(base / "hidden"),
        )


def load_suite(path: str | os.PathLike[str] | None = None) -> list[SuiteTask]:
    """The tasks of a suite file (the one shipped with ctxnb when None).

    Raises:
        ValueError: the file is not a suite (the message names the first bad task).
    """
    if path is None:
        text = files("ctxnb").joinpath("data/live/suite.json").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    data = json.loads(text)
    out: list[SuiteTask] = []
    for i, t in enumerate(data.get("tasks", []) if isinstance(data, dict) else []):
        try:
            out.append(
                SuiteTask(
                    id=str(t["id"]),
                    prompt=str(t["prompt"]),
                    files=dict(t["files"]),
                    tests=tuple(t.get("tests", ())),
                    test=str(t["test"]),
                    hidden=dict(t.get("hidden", {})),
                    check=t.get("check"),
                    script=tuple(t.get("script", ())),
                    note=str(t.get("note", "")),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{path or 'suite.json'}: task {i} is not a suite task ({exc!r}); each needs "
                "id, prompt, files, test (and may have tests, hidden, check, script, note)"
            ) from None
    if not out:
        raise ValueError(f"{path or 'suite.json'}: no tasks (expected {{'tasks': [...]}})")
    return out
