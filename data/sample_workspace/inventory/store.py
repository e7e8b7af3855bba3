"""A SQLite-backed repository of items and movements."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .models import Item, Movement

SCHEMA = Path(__file__).resolve().parent.parent / "db" / "schema.sql"


class Store:
    """Items and movements in one SQLite database."""

    def __init__(self, path: str = ":memory:") -> None:
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA.read_text())

    def add_item(self, item: Item) -> None:
        self.db.execute(
            "INSERT INTO items (sku, name, unit_price_cents, reorder_level) VALUES (?, ?, ?, ?)",
            (item.sku, item.name, item.unit_price_cents, item.reorder_level),
        )

    def record(self, movement: Movement) -> None:
        self.db.execute(
            "INSERT INTO movements (sku, quantity, at, note) VALUES (?, ?, ?, ?)",
            (movement.sku, movement.quantity, movement.at.isoformat(), movement.note),
        )

    def items(self) -> list[Item]:
        rows = self.db.execute(
            "SELECT sku, name, unit_price_cents, reorder_level FROM items ORDER BY sku"
        )
        return [Item(*row) for row in rows]

    def movements(self) -> list[Movement]:
        rows = self.db.execute("SELECT sku, quantity, note FROM movements ORDER BY id")
        return [Movement(sku=s, quantity=q, note=n) for s, q, n in rows]
