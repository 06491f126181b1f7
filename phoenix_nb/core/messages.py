"""The persisted message chain and its Anthropic API form.

A history is the store's messages (`StoredMessage`, core/stored.py; the content
of each kind is in docs/stored-messages.md). The API demands that every tool_use is
answered by exactly one tool_result in the next user turn and that roles
alternate; a crash or a bug must never make a conversation unsendable, so
`to_api_messages` always produces a valid list (it pairs results with their
calls and fills any hole with a synthetic result), while `validate_chain`
reports what is wrong with the stored history and `repair_chain` says which
messages to append so that the stored history itself becomes valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from phoenix_nb.core.codec import CodecError, from_json
from phoenix_nb.core.stored import (
    BadStoredMessage,
    MessageKind,
    MessageLike,
    StoredMessage,
    as_stored,
)
from phoenix_nb.core.values import (
    CitedTextBlock,
    ContentBlock,
    ImageData,
    RawBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

SYSTEM_PREFIX = "[phoenix notice] "
DEFAULT_REPAIR_REASON = "the kernel restarted"


def interrupted_text(reason: str = DEFAULT_REPAIR_REASON) -> str:
    return f"Tool call interrupted ({reason}) — no result was recorded."


def agent_blocks(message: MessageLike) -> tuple[ContentBlock, ...]:
    """The content blocks of an agent message (decoded once per message)."""
    return as_stored(message).blocks


def _image(data: Any) -> ImageData:
    if isinstance(data, ImageData):
        return data
    if isinstance(data, Mapping) and data.get("type") == "ImageData":
        image = from_json(data)
        if not isinstance(image, ImageData):
            raise CodecError(f"not an image: {type(image).__name__}")
        return image
    if isinstance(data, Mapping):
        return ImageData(
            str(data["media_type"]), str(data["data"]), str(data.get("source_name", ""))
        )
    raise CodecError(f"not an image: {type(data).__name__}")


def images(content: Mapping[str, Any]) -> tuple[ImageData, ...]:
    return tuple(_image(i) for i in content.get("images") or ())


def _image_block(image: ImageData) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.media_type, "data": image.data}
    return {"type": "image", "source": source}


def _api_block(block: ContentBlock) -> dict[str, Any] | None:
    """One assistant block; blocks the API would reject (empty text, unsigned thinking) drop.

    Blocks phoenix does not interpret (RawBlock) and citations go back exactly as
    the API sent them: it requires that of redacted_thinking and paused server
    tool calls."""
    if isinstance(block, RawBlock):
        raw: dict[str, Any] = _plain_copy(block.data)
        return raw
    if isinstance(block, CitedTextBlock) and block.citations:
        cites = [_plain_copy(c.data) for c in block.citations]
        return {"type": "text", "text": block.text, "citations": cites}
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    tool_input = dict(block.input) if block.input_error is None else {}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input}


def _plain_copy(data: Any) -> Any:
    """A deep copy of JSON data with its key order, so a request never aliases the history."""
    if isinstance(data, Mapping):
        return {str(k): _plain_copy(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain_copy(v) for v in data]
    return data


def _tool_result_block(content: Mapping[str, Any]) -> dict[str, Any]:
    text = str(content.get("content") or "") or "(no output)"
    pics = images(content)
    body: Any = [{"type": "text", "text": text}, *map(_image_block, pics)] if pics else text
    return {
        "type": "tool_result",
        "tool_use_id": str(content.get("tool_use_id")),
        "content": body,
        "is_error": bool(content.get("is_error")),
    }


def _synthetic_result(tool_use_id: str, reason: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": interrupted_text(reason),
        "is_error": True,
    }


# Within one user turn: tool results first, then system notices, then the user's words.
_RANK = {MessageKind.TOOL: 0, MessageKind.SYSTEM: 1, MessageKind.USER: 2}


def _record_blocks(message: StoredMessage) -> tuple[str, int, list[dict[str, Any]]] | None:
    """One stored message as (role, rank, API blocks); None for what is never sent."""
    kind = message.kind
    if kind is MessageKind.AGENT:
        blocks = [b for b in map(_api_block, agent_blocks(message)) if b is not None]
        return "assistant", 0, blocks
    if kind is MessageKind.TOOL:
        return "user", _RANK[kind], [_tool_result_block(message.content)]
    if kind is MessageKind.SYSTEM:
        text = str(message.content.get("text") or "")
        if not text.strip():
            return None
        return "user", _RANK[kind], [{"type": "text", "text": SYSTEM_PREFIX + text}]
    if kind is MessageKind.USER:
        content = message.content
        text = str(content.get("text") or "")
        blocks = [{"type": "text", "text": text}] if text.strip() else []
        blocks += [_image_block(i) for i in images(content)]
        return "user", _RANK[kind], blocks
    return None  # continuation and error messages are shown, never sent.


_Group = tuple[str, list[tuple[int, dict[str, Any]]]]


def _settle(group: _Group, open_calls: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages one finished group of blocks becomes, and the calls it leaves open."""
    role, ranked = group
    out: list[dict[str, Any]] = []
    if role == "assistant":
        if open_calls:  # an assistant turn right after unanswered calls
            results = [_synthetic_result(i, "missing from the history") for i in open_calls]
            out.append({"role": "user", "content": results})
        blocks = [b for _, b in ranked]
        out.append({"role": "assistant", "content": blocks})
        return out, [b["id"] for b in blocks if b["type"] == "tool_use"]
    firsts: dict[str, dict[str, Any]] = {}  # the first result for an id wins
    for _, b in ranked:
        if b["type"] == "tool_result" and b["tool_use_id"] not in firsts:
            firsts[b["tool_use_id"]] = b
    paired = [firsts.get(i) or _synthetic_result(i, "missing from the history") for i in open_calls]
    rest = [b for rank, b in sorted(ranked, key=lambda rb: rb[0]) if rank > 0]
    turn = paired + rest
    if turn:
        out.append({"role": "user", "content": turn})
    return out, []


