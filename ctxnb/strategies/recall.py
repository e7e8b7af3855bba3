"""Masking paired with recall: an elided output says how to get it back.

Masking strategies (:class:`~ctxnb.strategies.ObservationMasking`,
:class:`~ctxnb.strategies.BlockMasking`) shorten the prompt by showing old tool outputs
as ``[output elided]``; an agent that needs one again has to run its command again (a
re-read, which costs a step and the whole output once more, and may not give the same
answer: the file changed since). :class:`WithRecall` wraps a masking strategy and shows
each elided output as a placeholder that names a handle instead::

    [output elided; `recall 3fa2c91b` shows it again, `recall --search WORDS` searches every output]

The agent's ``recall`` command (:mod:`ctxnb.tools.recall`) answers from the session's
store: the output exactly as it was recorded (redacted, as everything the model reads),
or the lines of the session's outputs that match a query. The handle is derived from the
item's id, so a placeholder never changes between steps and the prompt's prefix stays
cacheable.

Example:
    >>> from ctxnb.strategies import ObservationMasking
    >>> from ctxnb.strategies.builtin import Item, StrategyInput
    >>> inp = StrategyInput(items=tuple(Item(f"t{n}", "toolcall", seq=n) for n in range(3)),
    ...                     budget=None, turn=3)
    >>> sel = WithRecall(ObservationMasking(1)).select(inp)
    >>> sel.masked, sorted(sel.replace)
    ([], ['t0', 't1'])
    >>> sel.replace["t0"] == recall_placeholder("t0")
    True
"""

from __future__ import annotations

from ..hashing import sha256_hex
from .builtin import ContextStrategy, Selection, StrategyInput

__all__ = ["RECALL_COMMAND", "WithRecall", "recall_handle", "recall_placeholder"]

#: The command an agent runs to get an elided output back (see :mod:`ctxnb.tools.recall`).
RECALL_COMMAND = "recall"


def recall_handle(oid: str) -> str:
    """The short handle of an item: 8 hex characters of its id's hash.

    A hash rather than the id's first characters: ids a replay makes share prefixes.

    Example:
        >>> recall_handle("0b6f0e0c-1f7a-4c7e-9d55-8a3e2f1d9c44")
        'e7b41aa6'
    """
    return sha256_hex(oid)[:8]


def recall_placeholder(oid: str) -> str:
    """What the model reads in place of an elided output: how to get it back."""
    return (
        f"[output elided; `{RECALL_COMMAND} {recall_handle(oid)}` shows it again, "
        f"`{RECALL_COMMAND} --search WORDS` searches every output]"
    )


class WithRecall:
    """A masking strategy whose elided outputs name the handle that recalls them.

    What is shown and what is left out are the wrapped strategy's decisions; only the
    placeholders change (they are the selection's ``replace`` texts, so ``context_at``
    shows them again). Pair it with the ``recall`` command of a live run.

    Args:
        masking: the strategy whose masked items get a recall placeholder.
    """

    #: A live run answers the agent's ``recall`` command under this strategy.
    recall = True

    def __init__(self, masking: ContextStrategy) -> None:
        self._masking = masking
        self.name = f"{masking.name}-recall"
        # Recorded with the strategy's settings (strategy_spec keeps plain values only).
        self.masking = repr(masking)

    def select(self, inp: StrategyInput) -> Selection:
        sel = self._masking.select(inp)
        for oid in sel.masked:
            sel.replace[oid] = recall_placeholder(oid)
        sel.masked = []
        return sel

    def __repr__(self) -> str:
        return f"WithRecall({self._masking!r})"
