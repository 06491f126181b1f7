"""The stored message's parser and writer (docs/stored-messages.md).

The writer's row parses back to the same message; a row that is not a message
is refused with a clear error naming it and is left exactly as it was; rows
written by older versions still read.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.messages import agent_blocks, to_api_messages, validate_chain
from phoenix_nb.core.stored import (
    BadStoredMessage,
    MessageKind,
    StoredMessage,
    parse_history,
)
from phoenix_nb.core.values import TextBlock, ToolUseBlock, Usage
from phoenix_nb.errors import PhoenixError

CALL = ToolUseBlock("t1", "bash", {"command": "ls"})
USAGE = Usage(input_tokens=12, output_tokens=3, cache_read_input_tokens=400)

MESSAGES = [
    StoredMessage(MessageKind.USER, {"text": "list it", "images": []}),
    StoredMessage(
        MessageKind.AGENT,
        {"blocks": to_json((TextBlock("Looking."), CALL)), "stop_reason": "tool_use"},
        usage=USAGE,
    ),
    StoredMessage(
        MessageKind.TOOL,
        {"tool_use_id": "t1", "content": "a\nb", "is_error": False, "images": []},
        display={"type": "bash", "exit_code": 0, "nested": {"list": [1, 2]}},
    ),
    StoredMessage(MessageKind.SYSTEM, {"text": "Mode changed", "limit": "turn_cost"}),
    StoredMessage(MessageKind.ERROR, {"text": "overloaded", "kind": "overloaded"}),
    StoredMessage(MessageKind.CONTINUATION, {"summary": "we listed it"}),
]


def _stored(message: StoredMessage, seq: int) -> StoredMessage:
    return StoredMessage(
        message.kind,
        message.content,
        message.display,
        message.usage,
        id=f"m-{seq}",
        conversation_id="c-1",
        sequence_id=seq,
        created_at="2026-11-25T02:00:00.000000+00:00",
    )


@pytest.mark.parametrize("message", MESSAGES, ids=[m.kind.value for m in MESSAGES])
def test_the_writers_row_parses_back_to_the_same_message(message: StoredMessage) -> None:
    stored = _stored(message, 7)
    row = stored.row()
    assert set(row) == {
        "id", "conversation_id", "sequence_id", "message_type", "actor_kind", "content",
        "display_data", "usage_data", "created_at",
    }  # fmt: skip
    assert row["message_type"] == message.kind.value
    assert row["actor_kind"] == message.kind.actor
    assert StoredMessage.parse(row) == stored
    assert StoredMessage.parse(row).row() == row


def test_every_kind_has_an_actor_and_the_kinds_are_the_rows_vocabulary() -> None:
    assert [k.value for k in MessageKind] == [
        "user", "agent", "tool", "system", "continuation", "error",
    ]  # fmt: skip
    assert {k.actor for k in MessageKind} == {"human", "llm_agent", "system"}


def _good_row() -> dict[str, Any]:
    return _stored(MESSAGES[1], 3).row()


BAD_ROWS: list[tuple[str, Any, str]] = [
    ("not an object", ["agent", {}], "is a list, not an object"),
    ("unknown kind", {**_good_row(), "message_type": "robot"}, "unknown message_type 'robot'"),
    ("no kind", {k: v for k, v in _good_row().items() if k != "message_type"}, "None"),
    ("content a list", {**_good_row(), "content": ["x"]}, "content is a list, not an object"),
    ("content missing", {**_good_row(), "content": None}, "content is a NoneType"),
    ("content bad JSON text", {**_good_row(), "content": "{oops"}, "content is text that is"),
    ("content JSON text, not an object", {**_good_row(), "content": "[1]"}, "content is a list"),
    ("display a string", {**_good_row(), "display_data": "shown"}, "display_data is a str"),
    ("usage a number", {**_good_row(), "usage_data": 12}, "usage_data is a int"),
    ("usage another value", {**_good_row(), "usage_data": to_json(CALL)}, "ToolUseBlock"),
    ("usage a bad tag", {**_good_row(), "usage_data": {"type": "Nope"}}, "usage_data"),
    ("sequence negative", {**_good_row(), "sequence_id": -1}, "sequence_id -1 is not a count"),
    ("sequence a bool", {**_good_row(), "sequence_id": True}, "sequence_id True"),
    ("id a number", {**_good_row(), "id": 5}, "id is a int, not text"),
]


@pytest.mark.parametrize(
    ("row", "problem"), [r[1:] for r in BAD_ROWS], ids=[r[0] for r in BAD_ROWS]
)
def test_a_bad_row_is_a_clear_error_that_names_it_and_changes_nothing(
    row: Any, problem: str
) -> None:
    before = copy.deepcopy(row)
    with pytest.raises(BadStoredMessage) as caught:
        StoredMessage.parse(row)
    assert isinstance(caught.value, PhoenixError) and isinstance(caught.value, ValueError)
    assert problem in str(caught.value), str(caught.value)
    if isinstance(row, dict) and type(row.get("sequence_id")) is int and row["sequence_id"] > 0:
        assert str(caught.value).startswith("stored message #3"), str(caught.value)
    assert row == before, "the parser never changes the row it refuses"


def test_a_bad_row_in_a_history_stops_the_parse_at_it_and_validation_names_it() -> None:
    rows = [_stored(m, i).row() for i, m in enumerate(MESSAGES[:3], start=1)]
    rows[1]["content"] = ["not", "an", "object"]
    with pytest.raises(BadStoredMessage, match=r"stored message #2 \(m-2\): content is a list"):
        parse_history(rows)
    assert validate_chain(rows)[0] == "message 1: content is a list, not an object"


def test_rows_of_older_versions_still_read() -> None:
    """Content stored as JSON text, usage as plain counts, no actor_kind/display/usage keys."""
    agent = {
        "id": "m-2",
        "conversation_id": "c-old",
        "sequence_id": 2,
        "message_type": "agent",
        "content": '{"blocks": [{"type": "TextBlock", "text": "hi"}], "stop_reason": "end_turn"}',
        "usage_data": {"input_tokens": 5, "output_tokens": 2, "unknown_count": 9, "x": None},
        "created_at": "2025-01-01T00:00:00",
    }
    user = {"message_type": "user", "content": {"text": "hello"}}
    user_msg, agent_msg = parse_history([user, agent])
    assert user_msg == StoredMessage(MessageKind.USER, {"text": "hello"})
    assert agent_msg.usage == Usage(input_tokens=5, output_tokens=2)
    assert agent_msg.content["stop_reason"] == "end_turn"
    assert to_api_messages([user_msg, agent_msg]) == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    # Written again, an old row takes today's form and reads back the same.
    assert StoredMessage.parse(agent_msg.row()) == agent_msg
    assert agent_msg.row()["usage_data"] == to_json(Usage(input_tokens=5, output_tokens=2))


def test_a_parsed_message_is_passed_through_without_parsing_again() -> None:
    message = _stored(MESSAGES[0], 1)
    (same,) = parse_history([message])
    assert same is message


def test_an_agent_messages_blocks_are_decoded_once_and_kept() -> None:
    """The request and the record both read every answer: one decode serves both."""
    (message,) = parse_history([_stored(MESSAGES[1], 2).row()])
    first = agent_blocks(message)
    assert first == (TextBlock("Looking."), CALL)
    assert agent_blocks(message) is first and message.blocks is first
