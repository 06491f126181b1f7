"""A cart of products, each with a unit price and a quantity."""

from shop.pricing import line_total


class Cart:
    def __init__(self) -> None:
        self._lines: dict[str, tuple[int, int]] = {}

    def add(self, product: str, unit_cents: int, quantity: int = 1) -> None:
        """Adding a product again adds to its quantity (at the latest price)."""
        _, held = self._lines.get(product, (unit_cents, 0))
        self._lines[product] = (unit_cents, held + quantity)

    def total(self) -> int:
        return sum(line_total(price, qty) for price, qty in self._lines.values())
