"""The persisted message: one parser from the stored row, one writer to it.

A conversation's history is the store's rows (docs/stored-messages.md is the
data contract). Everything that reads a history reads `StoredMessage`s: a row
is parsed once, when it is loaded from the store or appended to it, so the
readers never look up row keys and a new kind or field is written here only.

The parser is strict about what the readers rely on (a known kind, an object
as content, an object or nothing as display, a usage it can read) and raises
`BadStoredMessage` naming the row; it never changes the row, so nothing on
disk is lost by a row it refuses. It still reads rows written by older
versions: content stored as a JSON string, usage stored as plain counts.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from phoenix_nb.core.codec import CodecError, from_json, to_json
from phoenix_nb.core.values import (
    ContentBlock,
    RawBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)

__all__ = [
    "BadStoredMessage",
    "MessageKind",
    "MessageLike",
    "StoredMessage",
    "as_stored",
    "parse_history",
    "parse_usage",
]


class MessageKind(StrEnum):
    """What a stored message is: the vocabulary of the row's ``message_type``."""

    USER = "user"  # the human's words and images
    AGENT = "agent"  # one model response
    TOOL = "tool"  # one tool result
    SYSTEM = "system"  # a note the model reads with the next message
    CONTINUATION = "continuation"  # the summary that ends a conversation at its context limit
    ERROR = "error"  # a failure shown to the human, never sent to the model

    @property
    def actor(self) -> str:
        """Who wrote it (the row's ``actor_kind``)."""
        return _ACTORS[self]


_KINDS: Mapping[str, MessageKind] = {k.value: k for k in MessageKind}
_ACTORS: Mapping[MessageKind, str] = {
    MessageKind.USER: "human",
    MessageKind.AGENT: "llm_agent",
    MessageKind.TOOL: "system",
    MessageKind.SYSTEM: "system",
    MessageKind.CONTINUATION: "llm_agent",
    MessageKind.ERROR: "system",
}

# The row's keys (docs/stored-messages.md): written here and nowhere else.
_ID = "id"
_CONVERSATION = "conversation_id"
_SEQUENCE = "sequence_id"
_KIND = "message_type"
_ACTOR = "actor_kind"
_CONTENT = "content"
_DISPLAY = "display_data"
_USAGE = "usage_data"
_CREATED = "created_at"


