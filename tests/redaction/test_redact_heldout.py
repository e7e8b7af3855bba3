"""Redaction on shapes no rule was written for: the held-out spec of #43.

``tests/_heldout_shapes.py`` is never used to tune the rules (they are written against
``test_redact_formats.py``); this file only measures them on it, against the targets of
#43: at least 95% of its secrets gone, at most one false redaction per 40 look-alikes.
Single misses are not asserted one by one: that would turn the held-out set into a
tuning set.
"""

from __future__ import annotations

from _heldout_shapes import heldout_shapes

from ctxnb.redaction import redact

SECRETS, LOOKALIKES = heldout_shapes()


def test_the_held_out_spec_is_big_enough_to_measure() -> None:
    # A 95% target means something only over enough secrets and look-alikes.
    assert sum(len(c.secrets) for c in SECRETS) >= 60
    assert len(LOOKALIKES) >= 40
    assert len({c.kind for c in SECRETS}) == len(SECRETS)


def test_recall_on_held_out_shapes_is_at_least_95_percent() -> None:
    total = sum(len(c.secrets) for c in SECRETS)
    missed = [c.kind for c in SECRETS for s in c.secrets if s in redact(c.text).text]
    assert (total - len(missed)) / total >= 0.95, missed


def test_at_most_one_false_redaction_per_40_held_out_look_alikes() -> None:
    false = [c.kind for c in LOOKALIKES if redact(c.text).text != c.text]
    assert len(false) * 40 <= len(LOOKALIKES), false
