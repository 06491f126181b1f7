"""The shared vocabulary of phoenix_nb: values every layer speaks.

Executors (llm/, tools/, store/) import these types and nothing else from the
core's internals, so they stay independent of how `transition` is written.
Everything here is an immutable dataclass or a string enum, free of I/O, and
round-trips through JSON with `to_json` / `from_json` (see `codec.py`): the
state machine persists states and events built from these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from phoenix_nb.core.changes import ToolChanges
from phoenix_nb.core.displays import ToolDisplay


class ErrorKind(StrEnum):
    """Why a request failed, as the UI shows it (REQ-BED-006)."""

    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"
    SERVER_ERROR = "server_error"
    INVALID_REQUEST = "invalid_request"
    CONTEXT_EXHAUSTED = "context_exhausted"
    UNKNOWN = "unknown"


class Mode(StrEnum):
    """Conversation mode (REQ-BED-014): Restricted is read-only, kernel-enforced."""

    RESTRICTED = "restricted"
    UNRESTRICTED = "unrestricted"


@dataclass(frozen=True)
class Usage:
    """Token counts of one LLM response (REQ-BED-012)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    # The part of cache_creation_input_tokens written with a 1-hour lifetime (billed 2x
    # input, not 1.25x); the API reports it in usage.cache_creation.
    cache_creation_1h_input_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """Tokens the context holds after this response: every input kind plus output."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )


@dataclass(frozen=True)
class ImageData:
    """An image ready for the API: base64 data of a type the API accepts."""

    media_type: str  # image/png | image/jpeg | image/gif | image/webp
    data: str  # base64, no data: prefix
    source_name: str = ""  # what the user attached (file name, "figure"), for display


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class Citation:
    """One source a text block cites, exactly as the API sent it (sent back unchanged)."""

    data: Mapping[str, Any]

    def field(self, name: str) -> str:
        value = self.data.get(name)
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class CitedTextBlock(TextBlock):
    """Text with the sources it cites (web search, documents, search results).

    A subclass so that everything reading text keeps working; a separate type so
    that plain text keeps its short encoding.
    """

    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class ThinkingBlock:
    thinking: str
    signature: str = ""


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool call from the model.

    `input_error` is set when the model's input could not be used as it is
    (truncated by max_tokens, invalid JSON): the call is then never executed but
    answered with an error result, so the history stays valid and the model can
    recover.
    """

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    input_error: str | None = None


@dataclass(frozen=True)
class RawBlock:
    """A block the API returned that phoenix does not interpret, kept verbatim.

    redacted_thinking, server_tool_use and its *_tool_result, mcp_tool_use /
    mcp_tool_result, compaction, container_upload and any type not known today:
    the API expects them back exactly as sent (a redacted_thinking before a
    tool_use, a paused server tool call after pause_turn), so `data` is the
    block's JSON object, never rewritten.
    """

    data: Mapping[str, Any]

    @property
    def kind(self) -> str:
        value = self.data.get("type")
        return value if isinstance(value, str) else ""


# Raw block types that are calls of tools the API (or an MCP server) runs itself.
SERVER_TOOL_CALL_TYPES = frozenset({"server_tool_use", "mcp_tool_use"})


def is_server_tool_result(kind: str) -> bool:
    """`web_search_tool_result`, `code_execution_tool_result`, `mcp_tool_result`, ..."""
    return kind.endswith("_tool_result") and kind != "tool_result"


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock | RawBlock


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool_use.

    `content` is what the model reads; `display` is the tool's typed data for the
    UI (a diff, an exit status, a command; `core.displays`) that is never sent to
    the model; `changes` is what the call changed on disk, set by the checkpoint
    recorder. Both become JSON only when the result is stored (`tool_message`).
    `approval` is set only on the answer to an upgrade request the user (or a
    cancel, or a restart) decided, so the record reads the decision from a field
    instead of from the reply's wording.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    display: ToolDisplay | None = None
    images: tuple[ImageData, ...] = ()
    approval: ApprovalDecision | None = None
    changes: ToolChanges | None = None


class ApprovalDecision(StrEnum):
    """How an upgrade request was answered; stored as the tool message's `approval`."""

    APPROVED = "approved"
    DENIED = "denied"


@dataclass(frozen=True)
class LlmFailure:
    """One failed LLM request, classified once by the provider.

    `retry_after` is the server's own delay in seconds (retry-after /
    retry-after-ms), which overrides the state machine's backoff.
    """

    kind: ErrorKind
    message: str
    retryable: bool
    retry_after: float | None = None
    status: int | None = None


@dataclass(frozen=True)
class SubAgentTask:
    """One task of a spawn_agents call, with the key its result will come back under."""

    agent_id: str  # deterministic: f"{tool_use_id}/{index}"
    task: str
    cwd: str | None = None  # None: the parent's working directory


# Outcome statuses a sub-agent can end with (REQ-BED-008).
SubAgentStatus = Literal["success", "failure", "timeout", "cancelled"]


@dataclass(frozen=True)
class SubAgentOutcome:
    """How a sub-agent ended, as its parent's tool result reports it."""

    status: SubAgentStatus
    result: str  # the submitted result, or why it failed
    kind: ErrorKind | None = None  # failures only (ErrorKind.CONTEXT_EXHAUSTED, ...)
    conversation_id: str = ""
