"""The neutral trajectory format: one agent run, step by step, in any agent's terms.

A :class:`Trajectory` is what ctxnb replays. Converters turn each agent's own log format
into it (see :mod:`ctxnb.replay.converters`); it is stored as JSONL so that a long run
streams and diffs well:

- line 1, the header record::

      {"format": "ctxnb-trajectory", "version": 1, "id": ..., "source_format": ...,
       "source_path": ..., "task": ..., "system_prompt": ..., "metadata": {...},
       "step_count": N}

- then one line per :class:`Step`, in order (``Step.model_dump(mode="json")``).

``step_count`` lets :meth:`Trajectory.from_jsonl` tell a complete file from a truncated
one; ``system_prompt`` is kept in the header because a replay renders it first.

Vocabulary of ``Action.tool`` (converters map each agent's tool names onto it):

====================  =============================================================
``bash``              a shell command (``args["command"]``)
``read``              a file read by a dedicated tool (Claude Code ``Read``)
``edit``              an in-place edit (``Edit``, ``MultiEdit``, SWE-agent ``edit``/``insert``)
``write``             a whole-file write (``Write``)
``create``            SWE-agent ``create``
``search``            a content search (``Grep``, ``search_file``, ``search_dir``)
``glob``              a file-name search (``Glob``, ``find_file``)
``open``              SWE-agent ``open``: show a window of a file
``scroll``            SWE-agent ``goto``/``scroll_up``/``scroll_down``/``set_cursors``
``submit``            the agent handed in its work
``reply``             an assistant message with no tool call (text only)
``user``              a user message in the middle of a session
``compact``           a context compaction boundary (``Step.compaction`` is true)
``unknown``           the converter could not tell (the step is unparsed)
====================  =============================================================

Any other tool keeps the agent's own name (Claude Code ``WebSearch``, ``Task``, ...).

Example:
    >>> t = Trajectory(id="demo", source_format="ctxnb", steps=[
    ...     Step(index=0, action=Action(tool="read", args={"path": "a.py"}),
    ...          files=[FileTouch(path="a.py", op="read", content="x = 1\\n")]),
    ... ])
    >>> t.stats()["reads"]
    1
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    computed_field,
    model_validator,
)

from .._util.jsonl import SkippedLine, iter_jsonl
from ..errors import CtxnbError

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Action",
    "FileOp",
    "FileTouch",
    "Step",
    "Trajectory",
    "TrajectoryFormatError",
    "Usage",
]

FORMAT_NAME = "ctxnb-trajectory"
FORMAT_VERSION = 1

FileOp = Literal["read", "write", "edit", "create", "delete"]


class TrajectoryFormatError(CtxnbError, ValueError):
    """A trajectory file is damaged, truncated or in a format ctxnb does not know.

    Attributes:
        path: the offending file, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class _Model(BaseModel):
    # Unknown keys are an error so that a typo in a hand-written trajectory is caught.
    model_config = ConfigDict(extra="forbid")


