"""Request shaping: the stored history as the `messages` of one API request.

`to_api_messages` (core/messages.py) makes any history valid to send; this
module adapts it to what one particular request offers. Two cases need more
than the plain chain:

* calls of tools the conversation does not offer (a model may call a tool it
  was not given, e.g. a sub-agent asking for spawn_agents): the API refuses a
  history whose tool_use names an unknown tool, so the call and its refusal are
  turned into text the model still sees;
* a continuation request, which must offer no tools at all (REQ-BED-020): the
  API refuses tool_use blocks in a request without tool definitions, so every
  call and result becomes text, and the summary prompt is appended.

`RequestHistory` keeps the converted history of a live conversation, fed each
stored message once, so a request costs what the last round added, not the
whole history again (`request_messages` is the same over a whole history).

Pure, like the rest of the core.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from phoenix_nb.core.messages import ApiMessages

CLIP = 2000  # characters of a call's input or a result kept when shown as text

__all__ = ["RequestHistory", "request_messages"]


class RequestHistory:
    """The API form of a growing history, ready for the next request."""

    def __init__(self) -> None:
        self._api = ApiMessages()

    @property
    def count(self) -> int:
        """Stored messages taken so far."""
        return self._api.count

    def extend(self, history: Iterable[Mapping[str, Any]]) -> None:
        """Take the next stored messages, in order."""
        self._api.extend(history)

    def messages(
        self, offered: Collection[str], continuation: str | None = None
    ) -> list[dict[str, Any]]:
        """The API `messages` for a request offering the tools named `offered`.

        With `continuation` (the summary prompt) the request offers no tools: calls
        and results are text and the prompt ends the last user turn. Only a history
        that calls a tool the request does not offer is walked whole (to turn those
        calls into text); a continuation is once per conversation.
        """
        messages = self._api.messages()
        wanted = set(offered)
        if not self._api.tool_names <= wanted:
            messages = _foreign_tools_as_text(messages, wanted)
        if continuation is not None:
            messages = _append_user_text(_tools_as_text(messages), continuation)
        return messages


def request_messages(
    history: Sequence[Mapping[str, Any]],
    offered: Collection[str],
    continuation: str | None = None,
) -> list[dict[str, Any]]:
    """The API `messages` of a whole history (`RequestHistory.messages`)."""
    request = RequestHistory()
    request.extend(history)
    return request.messages(offered, continuation)


def _call_text(block: Mapping[str, Any]) -> dict[str, Any]:
    call = json.dumps(block.get("input", {}), ensure_ascii=False)[:CLIP]
    return {"type": "text", "text": f"[called {block['name']}: {call}]"}


def _result_text(block: Mapping[str, Any]) -> dict[str, Any]:
    result = block.get("content")
    if isinstance(result, list):
        result = " ".join(str(b.get("text", "")) for b in result if isinstance(b, dict))
    return {"type": "text", "text": f"[result: {str(result)[:CLIP]}]"}


def _tools_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls and results as plain text, for a request that offers no tools."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(message)
            continue
        blocks = []
        for block in content:
            kind = str(block.get("type"))
            if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                blocks.append(_call_text(block))
            elif kind == "tool_result":
                blocks.append(_result_text(block))
            elif kind.endswith("_tool_result"):  # a server tool's result (web search, MCP)
                found = json.dumps(block.get("content"), ensure_ascii=False)[:CLIP]
                blocks.append({"type": "text", "text": f"[result: {found}]"})
            elif kind in ("thinking", "redacted_thinking"):
                continue
            elif kind == "text" and "citations" in block:  # their sources are not sent here
                blocks.append({"type": "text", "text": block.get("text", "")})
            else:
                blocks.append(block)
        out.append({"role": message["role"], "content": blocks or [{"type": "text", "text": "…"}]})
    return out


def _foreign_tools_as_text(
    messages: list[dict[str, Any]], offered: set[str]
) -> list[dict[str, Any]]:
    """Calls of tools this request does not offer, and their results, as text."""
    foreign = {
        block["id"]
        for message in messages
        if message["role"] == "assistant" and not isinstance(message["content"], str)
        for block in message["content"]
        if block.get("type") == "tool_use" and block.get("name") not in offered
    }
    if not foreign:
        return messages
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(message)
            continue
        results: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type")
            if kind == "tool_use" and block.get("id") in foreign:
                blocks.append(_call_text(block))
            elif kind == "tool_result" and block.get("tool_use_id") in foreign:
                blocks.append(_result_text(block))
            elif kind == "tool_result":
                results.append(block)  # the API wants tool results first
            else:
                blocks.append(block)
        out.append({"role": message["role"], "content": results + blocks})
    return out


def _append_user_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Add a user text block at the end, merging into a trailing user message."""
    out = list(messages)
    block = {"type": "text", "text": text}
    if out and out[-1]["role"] == "user":
        content = out[-1]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        out[-1] = {"role": "user", "content": [*blocks, block]}
    else:
        out.append({"role": "user", "content": [block]})
    return out
