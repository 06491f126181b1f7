"""What the core tells watchers beyond the state itself: the kinds of `Notify`.

One enum shared by the producer (core/transition.py) and every consumer (the
runtime publishes each as an update of the same kind; the notebook shows
them), so a misspelt kind fails type-checking instead of never matching. It is
a StrEnum: each member equals the word watchers have always received.
"""

from __future__ import annotations

from enum import StrEnum


class Notice(StrEnum):
    CANCELLED = "cancelled"
    UPGRADE_REQUESTED = "upgrade_requested"  # data: {"reason", "tool_use_id"}
    UPGRADE_DENIED = "upgrade_denied"
    MODE_CHANGED = "mode_changed"  # data: {"mode"}
    RETRY = "retry"  # data: {"attempt", "max", "delay", "kind", "message"}
    ERROR = "error"
    REFUSAL = "refusal"  # the model declined (stop_reason "refusal")
    MAX_TOKENS = "max_tokens"  # the response was cut at max_tokens
    CONTINUATION_STARTED = "continuation_started"  # data: {"rejected"}
    CONTEXT_EXHAUSTED = "context_exhausted"  # data: {"summary"}
    SUB_AGENT_FINISHED = "sub_agent_finished"
