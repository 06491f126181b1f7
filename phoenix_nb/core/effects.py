"""Effects `transition` asks the runtime to perform, in the order given.

Order within one transition: PersistMessage(s) first, then requests, tools,
timers and aborts, then notifications; the runtime persists the new state
before running any of them (REQ-BED-007).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phoenix_nb.core.notices import PAYLOAD_OF, Notice, NoticeData
from phoenix_nb.core.stored import MessageKind
from phoenix_nb.core.values import SubAgentOutcome, SubAgentTask, ToolUseBlock, Usage


@dataclass(frozen=True)
class PersistMessage:
    """Append one message; `content` is the JSON object docs/stored-messages.md gives
    for its kind (the runtime stores it as a `StoredMessage`)."""

    kind: MessageKind
    content: Mapping[str, Any] = field(default_factory=dict)
    display: Mapping[str, Any] | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class RequestLlm:
    """Send the persisted history (with tools) to the model."""


@dataclass(frozen=True)
class ExecuteTool:
    call: ToolUseBlock


@dataclass(frozen=True)
class ScheduleRetry:
    """After `delay` seconds, send RetryTimeout(attempt)."""

    delay: float
    attempt: int


@dataclass(frozen=True)
class RequestContinuation:
    """Ask for a summary with no tools; the prompt is `continuation_prompt(rejected_calls)`."""

    rejected_calls: tuple[ToolUseBlock, ...] = ()


@dataclass(frozen=True)
class SpawnSubAgents:
    """Start these sub-agents; `timeout` is the seconds the call asked for each (None:
    it asked for none, or for no positive number), which the runtime clamps to its limit."""

    tool_use_id: str
    tasks: tuple[SubAgentTask, ...]
    timeout: float | None = None


@dataclass(frozen=True)
class CancelSubAgents:
    agent_ids: tuple[str, ...]


@dataclass(frozen=True)
class AbortLlm:
    pass


@dataclass(frozen=True)
class AbortTool:
    tool_use_id: str


@dataclass(frozen=True)
class Notify:
    """Tell watchers something the state alone does not say (retry, mode change ...)."""

    kind: Notice
    data: NoticeData | None = None

    def __post_init__(self) -> None:
        expected = PAYLOAD_OF[self.kind]
        if (expected is None) != (self.data is None) or (
            expected is not None and not isinstance(self.data, expected)
        ):
            raise TypeError(f"a {self.kind} notice carries {expected}, not {self.data!r}")


@dataclass(frozen=True)
class NotifyParent:
    """A sub-agent ended: report to the parent conversation."""

    outcome: SubAgentOutcome


Effect = (
    PersistMessage
    | RequestLlm
    | ExecuteTool
    | ScheduleRetry
    | RequestContinuation
    | SpawnSubAgents
    | CancelSubAgents
    | AbortLlm
    | AbortTool
    | Notify
    | NotifyParent
)
