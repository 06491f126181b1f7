"""The checks the real Messages API makes that history bugs would trip.

The fake answers 400 invalid_request_error with these messages, so a broken
history (an unanswered tool_use, two user turns in a row, a bad image) fails
in tests the way it would fail in production.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from phoenix_nb.errors import PhoenixError

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5 * 1024 * 1024


class RequestInvalid(PhoenixError):
    """A request the API would reject; the message is the API-style explanation."""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise RequestInvalid("messages: content must be a string or a list of blocks")
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RequestInvalid("messages: every content block needs a type")
    return content


def _check_image(block: dict[str, Any], where: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise RequestInvalid(f"{where}: image.source: Field required")
    if source.get("type") == "url":
        return
    if source.get("type") != "base64":
        raise RequestInvalid(f"{where}: image.source.type must be base64 or url")
    media_type = source.get("media_type")
    if media_type not in IMAGE_TYPES:
        raise RequestInvalid(
            f"{where}: image.source.media_type: Input should be one of "
            f"{', '.join(sorted(IMAGE_TYPES))} (got {media_type!r})"
        )
    data = source.get("data")
    if not isinstance(data, str) or not data:
        raise RequestInvalid(f"{where}: image.source.data: Field required")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestInvalid(f"{where}: image.source.data: invalid base64 data") from None
    if len(raw) > MAX_IMAGE_BYTES:
        raise RequestInvalid(f"{where}: image exceeds 5 MB maximum: {len(raw)} bytes")


def validate_messages_request(body: Any) -> None:
    """Raise RequestInvalid when the real API would answer 400."""
    if not isinstance(body, dict):
        raise RequestInvalid("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestInvalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestInvalid("max_tokens: Input should be a positive integer")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise RequestInvalid("tools: Input should be a list")
    tool_names = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestInvalid(f"tools.{i}.name: Field required")
        if tool["name"] in tool_names:
            raise RequestInvalid(f"tools: Tool names must be unique ({tool['name']!r})")
        tool_names.add(tool["name"])
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("messages: at least one message is required")
    pending: list[str] = []  # tool_use ids the next user message must answer
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise RequestInvalid(f"{where}.role: Input should be 'user' or 'assistant'")
        role = message["role"]
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            if i == 0:
                raise RequestInvalid('messages: first message must use the "user" role')
            raise RequestInvalid(
                f'messages: roles must alternate between "user" and "assistant" ({where})'
            )
        blocks = _blocks(message)
        if role == "assistant":
            pending = _check_assistant(blocks, where, tool_names)
            _check_server_calls(blocks, where, last=i == len(messages) - 1)
        else:
            _check_user(blocks, where, pending)
            pending = []


def _check_assistant(blocks: list[dict[str, Any]], where: str, tool_names: set[str]) -> list[str]:
    ids: list[str] = []
    for j, block in enumerate(blocks):
        btype = block["type"]
        if btype == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise RequestInvalid(f"{where}.content.{j}.tool_use.id: Field required")
            if block.get("name") not in tool_names:
                raise RequestInvalid(
                    f"{where}.content.{j}: tool_use names unknown tool {block.get('name')!r}"
                )
            if not isinstance(block.get("input"), dict):
                raise RequestInvalid(
                    f"{where}.content.{j}.tool_use.input: Input should be an object"
                )
            if block["id"] in ids:
                raise RequestInvalid(f"{where}: tool_use ids must be unique ({block['id']})")
            ids.append(block["id"])
        elif btype in ("tool_result", "image"):
            raise RequestInvalid(f"{where}.content.{j}: {btype} blocks belong in user messages")
    return ids


def _check_server_calls(blocks: list[dict[str, Any]], where: str, *, last: bool) -> None:
    """A server tool call (web search, code execution, MCP) is answered by its result in
    the same assistant turn; only the last message may hold one still running, the
    content a `pause_turn` response asks to be sent back."""
    calls = [b.get("id") for b in blocks if b["type"] in ("server_tool_use", "mcp_tool_use")]
    answered = {
        b.get("tool_use_id")
        for b in blocks
        if b["type"].endswith("_tool_result") and b["type"] != "tool_result"
    }
    missing = [c for c in calls if c not in answered]
    if missing and not last:
        raise RequestInvalid(
            f"{where}: server tool use ids were found without a result: "
            + ", ".join(map(str, missing))
        )


def _check_user(blocks: list[dict[str, Any]], where: str, pending: list[str]) -> None:
    answered: list[str] = []
    seen_other = False
    for j, block in enumerate(blocks):
        btype = block["type"]
        if btype == "tool_result":
            tid = block.get("tool_use_id")
            if seen_other:
                raise RequestInvalid(
                    f"{where}: tool_result blocks must come first in the user message"
                )
            if tid not in pending:
                raise RequestInvalid(
                    f"{where}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks:"
                    f" {tid}. Each `tool_result` block must have a corresponding `tool_use` block"
                    " in the previous message."
                )
            if tid in answered:
                raise RequestInvalid(f"{where}: tool_use {tid} has more than one tool_result")
            answered.append(tid)
            inner = block.get("content")
            if isinstance(inner, list):
                for k, sub in enumerate(inner):
                    if isinstance(sub, dict) and sub.get("type") == "image":
                        _check_image(sub, f"{where}.content.{j}.content.{k}")
        else:
            seen_other = True
            if btype == "image":
                _check_image(block, f"{where}.content.{j}")
            elif btype == "tool_use":
                raise RequestInvalid(
                    f"{where}.content.{j}: tool_use blocks belong in assistant messages"
                )
    missing = [tid for tid in pending if tid not in answered]
    if missing:
        raise RequestInvalid(
            "messages: `tool_use` ids were found without `tool_result` blocks immediately"
            f" after: {', '.join(missing)}. Each `tool_use` block must have a corresponding"
            f" `tool_result` block in the next message ({where})."
        )
