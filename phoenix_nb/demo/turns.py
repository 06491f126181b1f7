"""The scripting vocabulary of the fake Messages API: turns, blocks and faults.

A scripted reply is either a `Turn` (a streamed or JSON message, optionally
with an in-stream fault) or a bare `Fault` (an HTTP error, a slow header, or
an in-stream fault played on a default turn). Everything is a plain
dataclass so a demo or a long session reads like a screenplay:

    fake.script(
        Turn([text("Let me look."), tool_use("bash", {"command": "ls"})]),
        Turn([text("Done.")]),
        Fault.status(429, retry_after=2),
    )
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from phoenix_nb.core.values import Usage

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):08d}"


@dataclass(frozen=True)
class TextSpec:
    """A text block, streamed `chunk` characters per delta with `delay` seconds between.

    `citations` (the API's citation objects) are streamed as citations_delta events.
    """

    text: str
    chunk: int = 20
    delay: float = 0.0
    citations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class ThinkingSpec:
    """A thinking block, followed by its signature delta."""

    thinking: str
    signature: str = "fake-signature"
    chunk: int = 20
    delay: float = 0.0


@dataclass(frozen=True)
class ToolUseSpec:
    """A tool call whose input is streamed as partial JSON.

    `raw_json` replaces the encoded input verbatim, to script invalid or
    truncated JSON.
    """

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""
    chunk: int = 16
    delay: float = 0.0
    raw_json: str | None = None

    def json_text(self) -> str:
        return self.raw_json if self.raw_json is not None else json.dumps(dict(self.input))


@dataclass(frozen=True)
class RawSpec:
    """Any other block, exactly as the API would send it.

    `start` is the content_block_start payload (default: `block` itself) and
    `deltas` the content_block_delta payloads that complete it; `block` is the
    finished block (the non-streamed form). Server tool calls, their results,
    redacted_thinking, compaction and types not invented yet are scripted so.
    """

    block: Mapping[str, Any]
    start: Mapping[str, Any] | None = None
    deltas: tuple[Mapping[str, Any], ...] = ()

    def start_payload(self) -> Mapping[str, Any]:
        return self.block if self.start is None else self.start


BlockSpec = TextSpec | ThinkingSpec | ToolUseSpec | RawSpec


def text(
    value: str,
    *,
    chunk: int = 20,
    delay: float = 0.0,
    citations: tuple[Mapping[str, Any], ...] | list[Mapping[str, Any]] = (),
) -> TextSpec:
    """A text block (with citations, as web search answers carry them)."""
    return TextSpec(value, chunk, delay, tuple(citations))


def raw(
    block: Mapping[str, Any],
    *,
    start: Mapping[str, Any] | None = None,
    deltas: tuple[Mapping[str, Any], ...] | list[Mapping[str, Any]] = (),
) -> RawSpec:
    """A block of any type, sent verbatim (see RawSpec)."""
    return RawSpec(dict(block), None if start is None else dict(start), tuple(deltas))


def server_tool_use(
    name: str,
    input: Mapping[str, Any] | None = None,
    *,
    id: str = "",
    kind: str = "server_tool_use",
    chunk: int = 16,
) -> RawSpec:
    """A call the API runs itself (web_search, code_execution...), input streamed as JSON."""
    call_id = id or _next_id("srvtoolu")
    body = dict(input or {})
    block = {"type": kind, "id": call_id, "name": name, "input": body}
    encoded = json.dumps(body)
    deltas = tuple(
        {"type": "input_json_delta", "partial_json": encoded[i : i + chunk]}
        for i in range(0, len(encoded), max(1, chunk))
    )
    return RawSpec(block, {"type": kind, "id": call_id, "name": name, "input": {}}, deltas)


def server_tool_result(
    tool_use_id: str, content: Any, *, kind: str = "web_search_tool_result"
) -> RawSpec:
    """The API's result of a server tool call (sent whole in content_block_start)."""
    return RawSpec({"type": kind, "tool_use_id": tool_use_id, "content": content})


def redacted_thinking(data: str = "EmwKAhgBEgy3va3pzix/LafPsn4a") -> RawSpec:
    """Reasoning the safety systems encrypted: opaque, must be sent back as it came."""
    return RawSpec({"type": "redacted_thinking", "data": data})


def thinking(value: str, *, signature: str = "fake-signature", chunk: int = 20) -> ThinkingSpec:
    """A thinking block."""
    return ThinkingSpec(value, signature, chunk)


def tool_use(
    name: str,
    input: Mapping[str, Any] | None = None,
    *,
    id: str = "",
    chunk: int = 16,
    delay: float = 0.0,
    raw_json: str | None = None,
) -> ToolUseSpec:
    """A tool_use block; a fresh `toolu_…` id unless one is given."""
    return ToolUseSpec(name, dict(input or {}), id or _next_id("toolu"), chunk, delay, raw_json)


@dataclass(frozen=True)
class Fault:
    """Something going wrong with one request. Build with the class methods."""

    kind: str
    code: int = 0
    error_type: str = ""
    message: str = ""
    retry_after: float | None = None
    retry_after_ms: float | None = None
    after_events: int = 0
    seconds: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)

    # Error types the API uses for each status, for realistic error bodies.
    STATUS_TYPES: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }

    @classmethod
    def status(
        cls,
        code: int,
        *,
        message: str = "",
        error_type: str = "",
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """An HTTP error response with the API's error body (and retry-after headers)."""
        etype = error_type or cls.STATUS_TYPES.get(
            code, "api_error" if code >= 500 else "invalid_request_error"
        )
        return cls(
            "status",
            code=code,
            error_type=etype,
            message=message or f"fake {etype}",
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
            headers=dict(headers or {}),
        )

    @classmethod
    def in_stream_error(
        cls, error_type: str = "overloaded_error", *, after_events: int = 3, message: str = ""
    ) -> Fault:
        """An `event: error` inside a 200 stream, after `after_events` events."""
        return cls(
            "in_stream_error",
            error_type=error_type,
            message=message or f"fake {error_type}",
            after_events=after_events,
        )

    @classmethod
    def drop_after(cls, n_events: int) -> Fault:
        """Close the connection mid-body (chunked, no terminator) after `n_events` events."""
        return cls("drop", after_events=n_events)

    @classmethod
    def stall(cls, seconds: float, *, after_events: int = 3) -> Fault:
        """Send nothing for `seconds` after `after_events` events, then carry on."""
        return cls("stall", seconds=seconds, after_events=after_events)

    @classmethod
    def slow_headers(cls, seconds: float) -> Fault:
        """Wait `seconds` before sending the response headers."""
        return cls("slow_headers", seconds=seconds)

    @classmethod
    def eof_without_stop(cls) -> Fault:
        """End the body cleanly without `message_delta` / `message_stop`."""
        return cls("eof_without_stop")

    @classmethod
    def malformed_json(cls, *, after_events: int = 3) -> Fault:
        """Send an event whose data is not JSON, after `after_events` events."""
        return cls("malformed_json", after_events=after_events)


@dataclass(frozen=True)
class Turn:
    """One assistant message. `stop_reason` defaults to tool_use when a tool is called.

    `usage` defaults to rough counts (4 characters a token); `fault` breaks the
    stream in the middle.
    """

    blocks: list[BlockSpec] = field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage | None = None
    fault: Fault | None = None
    model: str = ""

    def final_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUseSpec) for b in self.blocks) else "end_turn"


@dataclass(frozen=True)
class FakeRequest:
    """A request as a rule sees it (and as `fake.requests` records it)."""

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (tool results and images skipped)."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(
                b.get("text", "")
                for b in content or []
                if isinstance(b, dict) and b.get("type") == "text"
            )
        return ""

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """tool_result blocks of the last user message."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


Reply = Turn | Fault
ReplyFactory = Callable[[FakeRequest], Reply]


@dataclass(frozen=True)
class Rule:
    """Answer requests `match` accepts with `reply` (a Turn/Fault, or a function of the request)."""

    match: Callable[[FakeRequest], bool]
    reply: Reply | ReplyFactory
    times: int | None = None  # None: forever