class Usage(_Model):
    """Token counts the provider reported for the model call behind a step.

    ``prompt_tokens`` is everything the model read for that call; for Anthropic usage
    that is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``,
    because cached tokens are still in the context window.

    Attributes:
        cached_tokens: of the prompt, tokens read from the provider's cache.
        cache_write_tokens: of the prompt, tokens written to the cache for 5 minutes
            (Anthropic bills them at 1.25x input).
        cache_write_1h_tokens: written for an hour (Anthropic: 2x input).
        cost_usd: what the provider (or the router, e.g. OpenRouter) said the call
            cost, when it said.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    cost_usd: float | None = None


class Action(_Model):
    """What the agent asked for in one step.

    Attributes:
        tool: the tool, in the vocabulary of :mod:`ctxnb.replay.model`.
        args: the tool's arguments (for ``bash``, ``{"command": ...}``).
        raw: the action exactly as the agent wrote it.
    """

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    raw: str = ""


class FileTouch(_Model):
    """One file the step read or changed.

    Attributes:
        path: the path as the agent used it (joined with a preceding ``cd`` when
            there was one).
        op: ``read``, ``write``, ``edit``, ``create`` or ``delete``.
        start_line: first line of the range read or replaced (1-based), when known.
        end_line: last line of that range (inclusive), when known.
        content: for a read, the text the observation shows for the range (line-number
            prefixes removed); for a write or create, the whole content written; for an
            edit, the whole file after the edit when the converter could compute it.
            ``None`` when unknown (for example a truncated observation).
        old_text: for an edit, the text replaced, when known.
        new_text: for an edit, the replacement text, when known.
    """

    path: str
    op: FileOp
    start_line: int | None = None
    end_line: int | None = None
    content: str | None = None
    old_text: str | None = None
    new_text: str | None = None


class Step(_Model):
    """One step of a run: the agent's thought and action, and what came back.

    Attributes:
        index: position in :attr:`Trajectory.steps`, from 0.
        thought: the agent's reasoning text before the action, if any.
        action: the action.
        observation: what the environment returned (wrappers such as mini-swe-agent's
            ``<returncode>``/``<output>`` removed), or ``None`` when nothing came back.
        files: files read or changed, in the order the action touched them.
        usage: token counts of the model call behind the step, when reported.
        parsed: false when the converter could not interpret the step; ``note`` says why.
        note: a short remark from the converter (why unparsed, a rejected edit, ...).
        compaction: true for a context compaction boundary.
    """

    index: int
    thought: str | None = None
    action: Action
    observation: str | None = None
    files: list[FileTouch] = Field(default_factory=list)
    usage: Usage | None = None
    parsed: bool = True
    note: str | None = None
    compaction: bool = False


class Trajectory(_Model):
    """A whole agent run in the neutral format.

    Example:
        >>> import tempfile, pathlib
        >>> t = Trajectory(id="run-1", source_format="mini-swe-agent-1", task="Fix it",
        ...                steps=[Step(index=0, action=Action(tool="submit"))])
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "run-1.jsonl"
        >>> t.to_jsonl(p)
        >>> Trajectory.from_jsonl(p) == t
        True
    """

    id: str
    source_format: str
    source_path: str | None = None
    task: str | None = None
    system_prompt: str | None = None
    steps: list[Step] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        # model_dump() includes the derived count; accept it back so dumps round-trip.
        if isinstance(data, dict) and "unparsed_count" in data:
            data = {k: v for k, v in data.items() if k != "unparsed_count"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unparsed_count(self) -> int:
        """How many steps the converter could not interpret."""
        return sum(1 for s in self.steps if not s.parsed)

    def __repr__(self) -> str:
        # Cheap on purpose: a notebook shows this for runs with thousands of steps.
        return (
            f"Trajectory(id={self.id!r}, source_format={self.source_format!r}, "
            f"steps={len(self.steps)}, unparsed={self.unparsed_count})"
        )

    def stats(self) -> dict[str, int]:
        """Counts over the run.

        Returns:
            ``steps``, ``reads``, ``edits``, ``writes`` (whole-file writes and creates),
            ``deletes`` (file touches of each kind), ``unparsed`` (steps),
            ``with_usage`` (steps with token counts) and ``compactions``.

        Example:
            >>> Trajectory(id="x", source_format="ctxnb").stats()["steps"]
            0
        """
        ops = [f.op for s in self.steps for f in s.files]
        return {
            "steps": len(self.steps),
            "reads": ops.count("read"),
            "edits": ops.count("edit"),
            "writes": ops.count("write") + ops.count("create"),
            "deletes": ops.count("delete"),
            "unparsed": self.unparsed_count,
            "with_usage": sum(1 for s in self.steps if s.usage is not None),
            "compactions": sum(1 for s in self.steps if s.compaction),
        }

    def header(self) -> dict[str, Any]:
        """The header record of the JSONL form."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "id": self.id,
            "source_format": self.source_format,
            "source_path": self.source_path,
            "task": self.task,
            "system_prompt": self.system_prompt,
            "metadata": self.metadata,
            "step_count": len(self.steps),
        }

    def to_jsonl(self, path: str | Path) -> None:
        """Write the trajectory as ctxnb-trajectory JSONL (header line, then steps).

        Args:
            path: the file to write; its parent directory must exist.

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
            >>> Trajectory(id="t", source_format="ctxnb").to_jsonl(p)
            >>> p.read_text().startswith('{"format": "ctxnb-trajectory"')
            True
        """
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        # Written aside and renamed so that a crash never leaves a half file behind.
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.header(), ensure_ascii=False) + "\n")
            for step in self.steps:
                fh.write(json.dumps(step.model_dump(mode="json"), ensure_ascii=False) + "\n")
        tmp.replace(path)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Trajectory:
        """Read a file written by :meth:`to_jsonl`.

        Raises:
            TrajectoryFormatError: the file is not ctxnb-trajectory JSONL, has a newer
                version, a damaged line, or fewer steps than its header announces.

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
            >>> Trajectory(id="t", source_format="ctxnb").to_jsonl(p)
            >>> Trajectory.from_jsonl(p).id
            't'
        """
        path = Path(path)
        with path.open("rb") as fh:
            return cls._from_lines(fh, str(path))

    @classmethod
    def _from_lines(cls, lines: Any, where: str) -> Trajectory:
        header: dict[str, Any] | None = None
        steps: list[Step] = []
        bad: list[SkippedLine] = []
        for lineno, rec in _strict(iter_jsonl(lines, skipped=bad, objects=False), bad, where):
            if header is None:
                header = cls._check_header(rec, where)
                continue
            try:
                steps.append(Step.model_validate(rec))
            except ValidationError as exc:
                raise TrajectoryFormatError(
                    f"{where}: line {lineno} is not a valid step: {exc.errors()[0]['msg']} "
                    f"at {'.'.join(str(p) for p in exc.errors()[0]['loc'])}.",
                    path=where,
                ) from None
        if header is None:
            raise TrajectoryFormatError(f"{where}: the file is empty.", path=where)
        expected = header.get("step_count")
        if isinstance(expected, int) and expected != len(steps):
            raise TrajectoryFormatError(
                f"{where}: the header announces {expected} steps but the file holds "
                f"{len(steps)}; it is truncated.",
                path=where,
            )
        try:
            return cls(
                id=header["id"],
                source_format=header["source_format"],
                source_path=header.get("source_path"),
                task=header.get("task"),
                system_prompt=header.get("system_prompt"),
                metadata=header.get("metadata") or {},
                steps=steps,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            raise TrajectoryFormatError(
                f"{where}: the header record's {'.'.join(str(p) for p in first['loc'])!r} "
                f"is not valid: {first['msg']}.",
                path=where,
            ) from None

    @staticmethod
    def _check_header(rec: Any, where: str) -> dict[str, Any]:
        if not isinstance(rec, dict) or rec.get("format") != FORMAT_NAME:
            raise TrajectoryFormatError(
                f"{where}: the first line is not a {FORMAT_NAME} header record "
                f'({{"format": "{FORMAT_NAME}", "version": {FORMAT_VERSION}, ...}}).',
                path=where,
            )
        version = rec.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise TrajectoryFormatError(
                f"{where}: {FORMAT_NAME} version {version!r} is not supported; this ctxnb "
                f"reads version {FORMAT_VERSION}. Upgrade ctxnb to read it.",
                path=where,
            )
        for key in ("id", "source_format"):
            if not isinstance(rec.get(key), str):
                raise TrajectoryFormatError(
                    f"{where}: the header record has no string {key!r}.", path=where
                )
        return rec


def _strict(
    records: Iterator[tuple[int, Any]], skipped: list[SkippedLine], where: str
) -> Iterator[tuple[int, Any]]:
    """The records, but a damaged line ends the read with an error that names it."""
    for item in records:
        _raise_skipped(skipped, where)
        yield item
    _raise_skipped(skipped, where)


def _raise_skipped(skipped: list[SkippedLine], where: str) -> None:
    if skipped:
        s = skipped[0]
        raise TrajectoryFormatError(
            f"{where}: line {s.lineno} cannot be read ({s.reason}); the file is damaged or "
            "truncated. Re-create it with Trajectory.to_jsonl().",
            path=where,
        )


def json_obj(data: Any, key: str) -> dict[str, Any]:
    """``data[key]`` when it is a JSON object, else an empty one (recorded runs vary).

    Example:
        >>> json_obj({"info": {"a": 1}}, "info"), json_obj({"info": None}, "info")
        ({'a': 1}, {})
    """
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}
