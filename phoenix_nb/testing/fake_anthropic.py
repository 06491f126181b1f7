"""Moved to `phoenix_nb.demo.server` (the offline demo model serves through it).

Kept so tests may keep importing `phoenix_nb.testing.fake_anthropic`; every name,
private ones included, is the demo module's own.
"""

from __future__ import annotations

from typing import Any

from phoenix_nb.demo import server as _moved
from phoenix_nb.demo.server import *  # noqa: F403


def __getattr__(name: str) -> Any:
    return getattr(_moved, name)
