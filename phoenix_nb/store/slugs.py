"""Readable conversation slugs ("brave-otter"), unique within a store.

People find conversations by slug in `%%phoenix --resume brave-otter`, so slugs
are two short common words; a number is added only when the pair is taken.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

ADJECTIVES = (
    "amber", "bold", "brave", "bright", "calm", "clever", "cosmic", "crisp", "eager",
    "gentle", "golden", "happy", "keen", "lively", "lucky", "mellow", "misty", "nimble",
    "noble", "quick", "quiet", "rapid", "silent", "silver", "steady", "sunny", "swift",
    "tidy", "vivid", "warm", "wise", "witty",
)  # fmt: skip
ANIMALS = (
    "badger", "beaver", "bison", "crane", "dolphin", "eagle", "falcon", "ferret", "fox",
    "gecko", "heron", "ibis", "koala", "lark", "lemur", "lynx", "marten", "newt", "otter",
    "owl", "panda", "puffin", "quail", "raven", "robin", "seal", "stoat", "swan", "tapir",
    "tern", "walrus", "wren",
)  # fmt: skip

_SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def normalise(base: str) -> str:
    """A slug-safe form of a user's suggestion, or ValueError if nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a slug from {base!r}")
    return slug[:60].rstrip("-")


def is_valid(slug: str) -> bool:
    return bool(_SLUG_RE.match(slug)) and len(slug) <= 64


def unique_slug(
    taken: Callable[[str], bool], base: str | None = None, rng: random.Random | None = None
) -> str:
    """`base` (normalised) or a random adjective-animal, suffixed -2, -3 … until free."""
    r = rng or random.Random()
    if base:
        stem = normalise(base)
    else:  # a few fresh pairs before falling back to numbers
        for _ in range(8):
            stem = f"{r.choice(ADJECTIVES)}-{r.choice(ANIMALS)}"
            if not taken(stem):
                return stem
    if not taken(stem):
        return stem
    n = 2
    while taken(f"{stem}-{n}"):
        n += 1
    return f"{stem}-{n}"
