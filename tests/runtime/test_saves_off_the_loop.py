"""A turn's saves are made durable off the event loop, and acknowledged only once durable.

Every save ends in an fdatasync (1-30 ms on a busy disk); on the loop each one held the
cell's Cancel and Approve buttons that long, several times a turn. Checked from
outside: which thread calls fdatasync on which file (/proc/self/fd), and what the
history and the watchers have seen when each save returns.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.runtime.harness import phoenix_for, project_dir


async def test_a_turns_saves_are_durable_off_the_loop(
    fake_anthropic: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    synced: list[tuple[str, bool]] = []
    held: list[int] = []  # the history's length at each save of the conversation's journal
    original = os.fdatasync

    def noting(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append((path, threading.get_ident() == loop_thread))
        if path.endswith(f"{conv.id}.jsonl"):
            held.append(len(conv.runtime.history))
        original(fd)

    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(slug="saves", cwd=project_dir(tmp_path))
        call = tool_use("bash", {"command": "echo looked"})
        fake_anthropic.script(
            Turn([text("Let me look."), call], stop_reason="tool_use"), Turn([text("The answer.")])
        )
        monkeypatch.setattr(os, "fdatasync", noting)
        await conv.run("The question?")
        monkeypatch.undo()
        kinds = ["user", "agent", "tool", "agent"]
        assert [m["message_type"] for m in conv.history()] == kinds
        assert [m["message_type"] for m in phoenix.store.messages(conv.id)] == kinds
    journal = [on_loop for path, on_loop in synced if path.endswith(f"{conv.id}.jsonl")]
    assert len(journal) >= 4, f"the turn's messages were not saved: {synced}"
    on_loop = [path for path, on in synced if on]
    assert on_loop == [], f"saved on the event loop's thread: {on_loop}"
    # acknowledged only once durable: no message is in the history before its save ends
    assert all(count <= i for i, count in enumerate(held)), held
