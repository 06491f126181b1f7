import unittest

from shop.cart import Cart


class CartTests(unittest.TestCase):
    def test_empty_cart_costs_nothing(self) -> None:
        self.assertEqual(Cart().total(), 0)

    def test_adding_twice_reaches_the_bulk_discount(self) -> None:
        cart = Cart()
        cart.add("coffee", 300, 6)
        cart.add("coffee", 300, 4)
        self.assertEqual(cart.total(), 2850)
