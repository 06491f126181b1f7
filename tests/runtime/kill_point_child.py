"""A victim that SIGKILLs itself at one exact point of a turn (test_crash_points.py).

The store is the real one; the only addition is the kill, sent right after the
store has committed the conversation's state `DIE_AT` and before the runtime
persists that transition's messages (the runtime persists state first,
REQ-BED-007). This is the instant the random crash test hit by chance
(seed 2240223546), reached on purpose.

Usage: python -m tests.runtime.kill_point_child STORE PROJECT BASE_URL DIE_AT PROMPT
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from phoenix_nb.runtime.manager import Phoenix
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.store import Store

MODEL = "claude-sonnet-5-5"


class DiesAfterState(Store):
    """The real store, and a SIGKILL of this process once `die_at` is committed."""

    def __init__(self, root: Path, die_at: str) -> None:
        super().__init__(root)
        self.die_at = die_at

    def update_conversation(self, id: str, **fields: Any) -> dict[str, Any]:
        record = super().update_conversation(id, **fields)
        if fields.get("state") == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return record


async def run(store: Path, project: Path, base_url: str, die_at: str, prompt: str) -> None:
    phoenix = Phoenix(
        Settings(home=store, model=MODEL, base_url=base_url, api_key="test-key"),
        store=DiesAfterState(store, die_at),
    )
    conv = phoenix.create(cwd=project)
    await conv.run(prompt)
    await conv.wait()
    await phoenix.aclose()


if __name__ == "__main__":
    asyncio.run(run(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]))
    sys.exit(3)  # reaching the end means the kill point was never reached
