"""SWE-bench-format task instances and predictions, read and written as the official
dataset and harness spell them.

An instance is one JSON object with ``instance_id``, ``repo``, ``base_commit``,
``problem_statement``, ``test_patch``, ``patch``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS``
(the two lists may be JSON strings of a list, as in the published datasets). Other keys
(``hints_text``, ``created_at``, ``version``, ``environment_setup_commit``, a
``test_cmd`` …) are kept as they came and written back, so a round trip loses nothing.

A prediction is what the official harness reads (``swebench.harness.run_evaluation
--predictions_path``): ``instance_id``, ``model_name_or_path``, ``model_patch``, one
JSON object a line.

Example:
    >>> import json, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tasks.jsonl"
    >>> row = {"instance_id": "a-1", "repo": "a", "base_commit": "0" * 40,
    ...        "problem_statement": "fix it", "test_patch": "", "patch": "",
    ...        "FAIL_TO_PASS": '["t.py::test_x"]', "PASS_TO_PASS": []}
    >>> _ = path.write_text(json.dumps(row) + "\\n")
    >>> (inst,) = load_instances(path)
    >>> inst.fail_to_pass
    ('t.py::test_x',)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.jsonl import SkippedLine, iter_jsonl
from ..errors import TaskFormatError

__all__ = [
    "REQUIRED_KEYS",
    "Instance",
    "Prediction",
    "load_instances",
    "load_predictions",
    "write_instances",
    "write_predictions",
]

#: The keys every instance must have, as the official dataset spells them.
REQUIRED_KEYS: tuple[str, ...] = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "test_patch",
    "patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
_TEXT_KEYS = REQUIRED_KEYS[:6]


@dataclass(frozen=True)
class Instance:
    """One task: a repository at a commit, a problem, and the tests that decide it.

    Attributes:
        instance_id: the task's name (``owner__repo-1234``).
        repo: the repository's name (``owner/repo``); informative only, the checkout
            is given when the task runs.
        base_commit: the commit the agent starts from.
        problem_statement: what the agent is told.
        test_patch: the tests that decide it, as a diff applied after the agent stops.
        patch: the reference solution (the "gold" patch), as a diff.
        fail_to_pass: test ids that fail at ``base_commit`` and must pass after.
        pass_to_pass: test ids that pass at ``base_commit`` and must still pass.
        extra: every other key of the instance, kept as it came.
    """

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    test_patch: str
    patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "instance") -> Instance:
        """An instance from one JSON object; ``where`` names it in errors.

        Raises:
            TaskFormatError: a key is missing or a value has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise TaskFormatError(
                f"{where}: an instance is a JSON object, not {type(data).__name__}"
            )
        name = data.get("instance_id")
        label = f"{where} ({name!r})" if isinstance(name, str) else where
        missing = [k for k in REQUIRED_KEYS if k not in data]
        if missing:
            raise TaskFormatError(
                f"{label}: missing {', '.join(missing)}; a SWE-bench instance needs "
                f"{', '.join(REQUIRED_KEYS)}"
            )
        for key in _TEXT_KEYS:
            if not isinstance(data[key], str):
                raise TaskFormatError(
                    f"{label}: {key} must be a string, not {type(data[key]).__name__}"
                )
        if not data["instance_id"] or not data["base_commit"]:
            raise TaskFormatError(f"{label}: instance_id and base_commit must not be empty")
        return cls(
            instance_id=data["instance_id"],
            repo=data["repo"],
            base_commit=data["base_commit"],
            problem_statement=data["problem_statement"],
            test_patch=data["test_patch"],
            patch=data["patch"],
            fail_to_pass=_test_list(data["FAIL_TO_PASS"], label, "FAIL_TO_PASS"),
            pass_to_pass=_test_list(data["PASS_TO_PASS"], label, "PASS_TO_PASS"),
            extra={k: v for k, v in data.items() if k not in REQUIRED_KEYS},
        )

    def to_dict(self) -> dict[str, Any]:
        """The instance as the official dataset spells it (the two test lists as JSON
        strings of a list, as the published datasets hold them)."""
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "problem_statement": self.problem_statement,
            "test_patch": self.test_patch,
            "patch": self.patch,
            "FAIL_TO_PASS": json.dumps(list(self.fail_to_pass)),
            "PASS_TO_PASS": json.dumps(list(self.pass_to_pass)),
            **dict(self.extra),
        }

    def __repr__(self) -> str:
        return (
            f"<Instance {self.instance_id} base={self.base_commit[:12]} "
            f"FAIL_TO_PASS={len(self.fail_to_pass)} PASS_TO_PASS={len(self.pass_to_pass)}>"
        )


