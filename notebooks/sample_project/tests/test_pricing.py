import unittest

from shop.pricing import line_total


class LineTotalTests(unittest.TestCase):
    def test_small_quantities_pay_full_price(self) -> None:
        self.assertEqual(line_total(250, 4), 1000)

    def test_bulk_discount_starts_at_the_threshold(self) -> None:
        self.assertEqual(line_total(200, 10), 1900)

    def test_bulk_discount_above_the_threshold(self) -> None:
        self.assertEqual(line_total(200, 20), 3800)

    def test_negative_quantity_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            line_total(100, -1)
