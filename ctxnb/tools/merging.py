"""Merge proposals: a stale edit merged with the change made since, for a human to approve.

An edit computed from a copy that is no longer the file's is refused with
``STALE_FILE``. Instead of re-reading and redoing it, the agent (or the user) can ask
for a proposal: a three-way merge (:mod:`ctxnb._util.merge3`, ``git merge-file --diff3``
semantics) of

* **base**: the version the edit was computed from, taken from the store by its SHA-256
  (a base the store does not hold is refused: ``MERGE_BASE_UNKNOWN``; nothing is
  guessed);
* **ours**: the edited text;
* **theirs**: the file now.

Clean merges need no model. Conflicts go to a review backend when one is given (a
:class:`MergeReviewer`, e.g. :class:`ctxnb.llm.review.LiteLLMMergeReviewer`): it is sent
only the conflicts with a few lines around each, redacted (:func:`review_request`), and
its answer is checked before anything is kept (:func:`check_resolutions`): one
resolution per conflict, for this file and exactly the conflict's lines, no conflict
marker, no redaction marker, no secret. An answer that breaks any of these is refused
whole (``MERGE_REVIEW_REFUSED``) and the conflicts stay unresolved. An unresolved
proposal shows the conflict markers and can never be written.

A proposal is written by ``apply_merge`` (a governed write: the human approves the diff
from the file now to the merged text first, in a governed workspace; the file must still
be the *theirs* of the proposal, else ``STALE_FILE`` and nothing is written), traced with
``mutation_class`` ``MERGE`` and ``merged_from`` (the three hashes).

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.txt").write_text("one\\ntwo\\nthree\\n")
    >>> ws = Workspace.open(root)
    >>> tools = ws.tools(ws.session("s"), caller="docs")
    >>> base = tools.read_file("a.txt").sha256
    >>> _ = (root / "a.txt").write_text("one\\ntwo\\nTHREE\\n")  # someone else's change
    >>> tools.write_file("a.txt", "ONE\\ntwo\\nthree\\n", expected_sha256=base).success
    Traceback (most recent call last):
    ...
    ctxnb.errors.StaleFileError: a.txt changed since it was read: ...
    >>> p = tools.propose_merge("a.txt", "ONE\\ntwo\\nthree\\n", base_sha256=base)
    >>> p.ready, p.conflicts
    (True, 0)
    >>> tools.apply_merge(p.id).success, (root / "a.txt").read_text()
    (True, 'ONE\\ntwo\\nTHREE\\n')
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._util.merge3 import Merge, merge3, split_lines
from ..errors import NotFoundError, PolicyError
from ..hashing import sha256_hex
from ..indexer import decode_bytes
from ..redaction.redactor import MARK as REDACTION_MARK
from ..redaction.redactor import redact, redact_text

if TYPE_CHECKING:
    from ._filesources import FileSources

__all__ = [
    "CONTEXT_LINES",
    "MergeProposal",
    "MergeReviewer",
    "build",
    "check_resolutions",
    "find_base",
    "review_request",
]

CONTEXT_LINES = 3
"""Lines shown to the reviewer above and below each conflict (as ``diff -U3``)."""

_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


class MergeReviewer(Protocol):
    """A review backend: given :func:`review_request`'s request (a JSON-able dict),
    returns its answer: ``{"resolutions": [{"path", "start_line", "end_line",
    "text"}, …]}`` (checked by :func:`check_resolutions`)."""

    name: str

    def review(self, request: dict[str, Any]) -> Any: ...


@dataclass
class MergeProposal:
    """A three-way merge of a stale edit, waiting for approval.

    Attributes:
        id: what ``apply_merge`` is given.
        path: the file.
        base_sha256: the version the edit was computed from.
        ours_sha256: the edit's text.
        theirs_sha256: the file when the proposal was made; ``apply_merge`` writes only
            onto this.
        conflicts: conflicts the three-way merge left (before any review).
        resolved_by: ``"merge"`` for a clean merge, the reviewer's name when it resolved
            the conflicts, None while unresolved.
        ready: whether it can be written (every conflict resolved).
        shown: the merged text as a person or agent is shown it (redacted; with conflict
            markers while unresolved).
        review_refused: why the reviewer's answer was refused, when it was.
    """

    id: str
    path: str
    base_sha256: str
    ours_sha256: str
    theirs_sha256: str
    conflicts: int
    resolved_by: str | None
    shown: str
    review_refused: str | None = None
    # The bytes behind it: never shown as they are (they may hold secrets).
    merged: str | None = field(default=None, repr=False)
    theirs: bytes = field(default=b"", repr=False)

    @property
    def ready(self) -> bool:
        return self.merged is not None

    @property
    def merged_from(self) -> dict[str, str]:
        """The three hashes, as the trace record keeps them."""
        return {
            "base_sha256": self.base_sha256,
            "ours_sha256": self.ours_sha256,
            "theirs_sha256": self.theirs_sha256,
        }

    def __str__(self) -> str:
        state = "ready" if self.ready else f"{self.conflicts} unresolved conflict(s)"
        return f"merge proposal {self.id} of {self.path}: {state}\n{self.shown}"

    def to_dict(self) -> dict[str, Any]:
        """The proposal as an agent receives it (redacted)."""
        out: dict[str, Any] = {
            "proposal_id": self.id,
            "path": self.path,
            "ready": self.ready,
            "conflicts": self.conflicts,
            "resolved_by": self.resolved_by,
            "merged_from": self.merged_from,
            "merged": self.shown,
        }
        if self.review_refused:
            out["review_refused"] = self.review_refused
        if self.ready:
            out["next"] = (
                f"apply_merge(proposal_id={self.id!r}) writes it once a human approves the diff"
            )
        else:
            out["next"] = (
                "The conflicts are unresolved and it cannot be written: read the file again "
                "and redo the edit, or ask the user."
            )
        return out


def find_base(files: FileSources, rel: str, sha: str) -> bytes:
    """The stored version of ``rel`` whose bytes hash to ``sha``, newest first.

    Raises:
        PolicyError: ``MERGE_BASE_UNKNOWN`` when the store holds no such version (or
            only its hash): a merge is never built on a guessed base.
    """
    from .restore import version_bytes

    oid = files.workspace.object_id(rel)
    for version in reversed(files.session.store.history(oid)):
        try:
            data = version_bytes(version.doc, rel)
        except PolicyError:
            continue  # binary: no bytes kept
        if data is not None and sha256_hex(data) == sha:
            return data
    raise PolicyError(
        "MERGE_BASE_UNKNOWN",
        f"the store holds no version of {rel} with sha256 {sha[:12]}…, the copy the edit "
        "was computed from; a merge cannot be built without it, and nothing was written",
        required_action="Read the file again and redo the edit on its current content.",
        details={"path": rel, "base_sha256": sha},
    )


def _marked_lines(m: Merge) -> tuple[list[str], list[tuple[int, int]]]:
    """The merged text's lines with conflict markers, and each conflict's 1-based line
    range (markers included) in them."""
    lines: list[str] = []
    spans = []
    for c in m.chunks:
        if not c.conflict:
            lines.extend(c.lines)
            continue
        start = len(lines) + 1
        lines.extend(split_lines(Merge([c]).text()))
        spans.append((start, len(lines)))
    return lines, spans


def review_request(path: str, m: Merge) -> dict[str, Any]:
    """What a review backend is sent: the path and, per conflict, its line range in the
    marked text, the base, ours and theirs lines, and :data:`CONTEXT_LINES` lines around
    it. All of it redacted (the whole marked text at once, so that a key block cut by a
    conflict's edge is still recognised); nothing else of the file is sent."""
    lines, spans = _marked_lines(m)
    shown = split_lines(redact_text("".join(lines)))
    if len(shown) != len(lines):  # redaction keeps line numbers; if not, send nothing
        shown = ["[REDACTED:unaligned]\n"] * len(lines)
    out = []
    for (start, end), c in zip(spans, m.conflicts(), strict=True):
        part = shown[start - 1 : end]
        # The marker lines split the conflict's sides (base, ours, theirs counts known).
        o, b, t = len(c.ours), len(c.base), len(c.theirs)
        out.append(
            {
                "start_line": start,
                "end_line": end,
                "before": "".join(shown[max(0, start - 1 - CONTEXT_LINES) : start - 1]),
                "ours": "".join(part[1 : 1 + o]),
                "base": "".join(part[2 + o : 2 + o + b]),
                "theirs": "".join(part[3 + o + b : 3 + o + b + t]),
                "after": "".join(shown[end : end + CONTEXT_LINES]),
            }
        )
    return {
        "path": redact_text(path),
        "instructions": (
            "Each conflict is an edit of the same lines by two authors: 'ours' is an "
            "agent's edit of 'base', 'theirs' is the change made to the file since. Give, "
            "for each conflict, the text that replaces its lines start_line..end_line (the "
            "markers included) so that both intents are kept. Change nothing else. Answer "
            'JSON only: {"resolutions": [{"path": ..., "start_line": ..., "end_line": ..., '
            '"text": ...}]}. Text shown as [REDACTED:...] is a secret you cannot see: if a '
            "conflict needs it, answer no resolution for it."
        ),
        "conflicts": out,
    }


def _refused(why: str) -> PolicyError:
    return PolicyError(
        "MERGE_REVIEW_REFUSED",
        f"the review backend's answer was refused: {why}; the conflicts stay unresolved",
        required_action="Resolve the conflicts by hand, or read the file again and redo the edit.",
    )


def check_resolutions(path: str, m: Merge, answer: Any) -> list[list[str]]:
    """The reviewer's resolutions, one list of lines per conflict, once checked.

    Raises:
        PolicyError: ``MERGE_REVIEW_REFUSED`` when the answer is not the expected JSON,
            names another file, a range that is not exactly a conflict's, resolves a
            conflict twice or leaves one out, or holds a conflict marker, a redaction
            marker (it would overwrite a secret with its placeholder) or a secret (the
            reviewer saw none, so one in its text is not the file's).
    """
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            raise _refused("it is not JSON") from None
    items = answer.get("resolutions") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise _refused("it has no 'resolutions' list")
    _, spans = _marked_lines(m)
    found: dict[int, list[str]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise _refused("a resolution is not an object")
        where = item.get("path")
        if where != path:
            raise _refused(f"a resolution names another file ({redact_text(str(where))!r})")
        rng = (item.get("start_line"), item.get("end_line"))
        if rng not in spans:
            raise _refused(
                f"lines {rng[0]}-{rng[1]} are not a conflict's (the conflicts are "
                + ", ".join(f"{a}-{b}" for a, b in spans)
                + "): a review may change the conflicts only"
            )
        k = spans.index(rng)  # type: ignore[arg-type]
        if k in found:
            raise _refused(f"lines {rng[0]}-{rng[1]} are resolved twice")
        text = item.get("text")
        if not isinstance(text, str):
            raise _refused(f"the resolution of lines {rng[0]}-{rng[1]} has no text")
        lines = split_lines(text)
        if any(line.startswith(_MARKERS) for line in lines):
            raise _refused("a resolution still holds conflict markers")
        if REDACTION_MARK in text:
            raise _refused(
                "a resolution holds a redaction marker: it would write the placeholder over "
                "a secret"
            )
        if redact(text).findings:
            raise _refused("a resolution holds a secret, which the reviewer was never shown")
        if lines and not lines[-1].endswith("\n") and not _last(m, k):
            lines[-1] += "\n"  # a line in the middle of the file ends
        found[k] = lines
    missing = [f"{a}-{b}" for i, (a, b) in enumerate(spans) if i not in found]
    if missing:
        raise _refused(f"lines {', '.join(missing)} have no resolution")
    return [found[i] for i in range(len(spans))]


def _last(m: Merge, k: int) -> bool:
    """Whether conflict ``k`` ends the file (its last line may lack a newline)."""
    conflicts = [i for i, c in enumerate(m.chunks) if c.conflict]
    return conflicts[k] == len(m.chunks) - 1


def build(
    files: FileSources,
    rel: str,
    ours: str,
    base_sha256: str,
    reviewer: MergeReviewer | None,
) -> MergeProposal:
    """The proposal for ``rel`` (see the module); called under the tool call."""
    try:
        current: bytes | None = files.policy.read_bytes(rel)
    except NotFoundError:
        current = None
    if current is None:
        raise PolicyError(
            "NOT_FOUND",
            f"{rel} does not exist any more: there is nothing to merge the edit into",
            required_action="Create the file with write_file(mode='create') if it is wanted.",
        )
    theirs_sha = sha256_hex(current)
    if theirs_sha == base_sha256:
        raise PolicyError(
            "NOT_STALE",
            f"{rel} has not changed since sha256 {base_sha256[:12]}…: there is nothing to merge",
            required_action="Write the edit with write_file and that expected_sha256.",
        )
    theirs = decode_bytes(current)
    base_bytes = find_base(files, rel, base_sha256)
    base = decode_bytes(base_bytes)
    if theirs is None or base is None:
        raise PolicyError("BINARY_FILE", f"{rel} is binary; only text is merged", recoverable=False)
    m = merge3(base, ours, theirs)
    proposal = MergeProposal(
        id=uuid.uuid4().hex[:12],
        path=rel,
        base_sha256=base_sha256,
        ours_sha256=sha256_hex(ours.encode("utf-8")),
        theirs_sha256=theirs_sha,
        conflicts=len(m.conflicts()),
        resolved_by=None,
        shown="",
        theirs=current,
    )
    resolved: Sequence[Sequence[str]] | None = [] if m.clean else None
    if not m.clean and reviewer is not None:
        try:
            resolved = check_resolutions(rel, m, reviewer.review(review_request(rel, m)))
            proposal.resolved_by = reviewer.name
        except PolicyError as e:
            proposal.review_refused = e.message
    if m.clean:
        proposal.resolved_by = "merge"
    if resolved is not None:
        proposal.merged = m.text(resolved)
        proposal.shown = redact_text(proposal.merged)
    else:
        proposal.shown = redact_text(m.text())
    return proposal
