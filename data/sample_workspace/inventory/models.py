"""Items and stock movements."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Item:
    """A thing we keep in stock."""

    sku: str
    name: str
    unit_price_cents: int
    reorder_level: int = 5

    def price(self, quantity: int) -> int:
        """Price of `quantity` units, in cents."""
        return self.unit_price_cents * quantity


@dataclass(frozen=True)
class Movement:
    """Units in (positive) or out (negative) of stock."""

    sku: str
    quantity: int
    at: datetime = field(default_factory=datetime.now)
    note: str = ""


def stock_level(movements: list[Movement], sku: str) -> int:
    """Units of `sku` in stock after all movements."""
    return sum(m.quantity for m in movements if m.sku == sku)


def needs_reorder(item: Item, movements: list[Movement]) -> bool:
    """True when the stock of `item` is at or below its reorder level."""
    return stock_level(movements, item.sku) <= item.reorder_level
