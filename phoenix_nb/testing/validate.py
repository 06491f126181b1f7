"""Moved to `phoenix_nb.demo.validate` (the offline demo model serves through it).

Kept so tests may keep importing `phoenix_nb.testing.validate`; every name,
private ones included, is the demo module's own.
"""

from __future__ import annotations

from typing import Any

from phoenix_nb.demo import validate as _moved
from phoenix_nb.demo.validate import *  # noqa: F403


def __getattr__(name: str) -> Any:
    return getattr(_moved, name)
