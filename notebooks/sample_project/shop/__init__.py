"""A tiny shopping cart: prices in whole cents, a bulk discount, a cart total."""

from shop.cart import Cart
from shop.pricing import BULK_PERCENT, BULK_THRESHOLD, line_total

__all__ = ["BULK_PERCENT", "BULK_THRESHOLD", "Cart", "line_total"]
