"""Where a stored conversation resumes after the kernel restarts (REQ-BED-007).

Nothing that was in flight survives a restart (no request, no tool process, no
sub-agent task), so every live conversation comes back Idle with its mode and
its complete history, and every call left without a result is answered so the
history stays sendable. Terminal states (context exhausted, a finished
sub-agent) stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from phoenix_nb.core.messages import repair_chain, unanswered_tool_uses
from phoenix_nb.core.states import (
    AwaitingModeApproval,
    AwaitingSubAgents,
    ConvState,
    Failed,
    Idle,
)
from phoenix_nb.core.stored import MessageKind, MessageLike, StoredMessage
from phoenix_nb.core.transition import sub_agents_result
from phoenix_nb.core.values import ApprovalDecision, ErrorKind, SubAgentOutcome

UPGRADE_NOT_APPROVED_RESULT = (
    "Not approved: the kernel restarted before the user answered the upgrade request. "
    "You remain in Restricted mode; ask again if you still need write access."
)
SUB_AGENT_RESTART_ERROR = "Interrupted by a kernel restart before it submitted a result."


def _tool(tool_use_id: str, text: str, is_error: bool, **more: Any) -> StoredMessage:
    content = {"tool_use_id": tool_use_id, "content": text, "is_error": is_error, "images": []}
    return StoredMessage(MessageKind.TOOL, {**content, **more})


def _not_approved(tool_use_id: str) -> StoredMessage:
    denied = ApprovalDecision.DENIED.value
    return _tool(tool_use_id, UPGRADE_NOT_APPROVED_RESULT, True, approval=denied)


def restore(
    state: ConvState, history: Sequence[MessageLike], *, is_sub_agent: bool = False
) -> tuple[ConvState, list[StoredMessage]]:
    """The state to resume in and the messages to append first, in order."""
    if state.terminal:
        return state, repair_chain(history)
    phase = state.phase
    messages: list[StoredMessage] = []
    # The state is committed before the messages of its transition (two journals):
    # a kill in between leaves a phase naming a call the history does not hold.
    # Only a call the history holds, unanswered, gets an answer.
    open_ids = {call.id for call in unanswered_tool_uses(history)}
    if isinstance(phase, AwaitingModeApproval) and phase.tool_use_id in open_ids:
        messages.append(_not_approved(phase.tool_use_id))
    elif isinstance(phase, AwaitingSubAgents) and phase.tool_use_id in open_ids:
        missing = SubAgentOutcome("failure", SUB_AGENT_RESTART_ERROR, ErrorKind.UNKNOWN)
        result = sub_agents_result(phase, phase.completed, missing)
        messages.append(_tool(result.tool_use_id, result.content, result.is_error))
    messages += repair_chain([*history, *messages])
    resumed = Failed(SUB_AGENT_RESTART_ERROR, ErrorKind.UNKNOWN) if is_sub_agent else Idle()
    return replace(state, phase=resumed), messages
