"""One seed for every test that draws its own random numbers.

Deterministic by default (the README's test command and CI); random when
exploring (`tests/explore.sh` sets PHOENIX_EXPLORE=1). `PHOENIX_SEED` replays a
seed printed by an earlier run.
"""

from __future__ import annotations

import os
import random

EXPLORING = os.environ.get("PHOENIX_EXPLORE") == "1"
FIXED_SEED = 20261122


def _choose() -> int:
    if "PHOENIX_SEED" in os.environ:
        return int(os.environ["PHOENIX_SEED"])
    if EXPLORING:
        return random.SystemRandom().randrange(2**32)
    return FIXED_SEED


_SEED = _choose()


def phoenix_seed() -> int:
    """The run's seed: fixed unless exploring or replaying."""
    return _SEED
