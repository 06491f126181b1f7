"""The message chain: API conversion, validation and repair (REQ-BED-005, -007, -013)."""

from __future__ import annotations

from typing import Any

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.messages import (
    SYSTEM_PREFIX,
    interrupted_text,
    repair_chain,
    to_api_messages,
    validate_chain,
)
from phoenix_nb.core.values import ImageData, TextBlock, ThinkingBlock, ToolUseBlock
from tests.core.helpers import pairs


def user(text: str, *images: ImageData) -> dict[str, Any]:
    return {"message_type": "user", "content": {"text": text, "images": to_json(images)}}


def agent(*blocks: object, stop: str = "end_turn") -> dict[str, Any]:
    return {"message_type": "agent", "content": {"blocks": to_json(blocks), "stop_reason": stop}}


def tool(tool_use_id: str, text: str = "ok", is_error: bool = False) -> dict[str, Any]:
    content = {"tool_use_id": tool_use_id, "content": text, "is_error": is_error, "images": []}
    return {"message_type": "tool", "content": content}


def system(text: str) -> dict[str, Any]:
    return {"message_type": "system", "content": {"text": text}}


T1 = ToolUseBlock("t1", "bash", {"command": "ls"})
T2 = ToolUseBlock("t2", "patch", {"path": "a"})


def test_req_bed_013_images_become_base64_blocks() -> None:
    png = ImageData("image/png", "iVBORw0KGgo=", "fig.png")
    [message] = to_api_messages([user("look", png)])
    assert message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
            },
        ],
    }


def test_user_side_items_merge_results_first_and_roles_alternate() -> None:
    history = [
        user("go"),
        agent(TextBlock("running"), T1, T2, stop="tool_use"),
        system("Mode changed"),
        tool("t2", "second"),
        tool("t1", "first"),
        {"message_type": "error", "content": {"text": "x", "kind": "network"}},
        agent(TextBlock("done")),
    ]
    messages = to_api_messages(history)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    turn = messages[2]["content"]
    assert [b.get("tool_use_id") for b in turn[:2]] == ["t1", "t2"]  # in call order
    assert turn[2] == {"type": "text", "text": SYSTEM_PREFIX + "Mode changed"}


def test_truncated_tool_use_is_sent_with_empty_input_and_empty_blocks_drop() -> None:
    broken = ToolUseBlock("t1", "bash", {"command": "ec"}, input_error="truncated by max_tokens")
    history = [
        user("go"),
        agent(TextBlock(""), ThinkingBlock("hmm", ""), broken, stop="max_tokens"),
        tool("t1", "not executed", True),
    ]
    messages = to_api_messages(history)
    assert messages[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]


def test_empty_agent_message_is_not_sent() -> None:
    messages = to_api_messages([user("a"), agent(), user("b")])
    assert [m["role"] for m in messages] == ["user"]
    assert [b["text"] for b in messages[0]["content"]] == ["a", "b"]


def test_validate_and_repair_orphans_req_bed_007() -> None:
    history = [user("go"), agent(T1, T2, stop="tool_use"), tool("t1")]
    assert validate_chain(history) == ["tool_use t2 (patch) has no result"]
    repairs = pairs(repair_chain(history))
    assert repairs == [
        (
            "tool",
            {"tool_use_id": "t2", "content": interrupted_text(), "is_error": True, "images": []},
        )
    ]
    repaired = history + [{"message_type": k, "content": c} for k, c in repairs]
    assert validate_chain(repaired) == []
    assert "interrupted" in interrupted_text() and "no result was recorded" in interrupted_text()


def test_validate_finds_duplicates_and_holes_and_api_form_bridges_them() -> None:
    history = [
        user("go"),
        agent(T1, T2, stop="tool_use"),
        tool("t2"),
        tool("t2"),
        agent(TextBlock("next")),
    ]
    problems = validate_chain(history)
    assert any("out of order" in p for p in problems)
    assert any("'t2', which is not an unanswered tool_use" in p for p in problems)
    assert any("t1 (bash) was not answered" in p for p in problems)
    messages = to_api_messages(history)
    results = [b for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["t1", "t2"]
    assert results[0]["is_error"] is True


def test_unknown_message_type_is_reported() -> None:
    assert validate_chain([{"message_type": "bogus", "content": {}}]) == [
        "message 0: unknown message_type 'bogus'"
    ]
