from inventory.models import Item, Movement, needs_reorder, stock_level


def test_stock_level_sums_movements():
    moves = [Movement("A", 10), Movement("A", -3), Movement("B", 7)]
    assert stock_level(moves, "A") == 7


def test_price_is_in_cents():
    assert Item("A", "a", 250).price(3) == 750


def test_needs_reorder_at_level():
    item = Item("A", "a", 100, reorder_level=5)
    assert needs_reorder(item, [Movement("A", 5)])
    assert not needs_reorder(item, [Movement("A", 6)])
