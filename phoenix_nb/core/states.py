"""Conversation states of the Bedrock machine (seeds 001, 003; REQ-BED-001..024).

A `ConvState` is one immutable value holding the phase (what the conversation
is doing) and everything that must outlive a single phase: the mode, the last
usage (the context meter and the 80% warning read it), the sub-agent reminder
flag and the turn counter. It is persisted as `state` (the phase name),
`state_data` (the whole value, tagged JSON) and `mode`, so one stored record
says both what the conversation is doing and what it may do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phoenix_nb.core.models import ModelInfo, model_info
from phoenix_nb.core.prices import ModelTables
from phoenix_nb.core.values import (
    ErrorKind,
    LlmFailure,
    Mode,
    SubAgentOutcome,
    SubAgentTask,
    ToolResult,
    ToolUseBlock,
    Usage,
)

MAX_ATTEMPTS = 3  # LLM request attempts before Error (REQ-BED-006)
WARNING_THRESHOLD = 0.80  # context warning indicator (REQ-BED-023)
CONTINUATION_THRESHOLD = 0.90  # continuation flow (REQ-BED-019)
DEFAULT_MAX_SUB_AGENT_TURNS = 50
DEFAULT_MAX_TURN_ROUNDS = 100  # model responses for one user message (c.Phoenix.max_turn_rounds)


@dataclass(frozen=True)
class Idle:
    """Ready for a user message."""


@dataclass(frozen=True)
class AwaitingLlm:
    """A request is about to be sent. Transient: `transition` moves straight to
    LlmRequesting{1}; a persisted AwaitingLlm behaves like LlmRequesting{1}."""


@dataclass(frozen=True)
class LlmRequesting:
    """An LLM request is in flight (`waiting` False) or a retry timer runs (`waiting` True)."""

    attempt: int = 1
    waiting: bool = False
    failure: LlmFailure | None = None  # what the last attempt failed with (retry status)
    delay: float = 0.0  # the backoff scheduled after it


@dataclass(frozen=True)
class ToolExecuting:
    """Tools run one at a time in the model's order (REQ-BED-004)."""

    current: ToolUseBlock
    remaining: tuple[ToolUseBlock, ...] = ()
    completed: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class Cancelling:
    """Kept from seed 001 for stored states only: `transition` never enters it,
    because cancel lands in Idle at once (REQ-BED-005). A stored Cancelling
    rejects messages with "cancellation in progress" and a cancel ends it."""

    pending_tool_id: str | None = None


@dataclass(frozen=True)
class AgentDone:
    """A sub-agent that has reported, under the key it was spawned with."""

    agent_id: str
    outcome: SubAgentOutcome


@dataclass(frozen=True)
class AwaitingSubAgents:
    """A spawn_agents call waits for every sub-agent (REQ-BED-008)."""

    tool_use_id: str
    tasks: tuple[SubAgentTask, ...]
    pending: tuple[str, ...]
    completed: tuple[AgentDone, ...] = ()
    remaining: tuple[ToolUseBlock, ...] = ()  # tools after spawn_agents in the same response
    done: tuple[ToolResult, ...] = ()  # results of this response's earlier tools


@dataclass(frozen=True)
class AwaitingModeApproval:
    """request_mode_upgrade waits for the user, without timeout (REQ-BED-015)."""

    reason: str
    tool_use_id: str
    remaining: tuple[ToolUseBlock, ...] = ()
    done: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class AwaitingContinuation:
    """A tool-less summary request is in flight (REQ-BED-020)."""

    rejected_calls: tuple[ToolUseBlock, ...] = ()
    attempt: int = 1
    waiting: bool = False


@dataclass(frozen=True)
class ContextExhausted:
    """Read-only terminal state holding the continuation summary (REQ-BED-021)."""

    summary: str


@dataclass(frozen=True)
class Error:
    """A failed request the user can recover from by sending a message (REQ-BED-006)."""

    message: str
    kind: ErrorKind = ErrorKind.UNKNOWN


@dataclass(frozen=True)
class Completed:
    """A sub-agent submitted its result."""

    result: str
    success: bool = True


@dataclass(frozen=True)
class Failed:
    """A sub-agent ended without a result (error, context exhausted, turn limit, cancel)."""

    error: str
    kind: ErrorKind = ErrorKind.UNKNOWN


