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
from typing import Any


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


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool_use.

    `content` is what the model reads; `display` is structured data for the UI
    (a diff, an exit status, a command) that is never sent to the model.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    display: Mapping[str, Any] | None = None
    images: tuple[ImageData, ...] = ()


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


# Stop reasons the Messages API documents; None means the stream ended early.
STOP_REASONS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)


@dataclass(frozen=True)
class SubAgentTask:
    """One task of a spawn_agents call, with the key its result will come back under."""

    agent_id: str  # deterministic: f"{tool_use_id}/{index}"
    task: str
    cwd: str | None = None  # None: the parent's working directory


# Outcome statuses a sub-agent can end with (REQ-BED-008).
SUB_AGENT_STATUSES = frozenset({"success", "failure", "timeout", "cancelled"})


@dataclass(frozen=True)
class SubAgentOutcome:
    """How a sub-agent ended, as its parent's tool result reports it."""

    status: str  # one of SUB_AGENT_STATUSES
    result: str  # the submitted result, or why it failed
    kind: ErrorKind | None = None  # failures only (ErrorKind.CONTEXT_EXHAUSTED, ...)
    conversation_id: str = ""
