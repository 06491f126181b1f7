"""Rows on disk as older versions wrote them still load, and a row this version cannot
read is refused by name with nothing lost (docs/stored-messages.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.cycles import RecordHeader, project
from phoenix_nb.core.messages import to_api_messages, validate_chain
from phoenix_nb.core.stored import BadStoredMessage, MessageKind, StoredMessage
from phoenix_nb.core.values import TextBlock, ToolUseBlock, Usage
from phoenix_nb.runtime.claim import claim, release
from phoenix_nb.store import Store
from phoenix_nb.store.journal import JournalStorage

CALL = ToolUseBlock("toolu_1", "bash", {"command": "ls"})


def _old_rows(conversation_id: str) -> list[dict[str, Any]]:
    """A conversation as an early version stored it: content as JSON text, usage as
    plain counts, no display_data or actor_kind on some rows."""
    at = "2025-06-01T10:00:00.000000+00:00"

    def row(seq: int, kind: str, content: Any, **more: Any) -> dict[str, Any]:
        return {
            "id": f"m-old-{seq}",
            "conversation_id": conversation_id,
            "sequence_id": seq,
            "message_type": kind,
            "content": content,
            "created_at": at,
            **more,
        }

    blocks = to_json((TextBlock("Listing."), CALL))
    answer = to_json((TextBlock("Two files."),))
    return [
        row(1, "user", json.dumps({"text": "what is here?", "images": []})),
        row(2, "agent", {"blocks": blocks, "stop_reason": "tool_use"},
            usage_data={"input_tokens": 100, "output_tokens": 10}, actor_kind="llm_agent"),
        row(3, "tool", {"tool_use_id": "toolu_1", "content": "a.py\nb.py", "is_error": False},
            display_data=None),
        row(4, "agent", json.dumps({"blocks": answer, "stop_reason": "end_turn"}),
            usage_data={"input_tokens": 120, "output_tokens": 5}),
    ]  # fmt: skip


def _write_rows(root: Path, conversation_id: str, rows: list[dict[str, Any]]) -> None:
    """Put rows in the conversation's journal as they are (the store never wrote these)."""
    storage = JournalStorage(root / "conversations" / f"{conversation_id}.jsonl")
    try:
        with storage.locked():
            storage.commit([["put", "messages", r["sequence_id"], r] for r in rows])
    finally:
        storage.close()


def _conversation(root: Path) -> str:
    with Store(root) as store:
        return str(store.create_conversation(cwd="/w", model="m", mode="restricted")["id"])


def test_a_store_written_in_the_old_row_format_loads_and_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "store"
    conv = _conversation(root)
    _write_rows(root, conv, _old_rows(conv))
    with Store(root) as store:
        claimed = claim(store, conv, is_sub_agent=False)
        assert claimed is not None
        try:
            history = claimed.history
            assert [m.kind for m in history] == ["user", "agent", "tool", "agent"]
            assert history[0].content["text"] == "what is here?"
            assert [m.usage for m in history if m.usage] == [
                Usage(input_tokens=100, output_tokens=10),
                Usage(input_tokens=120, output_tokens=5),
            ]
            assert validate_chain(history) == []
            api = to_api_messages(history)
            assert [m["role"] for m in api] == ["user", "assistant", "user", "assistant"]
            assert api[-1]["content"] == [{"type": "text", "text": "Two files."}]
            header = RecordHeader(conv, "s", "claude-sonnet-4-5", "/w", True, 200_000)
            record = project(history, claimed.state, header)
            assert record["usage"]["total"]["input_tokens"] == 220
            steps = record["cycles"][0]["steps"]
            assert steps[0]["text"] == "what is here?"
            assert steps[1]["tool_groups"][0]["calls"][0]["result"]["content"] == "a.py\nb.py"
        finally:
            release(store.root, conv, claimed.lease)
        # It takes new messages after the old ones, in today's form.
        (new,) = store.append_messages(conv, [StoredMessage(MessageKind.USER, {"text": "more"})])
        assert new.sequence_id == 5
        assert store.stored_messages(conv)[-1] == new
        assert store.messages(conv)[0]["content"] == _old_rows(conv)[0]["content"]


def test_a_row_that_is_no_message_is_refused_by_name_and_nothing_is_lost(tmp_path: Path) -> None:
    root = tmp_path / "store"
    conv = _conversation(root)
    rows = _old_rows(conv)
    rows[2]["content"] = ["not", "an", "object"]
    _write_rows(root, conv, rows)
    journal = root / "conversations" / f"{conv}.jsonl"
    on_disk = journal.read_bytes()
    with Store(root) as store:
        with pytest.raises(BadStoredMessage, match=r"stored message #3 \(m-old-3\): content is"):
            store.stored_messages(conv)
        with pytest.raises(BadStoredMessage, match=r"#3"):
            claim(store, conv, is_sub_agent=False)
        assert store.messages(conv) == rows, "every row is still there, as it was"
    assert journal.read_bytes() == on_disk, "reading a bad row writes nothing"