def _append_merged(merged: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append, merging into a last message of the same role (roles must alternate even
    around dropped items); the merged message is a new dict, so a list handed out
    before never changes."""
    if not merged and message["role"] != "user":
        merged.append({"role": "user", "content": [{"type": "text", "text": "(start)"}]})
    if merged and merged[-1]["role"] == message["role"]:
        merged[-1] = {
            "role": message["role"],
            "content": [*merged[-1]["content"], *message["content"]],
        }
    else:
        merged.append(message)


class ApiMessages:
    """`to_api_messages` of a history that only grows, kept up to date message by message.

    Every request of a conversation re-sends its whole history, and a notebook
    conversation grows to thousands of messages: converting all of them for each
    request would make every round cost more than the last. Each stored message is
    decoded once (`extend`); blocks gather in groups of one role, and a group becomes
    messages once the next role begins (nothing later can change it). `messages()`
    adds only the group still open, so a request costs what the last round added.
    The lists and blocks handed out are shared by later requests: callers copy what
    they change (the cache planner does).
    """

    def __init__(self) -> None:
        self.count = 0  # messages fed so far
        self.tool_names: set[str] = set()  # every tool the history calls
        self._merged: list[dict[str, Any]] = []  # the settled groups' messages
        self._open: list[str] = []  # calls the settled groups leave unanswered
        self._group: _Group | None = None  # the last group, which may still grow

    def extend(self, history: Iterable[MessageLike]) -> None:
        """Take the next stored messages, in order (rows are parsed; the runtime's
        history is parsed already, so a message is never parsed twice)."""
        for message in history:
            converted = _record_blocks(as_stored(message))
            self.count += 1
            if converted is None:
                continue
            role, rank, blocks = converted
            if not blocks:
                continue
            for block in blocks:
                if block["type"] == "tool_use":
                    self.tool_names.add(str(block["name"]))
            group = self._group
            if group is not None and group[0] == role:
                group[1].extend((rank, b) for b in blocks)
                continue
            if group is not None:
                settled, self._open = _settle(group, self._open)
                for message in settled:
                    _append_merged(self._merged, message)
            self._group = (role, [(rank, b) for b in blocks])

    def messages(self) -> list[dict[str, Any]]:
        """The API `messages` for the history fed so far, always valid to send."""
        merged = list(self._merged)
        open_calls = self._open
        if self._group is not None:
            settled, open_calls = _settle(self._group, open_calls)
            for message in settled:
                _append_merged(merged, message)
        if open_calls:
            results = [_synthetic_result(i, "missing from the history") for i in open_calls]
            _append_merged(merged, {"role": "user", "content": results})
        return merged


def to_api_messages(history: Sequence[MessageLike]) -> list[dict[str, Any]]:
    """The history as Anthropic Messages API `messages`, always valid to send."""
    api = ApiMessages()
    api.extend(history)
    return api.messages()


def _walk(history: Sequence[MessageLike]) -> tuple[list[str], list[ToolUseBlock]]:
    """Problems found, and the tool_uses still unanswered at the end."""
    problems: list[str] = []
    seen_ids: set[str] = set()
    open_calls: list[ToolUseBlock] = []
    for n, item in enumerate(history):
        try:
            message = as_stored(item)
        except BadStoredMessage as exc:
            problems.append(f"message {n}: {exc.problem}")
            continue
        kind = message.kind
        try:
            if kind is MessageKind.AGENT:
                for call in open_calls:
                    problems.append(
                        f"message {n}: tool_use {call.id} ({call.name}) was not answered "
                        "before the next agent message"
                    )
                open_calls = []
                for block in agent_blocks(message):
                    if isinstance(block, ToolUseBlock):
                        if block.id in seen_ids:
                            problems.append(f"message {n}: duplicate tool_use id {block.id}")
                        seen_ids.add(block.id)
                        open_calls.append(block)
            elif kind is MessageKind.TOOL:
                tool_use_id = message.content.get("tool_use_id")
                ids = [c.id for c in open_calls]
                if tool_use_id not in ids:
                    problems.append(
                        f"message {n}: tool_result for {tool_use_id!r}, which is not an "
                        "unanswered tool_use"
                    )
                else:
                    if ids[0] != tool_use_id:
                        problems.append(
                            f"message {n}: tool_result for {tool_use_id} answered out of order "
                            f"(expected {ids[0]})"
                        )
                    open_calls = [c for c in open_calls if c.id != tool_use_id]
        except (CodecError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"message {n}: unreadable {kind} content: {exc}")
    return problems, open_calls


def unanswered_tool_uses(history: Sequence[MessageLike]) -> list[ToolUseBlock]:
    """Tool calls of the last agent message that have no result yet (in order)."""
    return _walk(history)[1]


def validate_chain(history: Sequence[MessageLike]) -> list[str]:
    """What is wrong with the stored chain; empty means every tool_use is answered
    exactly once, in order, before the next agent message."""
    problems, open_calls = _walk(history)
    problems += [f"tool_use {c.id} ({c.name}) has no result" for c in open_calls]
    return problems


def repair_chain(
    history: Sequence[MessageLike], reason: str = DEFAULT_REPAIR_REASON
) -> list[StoredMessage]:
    """Messages to append so that every trailing tool_use has a result.

    Holes in the middle of a history cannot be fixed by appending; those are
    reported by `validate_chain` and bridged by `to_api_messages`.
    """
    return [
        StoredMessage(
            MessageKind.TOOL,
            {
                "tool_use_id": call.id,
                "content": interrupted_text(reason),
                "is_error": True,
                "images": [],
            },
        )
        for call in unanswered_tool_uses(history)
    ]