@dataclass(frozen=True)
class Prediction:
    """One line of a predictions file the official harness accepts.

    Attributes:
        instance_id: the instance it answers.
        model_name_or_path: who made it (the harness files its logs under this name).
        model_patch: the agent's change, as a diff that applies at the base commit
            (empty when it changed nothing).
    """

    instance_id: str
    model_name_or_path: str
    model_patch: str

    def to_dict(self) -> dict[str, str]:
        return {
            "instance_id": self.instance_id,
            "model_name_or_path": self.model_name_or_path,
            "model_patch": self.model_patch,
        }


def _test_list(value: Any, label: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise TaskFormatError(
                f"{label}: {key} is a string but not JSON; give a list of test ids "
                f"or a JSON string of one ('[\"tests/test_a.py::test_x\"]')"
            ) from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise TaskFormatError(f"{label}: {key} must be a list of test ids (strings)")
    return tuple(value)


def load_instances(path: str | os.PathLike[str]) -> list[Instance]:
    """The instances of a ``.jsonl`` file (one a line) or a ``.json`` file (a list, or an
    object of instances by id, or one instance).

    Raises:
        TaskFormatError: the file is not JSON (the message gives the line), an instance
            lacks a key or has a bad value, or two share an id. Nothing is returned in
            part: a file with one bad instance is refused whole, so no task is silently
            left out of a run.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TaskFormatError(f"{path}: cannot read the instances ({e.strerror})") from None
    rows: list[tuple[str, Any]] = []
    if path.suffix == ".jsonl":
        skipped: list[SkippedLine] = []
        rows = [(f"{path}:{n}", obj) for n, obj in iter_jsonl(data, skipped=skipped)]
        if skipped:
            s = skipped[0]
            raise TaskFormatError(f"{path}:{s.lineno}: {s.reason}: {s.preview!r}")
    else:
        try:
            whole = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TaskFormatError(
                f"{path}: not JSON ({e}); give a .json list or a .jsonl file"
            ) from None
        if isinstance(whole, dict) and "instance_id" not in whole:
            whole = list(whole.values())
        items = whole if isinstance(whole, list) else [whole]
        rows = [(f"{path}[{i}]", obj) for i, obj in enumerate(items)]
    out = [Instance.from_dict(obj, where=where) for where, obj in rows]
    seen: set[str] = set()
    for inst in out:
        if inst.instance_id in seen:
            raise TaskFormatError(f"{path}: instance_id {inst.instance_id!r} appears twice")
        seen.add(inst.instance_id)
    if not out:
        raise TaskFormatError(f"{path}: no instances")
    return out


def load_predictions(path: str | os.PathLike[str]) -> list[Prediction]:
    """The predictions of a ``.jsonl`` file, as the official harness reads them (a null
    or missing ``model_patch`` is an empty one; ``model_name_or_path`` defaults to
    ``"None"``, as there).

    Raises:
        TaskFormatError: a line is not a JSON object, lacks ``instance_id``, or two lines
            answer the same instance.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TaskFormatError(f"{path}: cannot read the predictions ({e.strerror})") from None
    skipped: list[SkippedLine] = []
    out: list[Prediction] = []
    for n, row in iter_jsonl(data, skipped=skipped):
        name, patch = row.get("instance_id"), row.get("model_patch") or ""
        model = row.get("model_name_or_path", "None")
        if not isinstance(name, str) or not isinstance(patch, str) or not isinstance(model, str):
            raise TaskFormatError(
                f"{path}:{n}: a prediction needs instance_id, model_patch and "
                "model_name_or_path as strings"
            )
        out.append(Prediction(name, model, patch))
    if skipped:
        s = skipped[0]
        raise TaskFormatError(f"{path}:{s.lineno}: {s.reason}: {s.preview!r}")
    names = [p.instance_id for p in out]
    if len(set(names)) != len(names):
        raise TaskFormatError(f"{path}: an instance_id has two predictions")
    return out


def _write_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    # Written beside the target and renamed over it: a crash leaves the old file whole.
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def write_instances(instances: Iterable[Instance], path: str | os.PathLike[str]) -> Path:
    """Write instances as JSON lines (replacing ``path`` whole, atomically)."""
    return _write_jsonl(path, (i.to_dict() for i in instances))


def write_predictions(predictions: Iterable[Prediction], path: str | os.PathLike[str]) -> Path:
    """Write predictions as the official harness reads them (JSON lines, atomically).

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "preds.jsonl"
        >>> _ = write_predictions([Prediction("a-1", "ctxnb", "")], p)
        >>> p.read_text()
        '{"instance_id": "a-1", "model_name_or_path": "ctxnb", "model_patch": ""}\\n'
    """
    return _write_jsonl(path, (p.to_dict() for p in predictions))
