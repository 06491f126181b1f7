"""Events the runtime feeds into `transition` (docs/architecture.md).

LLM text deltas are not events: they change no state, so the runtime streams
them to watchers directly and only the final `LlmResponse` enters the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phoenix_nb.core.values import (
    ContentBlock,
    ImageData,
    LlmFailure,
    SubAgentOutcome,
    ToolResult,
    Usage,
)


@dataclass(frozen=True)
class UserMessage:
    text: str
    images: tuple[ImageData, ...] = ()


@dataclass(frozen=True)
class UserCancel:
    pass


@dataclass(frozen=True)
class LlmResponse:
    """A complete response. A stream that ended without stop reason is an LlmError."""

    content: tuple[ContentBlock, ...] = ()
    stop_reason: str | None = "end_turn"
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class LlmError:
    """A failed request; `attempt` is the attempt it belongs to (stale ones are ignored)."""

    failure: LlmFailure
    attempt: int = 1


@dataclass(frozen=True)
class RetryTimeout:
    attempt: int


@dataclass(frozen=True)
class ToolComplete:
    result: ToolResult


@dataclass(frozen=True)
class UserApproveUpgrade:
    pass


@dataclass(frozen=True)
class UserDenyUpgrade:
    pass


@dataclass(frozen=True)
class UserRequestDowngrade:
    """Back to Restricted now. `stopped_jobs`: the commands of the background jobs
    the runtime stopped first (they ran with write access), so the note can say so."""

    stopped_jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class UserTriggerContinuation:
    pass


@dataclass(frozen=True)
class ContinuationResponse:
    summary: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ContinuationFailed:
    error: str


@dataclass(frozen=True)
class SubAgentResult:
    """A sub-agent ended; `agent_id` is the key SpawnSubAgents gave it."""

    agent_id: str
    outcome: SubAgentOutcome


Event = (
    UserMessage
    | UserCancel
    | LlmResponse
    | LlmError
    | RetryTimeout
    | ToolComplete
    | UserApproveUpgrade
    | UserDenyUpgrade
    | UserRequestDowngrade
    | UserTriggerContinuation
    | ContinuationResponse
    | ContinuationFailed
    | SubAgentResult
)
