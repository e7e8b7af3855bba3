"""Moved: a command's effects are committed by :mod:`ctxnb.sandbox.commit`.

Kept so that ``from ctxnb.govern.effects import CommandEffects`` goes on working.
"""

from __future__ import annotations

from ..sandbox.commit import CommandEffects, EffectsReport, GoverningEngine

__all__ = ["CommandEffects", "EffectsReport", "GoverningEngine"]
