import unittest

from inventory.models import Item, Movement, needs_reorder, stock_level


class ModelsTest(unittest.TestCase):
    def test_stock_level_sums_movements(self):
        moves = [Movement("A", 10), Movement("A", -3), Movement("B", 7)]
        self.assertEqual(stock_level(moves, "A"), 7)

    def test_price_is_in_cents(self):
        self.assertEqual(Item("A", "a", 250).price(3), 750)

    def test_needs_reorder_at_level(self):
        item = Item("A", "a", 100, reorder_level=5)
        self.assertTrue(needs_reorder(item, [Movement("A", 5)]))
        self.assertFalse(needs_reorder(item, [Movement("A", 6)]))
