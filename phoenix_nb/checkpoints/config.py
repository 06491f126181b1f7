"""What the checkpoints of a working tree keep, and for how long.

A value of its own, with no import beyond the standard library, because the
settings (`runtime/settings.py`, `Settings.checkpoints`) are built when the
extension loads and must not pull in the recorder; each default is written
here once, and the notebook's traits (`c.Phoenix.checkpoint_*`) take theirs
from it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CheckpointConfig"]


@dataclass(frozen=True)
class CheckpointConfig:
    """`c.Phoenix.checkpoints` and `c.Phoenix.checkpoint_*`."""

    enabled: bool = True  # checkpoint the folder while the agent can write
    max_file_size: int = 20 * 1024 * 1024  # bytes; larger files are recorded by hash only
    keep_days: float = 30.0  # checkpoints older than this may be pruned …
    max_bytes: int = 2 * 1024 * 1024 * 1024  # … and the oldest while a store is larger
    # (never the latest approval/turn checkpoint or anything after it)
