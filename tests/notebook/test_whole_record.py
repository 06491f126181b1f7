"""The whole record made in a child process (`notebook/whole_record.py`) is the record
made in place, a child that cannot start falls back to a worker thread, and an export
that cannot be written says where and why (the kernel-level checks of the event loop
are in test_kernel_history_loop.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.cycles import RecordHeader
from phoenix_nb.core.states import ConvState
from phoenix_nb.core.stored import StoredMessage
from phoenix_nb.core.values import TextBlock
from phoenix_nb.notebook import whole_record
from phoenix_nb.notebook.render import MIME_TYPE
from phoenix_nb.notebook.thumbnails import ThumbnailCache
from phoenix_nb.notebook.whole_record import (
    ExportFailed,
    ExportJob,
    HistoryJob,
    bundle_of,
    history_bundle,
    run_away,
)
from phoenix_nb.runtime.snapshot import RecordSnapshot
from phoenix_nb.testing import FakeAnthropic
from tests.runtime.harness import phoenix_for

MODEL = "claude-sonnet-4-5"


def _row(seq: int, kind: str, content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"m-{seq}",
        "conversation_id": "c-1",
        "sequence_id": seq,
        "message_type": kind,
        "actor_kind": "user" if kind == "user" else "agent",
        "content": content,
        "display_data": None,
        "usage_data": None,
        "created_at": f"2026-01-01T00:00:{seq:02d}Z",
    }


def snapshot(requests: int) -> RecordSnapshot:
    history = []
    for i in range(requests):
        history.append(_row(2 * i + 1, "user", {"text": f"Question {i}?", "images": []}))
        answer = to_json((TextBlock(f"Answer {i} — “quoted”."),))
        history.append(_row(2 * i + 2, "agent", {"blocks": answer, "stop_reason": "end_turn"}))
    header = RecordHeader(
        conversation_id="c-1",
        slug="whole",
        model=MODEL,
        cwd="/srv/project",
        sandbox_available=True,
        context_window=200_000,
    )
    return RecordSnapshot(history=history, model=MODEL, state=ConvState(), header=header)


async def test_the_childs_history_is_the_one_made_in_place() -> None:
    job = HistoryJob(snapshot(30), show_thinking=True, shown=(9, 99))
    answer = await run_away(job)
    bundle, last = history_bundle(job, ThumbnailCache())
    assert answer["last"] == last and bundle_of(answer) == bundle
    # the display message's content as ipykernel would have encoded it, ready to send
    assert json.loads(answer["content"]) == {"data": bundle, "metadata": {}, "transient": {}}
    cycles = bundle[MIME_TYPE]["cycles"]
    assert len(cycles) == 30 and cycles[0]["folded"] and not cycles[10].get("folded")
    assert last["index"] == 29


async def test_a_child_that_cannot_start_falls_back_to_a_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    job = HistoryJob(snapshot(3), show_thinking=True, shown=None)
    expected = history_bundle(job, ThumbnailCache())
    monkeypatch.setattr(whole_record.sys, "executable", str(tmp_path / "no-python"))
    answer = await run_away(job)
    assert (bundle_of(answer), answer["last"]) == expected


async def test_an_export_is_written_by_the_child_or_says_why_not(tmp_path: Path) -> None:
    target = tmp_path / "out" / "whole.md"
    answer = await run_away(ExportJob(snapshot(5), True, "md", str(target)))
    text = target.read_text(encoding="utf-8")
    assert answer == {"size": len(text.encode())}
    assert "Question 0?" in text and "Answer 4 — “quoted”." in text
    with pytest.raises(ExportFailed, match=r"cannot write /proc/nope/x\.md"):
        await run_away(ExportJob(snapshot(1), True, "md", "/proc/nope/x.md"))


async def test_a_record_read_by_the_child_from_the_store_is_the_kernels(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Given only the conversation's id and the store's folder, the child makes the
    record the kernel makes from what it holds: cold (not opened by this Phoenix) or
    open, where it shows the messages the kernel holds and no later one."""
    async with phoenix_for(fake_anthropic, tmp_path) as first:
        conv = first.create(slug="stored")
        first.store.append_messages(conv.id, [StoredMessage.parse(r) for r in snapshot(12).history])
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:  # a restart
        cold = phoenix.stored_record("stored")
        assert cold.count is None and phoenix.get("stored").message_count() == 24
        in_place = HistoryJob(phoenix.get("stored").record_snapshot(), True, (3, 99))
        expected = history_bundle(in_place, ThumbnailCache())
        answer = await run_away(HistoryJob(cold, show_thinking=True, shown=(3, 99)))
        assert (bundle_of(answer), answer["last"]) == expected
        assert len(bundle_of(answer)[MIME_TYPE]["cycles"]) == 12
        # open: a message stored after the kernel read the history is not its to show
        later = snapshot(13).history[-2:]
        phoenix.store.append_messages(cold.conversation_id, [StoredMessage.parse(r) for r in later])
        answer = await run_away(HistoryJob(phoenix.stored_record("stored"), True, None))
        assert len(bundle_of(answer)[MIME_TYPE]["cycles"]) == 12
