"""Prices of cart lines. Money is kept in whole cents so totals never drift."""

BULK_THRESHOLD = 10  # buying this many of one product or more earns the bulk discount
BULK_PERCENT = 5


def line_total(unit_cents: int, quantity: int) -> int:
    """Price of `quantity` items: 10 or more of one product get 5% off."""
    if unit_cents < 0 or quantity < 0:
        raise ValueError("prices and quantities cannot be negative")
    total = unit_cents * quantity
    if quantity > BULK_THRESHOLD:
        total -= total * BULK_PERCENT // 100
    return total