class BadStoredMessage(CodecError):
    """A stored row that is not a message this version can read (the row is left as it is).

    The text names the row and says what is wrong; `problem` is what is wrong alone."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass(frozen=True)
class StoredMessage:
    """One message of a conversation's history, as stored.

    `content` is the kind's JSON object (docs/stored-messages.md); `display` the
    tool result's display data; `usage` the response's token counts. The store
    fills in `id`, `conversation_id`, `sequence_id` and `created_at` when it
    appends the message; a message not yet stored has them empty.
    """

    kind: MessageKind
    content: Mapping[str, Any] = field(default_factory=dict)
    display: Mapping[str, Any] | None = None
    usage: Usage | None = None
    id: str = ""
    conversation_id: str = ""
    sequence_id: int = 0
    created_at: str = ""

    @classmethod
    def parse(cls, row: object) -> StoredMessage:
        """The message a stored row holds; `BadStoredMessage` naming the row if it is none.

        The row's mappings are taken as they are (not copied): the caller hands
        over a row it owns, as the store does."""
        if not isinstance(row, Mapping):
            what = f"is a {type(row).__name__}, not an object"
            raise BadStoredMessage("a stored message", what)
        kind = row.get(_KIND)
        typed = _KINDS.get(kind) if isinstance(kind, str) else None
        if typed is None:
            raise BadStoredMessage(_where(row), f"unknown message_type {kind!r}")
        sequence = row.get(_SEQUENCE, 0)
        if type(sequence) is not int or sequence < 0:
            raise BadStoredMessage(_where(row), f"sequence_id {sequence!r} is not a count")
        display = row.get(_DISPLAY)
        if display is not None and not isinstance(display, Mapping):
            problem = f"display_data is a {type(display).__name__}"
            raise BadStoredMessage(_where(row), problem)
        usage = row.get(_USAGE)
        return cls(
            kind=typed,
            content=_content(row),
            display=display,
            usage=None if usage is None else parse_usage(usage, _where(row)),
            id=_text(row, _ID),
            conversation_id=_text(row, _CONVERSATION),
            sequence_id=sequence,
            created_at=_text(row, _CREATED),
        )

    @functools.cached_property
    def blocks(self) -> tuple[ContentBlock, ...]:
        """An agent message's content blocks, decoded on first use and kept: the request
        and the record both read every answer of a history (`CodecError` if its
        content holds something else)."""
        decoded = from_json(list(self.content.get("blocks") or []))
        for block in decoded:
            if not isinstance(block, TextBlock | ThinkingBlock | ToolUseBlock | RawBlock):
                raise CodecError(f"agent block is a {type(block).__name__}")
        return tuple(decoded)

    def row(self) -> dict[str, Any]:
        """The stored row of this message (what `parse` reads back as an equal message)."""
        return {
            _ID: self.id,
            _CONVERSATION: self.conversation_id,
            _SEQUENCE: self.sequence_id,
            _KIND: self.kind.value,
            _ACTOR: self.kind.actor,
            _CONTENT: _plain(self.content),
            _DISPLAY: _plain(self.display) if self.display is not None else None,
            _USAGE: to_json(self.usage) if self.usage is not None else None,
            _CREATED: self.created_at,
        }


MessageLike = StoredMessage | Mapping[str, Any]
"""A message, or a stored row not parsed yet (a history read straight from the store)."""


def as_stored(message: MessageLike) -> StoredMessage:
    """The message itself, or the row parsed (`BadStoredMessage` if it holds none)."""
    return message if isinstance(message, StoredMessage) else StoredMessage.parse(message)


def parse_history(rows: Iterable[MessageLike]) -> list[StoredMessage]:
    """A history's rows parsed, in order (`BadStoredMessage` at the first bad row)."""
    return [as_stored(row) for row in rows]


def _where(row: Mapping[str, Any]) -> str:
    sequence, ident = row.get(_SEQUENCE), row.get(_ID)
    if isinstance(sequence, int) and not isinstance(sequence, bool):
        return f"stored message #{sequence}" + (f" ({ident})" if isinstance(ident, str) else "")
    return f"stored message {ident!r}" if isinstance(ident, str) else "a stored message"


def _text(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key, "")
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise BadStoredMessage(_where(row), f"{key} is a {type(value).__name__}, not text")


def _content(row: Mapping[str, Any]) -> Mapping[str, Any]:
    value = row.get(_CONTENT)
    if type(value) is dict:
        return value
    if isinstance(value, str):  # rows of early versions held their content as JSON text
        try:
            value = json.loads(value)
        except ValueError as exc:
            problem = f"content is text that is not JSON: {exc}"
            raise BadStoredMessage(_where(row), problem) from None
    if not isinstance(value, Mapping):
        problem = f"content is a {type(value).__name__}, not an object"
        raise BadStoredMessage(_where(row), problem)
    return value


def parse_usage(value: object, where: str = "a stored message") -> Usage | None:
    """A row's ``usage_data``: the codec's encoding of a `Usage` (``"type": "Usage"``), or
    plain counts (older rows); `BadStoredMessage` when it is neither.

    Read field by field rather than through the generic decoder: every agent row of
    a long history has one, and loading a history parses them all."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadStoredMessage(where, f"usage_data is a {type(value).__name__}")
    tag = value.get("type", "Usage")
    if tag != "Usage":
        raise BadStoredMessage(where, f"usage_data is a {tag!r}, not a Usage")
    # The counts it names, whole numbers only (as older versions read them).
    counts = {k: v for k, v in value.items() if k in _USAGE_FIELDS and type(v) is int}
    return Usage(**counts)


_USAGE_FIELDS = frozenset(Usage.__dataclass_fields__)


def _plain(data: Any) -> Any:
    """JSON data as plain dicts and lists (tuples become lists, as the row holds them)."""
    if isinstance(data, Mapping):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(v) for v in data]
    return data
