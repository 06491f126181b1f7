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
from phoenix_nb.core.stored import MessageLike

CLIP = 2000  # characters of a call's input or a result kept when shown as text

__all__ = ["RequestHistory", "continuation_messages", "request_messages"]


class RequestHistory:
    """The API form of a growing history, ready for the next request."""

    def __init__(self) -> None:
        self._api = ApiMessages()
        # Messages with foreign calls as text, by position, each kept with the API
        # message it was made from: only messages that changed are converted again.
        self._offered: frozenset[str] = frozenset()
        self._foreign: set[str] = set()
        self._converted: list[tuple[dict[str, Any], dict[str, Any]]] = []

    @property
    def count(self) -> int:
        """Stored messages taken so far."""
        return self._api.count

    def extend(self, history: Iterable[MessageLike]) -> None:
        """Take the next stored messages, in order."""
        self._api.extend(history)

    def messages(
        self, offered: Collection[str], continuation: str | None = None
    ) -> list[dict[str, Any]]:
        """The API `messages` for a request offering the tools named `offered`.

        With `continuation` (the summary prompt) the request offers no tools: calls
        and results are text and the prompt ends the last user turn
        (`continuation_messages`, a walk of the whole history, once per conversation:
        the runtime runs it in a worker thread).
        """
        messages = self._api.messages()
        wanted = frozenset(offered)
        if not self._api.tool_names <= wanted:
            messages = self._without_foreign(messages, wanted)
        if continuation is not None:
            messages = continuation_messages(messages, continuation)
        return messages

    def _without_foreign(
        self, messages: list[dict[str, Any]], offered: frozenset[str]
    ) -> list[dict[str, Any]]:
        """Calls of tools this request does not offer, and their results, as text.

        A result always follows its call, so a message is converted for good once
        the messages before it are known; a model calling an undeclared tool again
        and again costs a conversion per new message, not per request and message.
        """
        if offered != self._offered:
            self._offered, self._foreign, self._converted = offered, set(), []
        done = self._converted
        out: list[dict[str, Any]] = []
        for index, message in enumerate(messages):
            if index < len(done) and done[index][0] is message:
                out.append(done[index][1])
                continue
            del done[index:]
            self._foreign |= _foreign_calls(message, offered)
            converted = _foreign_as_text(message, self._foreign)
            done.append((message, converted))
            out.append(converted)
        return out


def continuation_messages(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """`messages` for a request offering no tools: every call and result as text, and
    the summary prompt at the end of the last user turn."""
    return _append_user_text(_tools_as_text(messages), prompt)


def request_messages(
    history: Sequence[MessageLike],
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


def _foreign_calls(message: Mapping[str, Any], offered: Collection[str]) -> set[str]:
    """Ids of the calls in an assistant message of tools the request does not offer."""
    content = message["content"]
    if message["role"] != "assistant" or isinstance(content, str):
        return set()
    return {
        block["id"]
        for block in content
        if block.get("type") == "tool_use" and block.get("name") not in offered
    }


def _foreign_as_text(message: dict[str, Any], foreign: Collection[str]) -> dict[str, Any]:
    """One message with the calls named in `foreign`, and their results, as text."""
    content = message["content"]
    if isinstance(content, str):
        return message
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
    return {"role": message["role"], "content": results + blocks}


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
