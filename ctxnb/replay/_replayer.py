"""The replayer: a recorded run fed step by step into a fresh ctxnb session.

:class:`_Replayer` turns each :class:`~ctxnb.replay.model.Step` into ctxnb objects (chat
turns, tool calls, the best-known content of each file, as :mod:`ctxnb.replay.runner`
describes) and counts, for a context, the re-reads and stale reads it causes;
``_StepMemo`` counts tokens once per step. :func:`ctxnb.replay.runner.replay` and
:func:`~ctxnb.replay.runner.replay_contexts` drive it.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..context import Context, ContextChange
from ..indexer import build_file_doc
from ..llm.tokens import HeuristicTokenCounter, TokenCounter
from ..model import FilesystemSource
from .compaction import compacted
from .model import FileTouch, Step, Trajectory

if TYPE_CHECKING:
    from ..session.core import Session


FileMode = Literal["active", "pool"]
OnCompaction = Callable[[Step, list[ContextChange]], None]
HiddenPrompt = int | Literal["auto"] | None

# A fixed namespace so that tool call ids, and so context hashes, are the same in every
# run and every process.
_ID_NAMESPACE = uuid.UUID("6f1f0c0e-3a57-5c2b-9a41-7c7e0b7d2f10")


class _StepMemo:
    """A token counter that remembers counts within one step and counts the chat
    incrementally.

    Each assembly counts the chat and system sections again; at one step they are the
    same text for every strategy, so each is counted once. The chat only grows, so with
    the heuristic counter the text already counted at the previous step is not counted
    again: its features end at a line break, where the heuristic is additive, so the
    result equals a direct count (up to float rounding in the last bit).
    """

    _INCREMENTAL_MIN = 4096

    def __init__(self, base: TokenCounter) -> None:
        self.base = base
        self.name = base.name
        self._memo: dict[str, int] = {}
        self._heuristic = base if type(base) is HeuristicTokenCounter else None
        self._prefix: tuple[str, float] | None = None

    def count(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            if self._heuristic is not None and len(text) >= self._INCREMENTAL_MIN:
                n = self._count_incremental(text, self._heuristic)
            else:
                n = self.base.count(text)
            self._memo[text] = n
        return n

    def _count_incremental(self, text: str, counter: HeuristicTokenCounter) -> int:
        p = self._prefix
        if p is not None and text.startswith(p[0]):
            raw = p[1] + counter.raw(text[len(p[0]) :])
        else:
            raw = counter.raw(text)
        if text.endswith("\n"):
            self._prefix = (text, raw)
        return counter.from_raw(raw)

    def new_step(self) -> None:
        self._memo.clear()


@dataclass
class _Known:
    """The best-known content of one file."""

    full: str | None = None
    lines: dict[int, str] = field(default_factory=dict)
    note: str | None = None
    deleted: bool = False

    def render(self) -> str:
        if self.full is not None:
            return self.full
        if not self.lines:
            return self.note or ""
        out: list[str] = []
        prev = 0
        for n in sorted(self.lines):
            if n > prev + 1:
                out.append(f"[… lines {prev + 1}-{n - 1} not seen …]\n")
            line = self.lines[n]
            out.append(line if line.endswith("\n") else line + "\n")
            prev = n
        return "".join(out)

    def read(self, touch: FileTouch) -> bool:
        """Take in what a read showed; False when it showed nothing usable."""
        if touch.content is None:
            return False
        self.deleted = False
        if touch.start_line is None:
            self.full, self.lines, self.note = touch.content, {}, None
            return True
        new = touch.content.splitlines(keepends=True)
        start = touch.start_line
        if self.full is not None:
            # Splice the range in: the observation is the truth about those lines, even
            # when the file changed in a way the replay could not follow.
            old = self.full.splitlines(keepends=True)
            end = start - 1 + len(new)
            if len(old) < start - 1:
                old += ["\n"] * (start - 1 - len(old))
            if new and not new[-1].endswith("\n") and end < len(old):
                new[-1] += "\n"
            self.full = "".join(old[: start - 1] + new + old[end:])
        else:
            self.note = None
            for k, line in enumerate(new):
                self.lines[start + k] = line
        return True

    def write(self, touch: FileTouch, step: int) -> None:
        self.deleted = False
        if touch.content is not None:
            self.full, self.lines, self.note = touch.content, {}, None
            return
        if (
            touch.op == "edit"
            and self.full is not None
            and touch.old_text
            and touch.new_text is not None
            and touch.old_text in self.full
        ):
            self.full = self.full.replace(touch.old_text, touch.new_text, 1)
            return
        self.full, self.lines = None, {}
        self.note = (
            f"[{touch.path} was changed at step {step}; its new content has not been seen]\n"
        )


class _Replayer:
    """One trajectory fed into one session; assembles under any strategy at any point."""

    def __init__(
        self,
        traj: Trajectory,
        counter: TokenCounter,
        root: str,
        files: FileMode = "pool",
        on_compaction: OnCompaction | None = None,
    ) -> None:
        from ..store.objectstore import ObjectStore
        from ..workspace import Workspace

        self.traj = traj
        self.on_compaction = on_compaction
        self.files_active = files == "active"
        self.fs_id = f"replay:{traj.id}"
        self.memo = _StepMemo(counter)
        self.store = ObjectStore(Path(root) / "store")
        self.workspace = Workspace.open(root, store=self.store)
        self.segment = 0
        self.session: Session = self._new_session(traj.task)
        self.known: dict[str, _Known] = {}
        self.file_ids: dict[str, str] = {}
        self.written: dict[str, str | None] = {}  # oid -> last source hash written
        self.version: dict[str, int] = {}  # path -> changes by the agent so far
        self.seen: set[str] = set()
        self.admitted: set[str] = set()  # file ids in the session
        self.refs_by_path: dict[str, list[str]] = {}
        self.shown: dict[str, dict[str, int]] = {}  # read toolcall -> {path: version}

    def close(self) -> None:
        self.store.close()

    def _new_session(self, first_turn: str | None) -> Session:
        s = self.workspace.session(
            f"replay-{self.segment}" if self.segment else "replay",
            system_prompt=self.traj.system_prompt or "",
            token_counter=self.memo,
            # A replay rebuilds what the recorded agent saw: rules it did not have stay out.
            rules=False,
        )
        if first_turn:
            s.add_turn("user", first_turn)
        return s

    def compact(self, summary: str | None) -> None:
        """Start the context again from a compaction's summary, as the agent did.

        The files stay in the store (their versions and what the run has seen), but
        the new context holds nothing of the old one but the summary: items come back
        only when the agent touches them again.
        """
        self.segment += 1
        self.session = self._new_session(summary)
        self.admitted.clear()
        self.refs_by_path.clear()
        self.shown.clear()

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, step: Step) -> None:
        if step.compaction:
            if self.on_compaction is not None:
                self.on_compaction(step, compacted(self.session, step))
            self.compact(step.observation)
            return
        s = self.session
        tool = step.action.tool
        text = _turn_text(step)
        if tool == "user":
            if text:
                s.add_turn("user", text)
        elif text:
            s.add_turn("assistant", text)
        docs: list[dict[str, Any]] = []
        touched: list[str] = []
        shown: dict[str, int] = {}
        for touch in step.files:
            path = _norm(touch.path)
            known = self.known.setdefault(path, _Known())
            if touch.op == "read":
                self.seen.add(path)
                shown[path] = self.version.get(path, 0)
                if not known.read(touch):
                    if path not in touched:
                        touched.append(path)
                    continue
            else:
                self.version[path] = self.version.get(path, 0) + 1
                self.seen.add(path)
                if touch.op == "delete":
                    known.deleted, known.full, known.lines, known.note = True, None, {}, None
                else:
                    known.write(touch, step.index)
            doc = self._file_doc(path, known)
            if doc is not None:
                docs = [d for d in docs if d["xt/id"] != doc["xt/id"]] + [doc]
            if path not in touched:
                touched.append(path)
        if docs:
            self.store.put(docs)
        for d in docs:
            oid = d["xt/id"]
            if d["type"] == "file":
                if oid in self.admitted:
                    s.refresh(oid)
                    if self.files_active:
                        s.activate(oid)
                else:
                    s.add(oid, activate=self.files_active)
                    self.admitted.add(oid)
        for path in touched:
            oid = self._file_id(path)
            if oid in self.admitted:
                s.touch(oid)
        if tool not in ("reply", "user", "compact"):
            # The id comes from the run and the step: equal inputs give equal contexts.
            tid = s.record_toolcall(
                step.action.tool,
                dict(step.action.args),
                step.observation or "",
                status="ok" if step.parsed else "fail",
                file_refs=[self._file_id(p) for p in touched],
                id=toolcall_id(self.traj.id, step.index),
            )
            for path in touched:
                self.refs_by_path.setdefault(path, []).append(tid)
            if shown:
                self.shown[tid] = shown

    def _file_id(self, path: str) -> str:
        oid = self.file_ids.get(path)
        if oid is None:
            doc = build_file_doc(self._source(path), b"")
            oid = self.file_ids[path] = doc["xt/id"]
        return oid

    def _source(self, path: str) -> FilesystemSource:
        return FilesystemSource(filesystem_id=self.fs_id, path=path)

    def _file_doc(self, path: str, known: _Known) -> dict[str, Any] | None:
        src = self._source(path)
        if known.deleted:
            doc = build_file_doc(src, None)
        else:
            doc = build_file_doc(src, known.render().encode("utf-8", "surrogatepass"))
        oid = doc["xt/id"]
        self.file_ids[path] = oid
        if oid in self.written and self.written[oid] == doc.get("source_hash"):
            return None  # unchanged: no new version
        self.written[oid] = doc.get("source_hash")
        return doc

    # -- measuring -------------------------------------------------------------------------
    def losses(self, ctx: Context, step: Step) -> tuple[int, int]:
        """(re_reads, stale_reads) of ``step`` chosen in context ``ctx``."""
        # A truncated item is not there in full: its file may need reading again, and
        # what it shows of an old version is not counted as a stale read.
        full = {it.id for it in ctx.items if not it.masked and not it.truncated}
        re_reads = 0
        counted: set[str] = set()
        for touch in step.files:
            path = _norm(touch.path)
            if touch.op != "read" or path in counted or path not in self.seen:
                continue
            counted.add(path)
            fid = self.file_ids.get(path)
            if fid in full and not self.known[path].deleted:
                continue
            if any(t in full for t in self.refs_by_path.get(path, ())):
                continue
            re_reads += 1
        stale = sum(
            1
            for tid, shown in self.shown.items()
            if tid in full and any(self.version.get(p, 0) > v for p, v in shown.items())
        )
        return re_reads, stale


def toolcall_id(run_id: str, index: int) -> str:
    """The id of the tool call a replay records for step ``index`` of run ``run_id``.

    Derived from the run and the step, so equal inputs give equal contexts, and a view of
    the replay can name the step behind an item (an unparsed step's call has no args).
    """
    return str(uuid.uuid5(_ID_NAMESPACE, f"{run_id}\x00{index}"))


def _fast_tmp() -> str | None:
    # A replay's store is scratch: on a RAM-backed directory its commits cost no disk
    # flushes. Fall back to the ordinary temp directory elsewhere.
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _turn_text(step: Step) -> str:
    raw = step.action.raw or ""
    thought = step.thought or ""
    if not raw and step.action.tool not in ("reply", "user", "compact"):
        raw = f"{step.action.tool}({', '.join(f'{k}={v}' for k, v in step.action.args.items())})"
    if thought and thought in raw:
        return raw
    return "\n\n".join(x for x in (thought, raw) if x)
