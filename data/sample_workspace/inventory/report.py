"""The stock report: one line per item."""

from __future__ import annotations

from .models import Item, Movement, needs_reorder, stock_level
from .store import Store


def report_lines(items: list[Item], movements: list[Movement]) -> list[str]:
    """One line per item: sku, name, stock, value and a reorder flag."""
    lines = []
    for item in items:
        qty = stock_level(movements, item.sku)
        value = item.price(qty) / 100
        flag = "  REORDER" if needs_reorder(item, movements) else ""
        lines.append(f"{item.sku:<8} {item.name:<20} {qty:>5} {value:>10.2f}{flag}")
    return lines


def main() -> None:
    store = Store()
    store.add_item(Item("BOLT-M6", "M6 bolt", 12))
    store.add_item(Item("NUT-M6", "M6 nut", 5, reorder_level=50))
    store.record(Movement("BOLT-M6", 200, note="delivery"))
    store.record(Movement("NUT-M6", 40, note="delivery"))
    store.record(Movement("BOLT-M6", -30, note="order 1001"))
    print("\n".join(report_lines(store.items(), store.movements())))


if __name__ == "__main__":
    main()