Phase = (
    Idle
    | AwaitingLlm
    | LlmRequesting
    | ToolExecuting
    | Cancelling
    | AwaitingSubAgents
    | AwaitingModeApproval
    | AwaitingContinuation
    | ContextExhausted
    | Error
    | Completed
    | Failed
)

TERMINAL: tuple[type, ...] = (ContextExhausted, Completed, Failed)
# Phases in which the agent is working: a user message is rejected as busy.
BUSY: tuple[type, ...] = (
    AwaitingLlm,
    LlmRequesting,
    ToolExecuting,
    Cancelling,
    AwaitingSubAgents,
    AwaitingModeApproval,
    AwaitingContinuation,
)


def phase_name(phase: Phase | type) -> str:
    """The persisted `state` name: LlmRequesting -> "llm_requesting"."""
    cls = phase if isinstance(phase, type) else type(phase)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


@dataclass(frozen=True)
class ConvState:
    phase: Phase = field(default_factory=Idle)
    mode: Mode = Mode.RESTRICTED
    last_usage: Usage | None = None  # of the last response: the context meter (REQ-BED-012)
    context_warning: bool = False  # last usage >= 80% of the window (REQ-BED-023)
    reminded: bool = False  # a sub-agent was reminded to call submit_result
    turns: int = 0  # LLM responses so far (sub-agent turn limit)
    turn_rounds: int = 0  # LLM responses since the last user message (the turn budget)

    @property
    def name(self) -> str:
        return phase_name(self.phase)

    @property
    def busy(self) -> bool:
        return isinstance(self.phase, BUSY)

    @property
    def terminal(self) -> bool:
        return isinstance(self.phase, TERMINAL)


@dataclass(frozen=True)
class TurnBudget:
    """What one turn (the work on one user message) and the whole conversation may use,
    and what they have spent so far, in dollars (the runtime keeps those figures; None
    when the model has no known price, which turns the dollar limits off).

    A limit of None is off. A runaway model (one that never stops calling tools) is
    stopped after `max_rounds` responses; a turn or a conversation that has spent its
    dollars stops after the response that reached the limit. A turn's sub-agents draw
    from the same rounds and dollars (`runtime.turn_pool`): what they used is in
    `sub_agent_rounds` and `turn_spent`.
    """

    max_rounds: int | None = DEFAULT_MAX_TURN_ROUNDS
    max_turn_cost: float | None = None
    max_conversation_cost: float | None = None
    turn_spent: float | None = None
    conversation_spent: float | None = None
    # Model requests this turn's sub-agents have started: they count toward
    # `max_rounds` with the conversation's own responses (`ConvState.turn_rounds`).
    sub_agent_rounds: int = 0


@dataclass(frozen=True)
class ConvContext:
    """Facts fixed when the conversation is created (REQ-BED-010)."""

    conversation_id: str
    cwd: str
    model: str
    is_sub_agent: bool = False
    sandbox_available: bool = True
    model_info: ModelInfo | None = None  # None: looked up from `model`
    max_sub_agent_turns: int = DEFAULT_MAX_SUB_AGENT_TURNS
    budget: TurnBudget = field(default_factory=TurnBudget)  # conversations only, not sub-agents
    tables: ModelTables = field(default_factory=ModelTables)  # the user's models and prices

    def __post_init__(self) -> None:
        if self.model_info is None:
            info = model_info(self.model, specs=self.tables.specs)
            object.__setattr__(self, "model_info", info)

    @property
    def window(self) -> int:
        assert self.model_info is not None
        return self.model_info.context_window


def context_fraction(usage: Usage | None, window: int) -> float:
    """Share of the window the context holds (REQ-BED-019: all input kinds + output)."""
    if usage is None or window <= 0:
        return 0.0
    return usage.context_tokens / window


def persisted_fields(state: ConvState) -> dict[str, Any]:
    """The conversation record's `state`, `state_data` and `mode` for this state."""
    from phoenix_nb.core.codec import to_json

    return {"state": state.name, "state_data": to_json(state), "mode": state.mode.value}


def from_persisted(record: Mapping[str, Any]) -> ConvState:
    """Inverse of `persisted_fields`; a record without state_data is Idle in its mode."""
    from phoenix_nb.core.codec import CodecError, from_json

    data = record.get("state_data")
    if not data:
        return ConvState(Idle(), Mode(record.get("mode") or Mode.RESTRICTED.value))
    state = from_json(data)
    if not isinstance(state, ConvState):
        raise CodecError(f"state_data is a {type(state).__name__}, not a ConvState")
    return state
