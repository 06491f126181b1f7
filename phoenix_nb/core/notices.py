"""What the core tells watchers beyond the state itself: the kinds of `Notify`.

One enum shared by the producer (core/transition.py) and every consumer (the
runtime publishes each as an update of the same kind; the notebook shows
them), so a misspelt kind fails type-checking instead of never matching. It is
a StrEnum: each member equals the word watchers have always received. The
kinds that carry data carry one of the frozen dataclasses below, so a renamed
field fails type-checking instead of reaching a watcher as a missing key.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Notice(StrEnum):
    CANCELLED = "cancelled"
    UPGRADE_REQUESTED = "upgrade_requested"  # data: UpgradeRequested
    UPGRADE_DENIED = "upgrade_denied"
    MODE_CHANGED = "mode_changed"  # data: ModeChanged
    RETRY = "retry"  # data: RetryScheduled
    ERROR = "error"
    REFUSAL = "refusal"  # the model declined (stop_reason "refusal")
    MAX_TOKENS = "max_tokens"  # the response was cut at max_tokens
    CONTINUATION_STARTED = "continuation_started"  # data: ContinuationStarted
    CONTEXT_EXHAUSTED = "context_exhausted"  # data: ContextSummarised
    SUB_AGENT_FINISHED = "sub_agent_finished"  # data: SubAgentFinished


@dataclass(frozen=True)
class UpgradeRequested:
    reason: str
    tool_use_id: str


@dataclass(frozen=True)
class ModeChanged:
    mode: str  # a `Mode` value


@dataclass(frozen=True)
class RetryScheduled:
    attempt: int
    max: int
    delay: float
    kind: str  # an `ErrorKind` value
    message: str


@dataclass(frozen=True)
class ContinuationStarted:
    rejected: int  # tool calls left unexecuted for the summary


@dataclass(frozen=True)
class ContextSummarised:
    summary: str


@dataclass(frozen=True)
class SubAgentFinished:
    agent_id: str
    status: str  # a `SubAgentStatus` value


NoticeData = (
    UpgradeRequested
    | ModeChanged
    | RetryScheduled
    | ContinuationStarted
    | ContextSummarised
    | SubAgentFinished
)


# The payload each kind carries (None: the kind alone says it). `Notify` checks it,
# so a notice built with another kind's data fails where it is made.
PAYLOAD_OF: dict[Notice, type[NoticeData] | None] = {
    Notice.CANCELLED: None,
    Notice.UPGRADE_REQUESTED: UpgradeRequested,
    Notice.UPGRADE_DENIED: None,
    Notice.MODE_CHANGED: ModeChanged,
    Notice.RETRY: RetryScheduled,
    Notice.ERROR: None,
    Notice.REFUSAL: None,
    Notice.MAX_TOKENS: None,
    Notice.CONTINUATION_STARTED: ContinuationStarted,
    Notice.CONTEXT_EXHAUSTED: ContextSummarised,
    Notice.SUB_AGENT_FINISHED: SubAgentFinished,
}
