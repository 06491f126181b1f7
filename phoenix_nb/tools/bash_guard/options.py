"""GNU long-option spellings: exact names and unambiguous abbreviations."""

from __future__ import annotations

from collections.abc import Sequence


def gnu_long(arg: str, options: Sequence[str]) -> str | None:
    """GNU getopt: an exact long option, else a unique abbreviation, else None."""
    name = arg[2:].split("=", 1)[0]
    if name in options:
        return name
    candidates = [o for o in options if o.startswith(name)]
    return candidates[0] if len(candidates) == 1 else None


def prefix_of(arg: str, *names: str) -> bool:
    """A long option that abbreviates any of `names` (ambiguous ones count: deny)."""
    name = arg[2:].split("=", 1)[0]
    return arg.startswith("--") and bool(name) and any(n.startswith(name) for n in names)
