"""The Bedrock transition function: one pure step of a conversation.

`transition(state, context, event)` returns either a `Transition` (the next
state and the effects the runtime must perform, persisting the state first)
or a `Rejection` carrying the exact text to show the user; a rejection changes
nothing. Dispatch is a table keyed by (phase type, event type) of small
handlers, so one row of seed 001's matrices is one function here.

Events that arrive in a phase that no longer expects them (a late tool result
after cancel, a retry timer for an old attempt, a response after cancel) are
ignored: a `Transition` to the same state with no effects.

LLM text deltas never pass through here: they change no state, so the runtime
streams them to watchers and only the final `LlmResponse` is an event.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.displays import AgentReport, SubAgentsDisplay, stored_display
from phoenix_nb.core.effects import (
    AbortLlm,
    AbortTool,
    CancelSubAgents,
    Effect,
    ExecuteTool,
    Notify,
    NotifyParent,
    PersistMessage,
    RequestContinuation,
    RequestLlm,
    ScheduleRetry,
    SpawnSubAgents,
)
from phoenix_nb.core.events import (
    ContinuationFailed,
    ContinuationResponse,
    Event,
    LlmError,
    LlmResponse,
    RetryTimeout,
    SubAgentResult,
    ToolComplete,
    UserApproveUpgrade,
    UserCancel,
    UserDenyUpgrade,
    UserMessage,
    UserRequestDowngrade,
    UserTriggerContinuation,
)
from phoenix_nb.core.notices import (
    ContextSummarised,
    ContinuationStarted,
    ModeChanged,
    Notice,
    RetryScheduled,
    SubAgentFinished,
    UpgradeRequested,
)
from phoenix_nb.core.prices import cost, format_usd
from phoenix_nb.core.states import (
    CONTINUATION_THRESHOLD,
    MAX_ATTEMPTS,
    WARNING_THRESHOLD,
    AgentDone,
    AwaitingContinuation,
    AwaitingLlm,
    AwaitingModeApproval,
    AwaitingSubAgents,
    Cancelling,
    Completed,
    ContextExhausted,
    ConvContext,
    ConvState,
    Error,
    Failed,
    Idle,
    LlmRequesting,
    Phase,
    ToolExecuting,
    TurnBudget,
    context_fraction,
)
from phoenix_nb.core.stored import MessageKind
from phoenix_nb.core.values import (
    ApprovalDecision,
    ErrorKind,
    LlmFailure,
    Mode,
    SubAgentOutcome,
    SubAgentStatus,
    SubAgentTask,
    ToolResult,
    ToolUseBlock,
)

# --- user-facing texts (exact; tests and the UI rely on them) -------------------

BUSY_MESSAGE = (
    "The agent is busy. Cancel the current operation (the Cancel button, "
    "`%phoenix cancel`, or interrupt the kernel) before sending a new message."
)
CANCELLING_MESSAGE = "Cancellation in progress. Wait for it to finish, then send your message."
EXHAUSTED_MESSAGE = (
    "This conversation's context is exhausted. Start a new conversation from its "
    "summary with `%phoenix continue`."
)
RESTRICTED_UNAVAILABLE_MESSAGE = (
    "Restricted mode is unavailable: the kernel sandbox (Landlock) needs Linux 5.13 "
    "or newer with Landlock enabled. This conversation can only run Unrestricted."
)
NO_UPGRADE_PENDING_MESSAGE = "There is no mode upgrade request waiting for an answer."
SUB_AGENT_FINISHED_MESSAGE = "This sub-agent has finished and takes no further messages."
SUB_AGENT_NO_UPGRADE_MESSAGE = (
    "Sub-agents stay in Restricted mode (REQ-BED-018); write access cannot be approved for one."
)
SUB_AGENT_NO_CONTINUATION_MESSAGE = (
    "Sub-agents do not continue into a new conversation; they fail at the context limit."
)

CANCELLED_RESULT = "Cancelled by the user while this tool was running."
SKIPPED_RESULT = "Skipped: the user cancelled before this tool ran."
NOT_EXECUTED_CONTEXT_RESULT = (
    "Not executed: context limit reached. The conversation is being summarised for a new one."
)
ALREADY_UNRESTRICTED_RESULT = "Already in Unrestricted mode: write access is available."
UPGRADE_APPROVED_RESULT = (
    "Approved: the user granted Unrestricted mode. Write-capable tools (patch) and "
    "unsandboxed bash are now available."
)
UPGRADE_DENIED_RESULT = (
    "Denied by the user: remain in Restricted mode (read-only). Continue with "
    "read-only work, or explain to the user what you would change and why."
)
UPGRADE_CANCELLED_RESULT = "cancelled: upgrade request not answered"
MODE_UNRESTRICTED_TEXT = (
    "Mode changed to Unrestricted: the user approved write access. patch works and "
    "bash runs without the kernel sandbox; files you change stay changed."
)
MODE_RESTRICTED_TEXT = (
    "Mode changed to Restricted by the user: the conversation is read-only again. "
    "bash runs in the kernel sandbox (no writes outside a private temp dir, no "
    "network); patch is disabled. Use request_mode_upgrade if you need write access."
)
SUB_AGENT_REMINDER_TEXT = (
    "You ended your turn without calling submit_result. Your parent conversation "
    "only receives what you submit: call submit_result now with your result (set "
    "success to false if you could not finish)."
)
SUBMITTED_RESULT = "Result submitted to the parent conversation."
SKIPPED_AFTER_SUBMIT_RESULT = "Skipped: the result was already submitted."
CONTINUATION_CANCELLED_SUMMARY = "Continuation cancelled by the user."
BUDGET_NOT_RUN_RESULT = (
    "Not executed: the turn reached its limit ({limit}) before this call ran. "
    "The user has been told and can send a message to go on."
)
MAX_SUB_AGENTS = 10

UPGRADE_TOOL = "request_mode_upgrade"
SPAWN_TOOL = "spawn_agents"
SUBMIT_TOOL = "submit_result"


@dataclass(frozen=True)
class Transition:
    state: ConvState
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True)
class Rejection:
    message: str


Outcome = Transition | Rejection
Handler = Callable[[ConvState, ConvContext, Any, Any], Outcome]

# --- message builders ----------------------------------------------------------


def user_message(event: UserMessage) -> PersistMessage:
    return PersistMessage(MessageKind.USER, {"text": event.text, "images": to_json(event.images)})


def tool_message(result: ToolResult) -> PersistMessage:
    content = {
        "tool_use_id": result.tool_use_id,
        "content": result.content,
        "is_error": result.is_error,
        "images": to_json(result.images),
    }
    if result.approval is not None:
        content["approval"] = result.approval.value
    return PersistMessage(MessageKind.TOOL, content, stored_display(result.display, result.changes))


def system_message(text: str) -> PersistMessage:
    return PersistMessage(MessageKind.SYSTEM, {"text": text})


def _rank(effect: Effect) -> int:
    if isinstance(effect, PersistMessage):
        return 0
    if isinstance(effect, Notify | NotifyParent):
        return 2
    return 1


def _done(state: ConvState, effects: Sequence[Effect] = ()) -> Transition:
    """Persist first, act next, notify last (stable within each rank)."""
    return Transition(state, tuple(sorted(effects, key=_rank)))


def _ignore(state: ConvState, *_: Any) -> Transition:
    return Transition(state)


def _at(state: ConvState, phase: Phase) -> ConvState:
    return replace(state, phase=phase)


# --- the turn budget -------------------------------------------------------------


@dataclass(frozen=True)
class LimitReached:
    """Which limit of the turn budget stopped the turn, and the words that say so."""

    limit: str  # the setting's name: max_turn_rounds | max_turn_cost | max_conversation_cost
    text: str


def conversation_limit(budget: TurnBudget) -> LimitReached | None:
    """The conversation's dollar limit, when what it has spent reached it."""
    spent, limit = budget.conversation_spent, budget.max_conversation_cost
    if limit is None or spent is None or spent < limit:
        return None
    return LimitReached(
        "max_conversation_cost",
        f"This conversation has spent {format_usd(spent)}, which reaches its limit of "
        f"{format_usd(limit)} (c.Phoenix.max_conversation_cost). To go on, raise the limit "
        "with `%config Phoenix.max_conversation_cost = <dollars>` (or `= None` for no "
        "limit) and send a message.",
    )


def budget_reached(
    state: ConvState, ctx: ConvContext, response: LlmResponse
) -> LimitReached | None:
    """The limit the turn has reached with this response (already counted in
    `state.turn_rounds`), if any; rounds first, then the turn's dollars, then the
    conversation's. Dollar limits need a priced model."""
    budget = ctx.budget
    reached = _rounds_reached(state, budget)
    if reached is not None:
        return reached
    price = cost(response.usage, ctx.model, ctx.tables.prices)
    if price is None:
        return None
    turn_spent = None if budget.turn_spent is None else budget.turn_spent + price
    reached = _dollars_reached(turn_spent, budget)
    if reached is not None:
        return reached
    total = None if budget.conversation_spent is None else budget.conversation_spent + price
    return conversation_limit(replace(budget, conversation_spent=total))


def _by_sub_agents(budget: TurnBudget) -> str:
    if not budget.sub_agent_rounds:
        return ""
    return (
        f" ({budget.sub_agent_rounds} of them by its sub-agents, which draw from the same "
        "budget and were stopped by it)"
    )


def _rounds_reached(state: ConvState, budget: TurnBudget) -> LimitReached | None:
    rounds = state.turn_rounds + budget.sub_agent_rounds
    if budget.max_rounds is None or rounds < budget.max_rounds:
        return None
    return LimitReached(
        "max_turn_rounds",
        f"The turn stopped after {rounds} model responses{_by_sub_agents(budget)}, its "
        "limit for one message (c.Phoenix.max_turn_rounds). Send a message to go on (the "
        "count starts again), or change the limit with `%config Phoenix.max_turn_rounds = <n>`.",
    )


def _dollars_reached(turn_spent: float | None, budget: TurnBudget) -> LimitReached | None:
    limit = budget.max_turn_cost
    if limit is None or turn_spent is None or turn_spent < limit:
        return None
    by = " (its sub-agents' spend included)" if budget.sub_agent_rounds else ""
    return LimitReached(
        "max_turn_cost",
        f"The turn stopped after spending {format_usd(turn_spent)}{by}, which reaches its "
        f"limit of {format_usd(limit)} for one message (c.Phoenix.max_turn_cost). Send "
        "a message to go on, or change the limit with "
        "`%config Phoenix.max_turn_cost = <dollars>`.",
    )


def limit_before_request(state: ConvState, ctx: ConvContext) -> LimitReached | None:
    """The limit a turn has already reached before its next request: what its
    sub-agents drew (rounds, dollars) since its own last response was checked."""
    budget = ctx.budget
    return (
        _rounds_reached(state, budget)
        or _dollars_reached(budget.turn_spent, budget)
        or conversation_limit(budget)
    )


def _stop_at_limit(
    state: ConvState,
    reached: LimitReached,
    calls: Sequence[ToolUseBlock],
    effects: list[Effect],
) -> Transition:
    """End the turn where it stands: every call of the response answered (not run), the
    limit said in a note the record shows and the model reads with the next message."""
    note = PersistMessage(MessageKind.SYSTEM, {"text": reached.text, "limit": reached.limit})
    answers = _answered(calls, BUDGET_NOT_RUN_RESULT.format(limit=reached.limit))
    return _done(_at(state, Idle()), [*effects, *answers, note])


# --- shared steps --------------------------------------------------------------


def _request_llm(state: ConvState, ctx: ConvContext, effects: list[Effect]) -> Transition:
    """Send the history to the model again, unless a sub-agent used all its turns."""
    if ctx.is_sub_agent and state.turns >= ctx.max_sub_agent_turns:
        error = (
            f"Sub-agent stopped: it used all {ctx.max_sub_agent_turns} turns "
            "without submitting a result."
        )
        return _sub_agent_failed(state, error, ErrorKind.UNKNOWN, effects)
    if not ctx.is_sub_agent:
        reached = limit_before_request(state, ctx)
        if reached is not None:  # its sub-agents used what was left of the turn
            return _stop_at_limit(state, reached, (), effects)
    return _done(_at(state, LlmRequesting(1)), [*effects, RequestLlm()])


def _sub_agent_failed(
    state: ConvState,
    error: str,
    kind: ErrorKind,
    effects: list[Effect],
    status: SubAgentStatus = "failure",
) -> Transition:
    outcome = SubAgentOutcome(status, error, kind)
    return _done(_at(state, Failed(error, kind)), [*effects, NotifyParent(outcome)])


def _stopped(state: ConvState, ctx: ConvContext, effects: list[Effect]) -> Transition:
    """Where a cancel lands: Idle for a conversation, Failed(cancelled) for a sub-agent."""
    if ctx.is_sub_agent:
        return _sub_agent_failed(
            state, "Cancelled by the parent conversation.", ErrorKind.UNKNOWN, effects, "cancelled"
        )
    return _done(_at(state, Idle()), [*effects, Notify(Notice.CANCELLED)])


def _answer(call: ToolUseBlock, text: str, is_error: bool = True) -> ToolResult:
    """The machine's own answer to a call it does not hand to a tool."""
    return ToolResult(call.id, text, is_error=is_error)


def _answered(calls: Sequence[ToolUseBlock], text: str) -> list[Effect]:
    """The persisted error answers of calls that will not run (every tool_use is answered)."""
    return [tool_message(_answer(call, text)) for call in calls]


def _spawn_tasks(call: ToolUseBlock) -> tuple[SubAgentTask, ...] | str:
    """The tasks of a spawn_agents call, or what is wrong with its input."""
    tasks = call.input.get("tasks")
    if not isinstance(tasks, list | tuple) or not tasks:
        return "spawn_agents needs 'tasks': a non-empty list of {task, cwd?} objects."
    if len(tasks) > MAX_SUB_AGENTS:
        return f"spawn_agents accepts at most {MAX_SUB_AGENTS} tasks at once (got {len(tasks)})."
    out: list[SubAgentTask] = []
    for i, item in enumerate(tasks):
        if not isinstance(item, Mapping):
            return f"spawn_agents 'tasks[{i}]' must be an object with a 'task' string."
        task, cwd = item.get("task"), item.get("cwd")
        if not isinstance(task, str) or not task.strip():
            return f"spawn_agents 'tasks[{i}].task' must be a non-empty string."
        if cwd is not None and not isinstance(cwd, str):
            return f"spawn_agents 'tasks[{i}].cwd' must be a string when given."
        out.append(SubAgentTask(f"{call.id}/{i}", task, cwd or None))
    return tuple(out)


def _spawn_timeout(call: ToolUseBlock) -> float | None:
    """The seconds a spawn_agents call asks each sub-agent to get, if it asks for a
    positive number (anything else must not disable the runtime's limit)."""
    requested = call.input.get("timeout")
    if (
        isinstance(requested, int | float)
        and not isinstance(requested, bool)
        and math.isfinite(requested)
        and requested > 0
    ):
        return float(requested)
    return None


# --- running a response's tools -------------------------------------------------
#
# The calls of a response run in order. A call the machine owns (the table below)
# is answered in place or moves the conversation to the phase that waits for it;
# any other call goes to the runtime as ExecuteTool. A step is one call's
# answer, after which the loop goes on, or a `_Stop` at the phase that waits.


@dataclass(frozen=True)
class _Stop:
    """The loop stops at this call: the conversation waits in `phase`, with `effects`."""

    phase: Phase
    effects: tuple[Effect, ...]


@dataclass(frozen=True)
class _CallAt:
    """Where the loop stands: the call, the calls after it, the results so far."""

    call: ToolUseBlock
    rest: tuple[ToolUseBlock, ...]
    done: tuple[ToolResult, ...]


Step = ToolResult | _Stop
OwnedTool = Callable[[ConvState, ConvContext, _CallAt], Step]


def _upgrade(state: ConvState, ctx: ConvContext, at: _CallAt) -> Step:
    """request_mode_upgrade: wait for the human's Approve or Deny."""
    call, rest, done = at.call, at.rest, at.done
    if ctx.is_sub_agent:
        return _answer(
            call, "request_mode_upgrade is not available to sub-agents: they stay in their mode."
        )
    if state.mode is Mode.UNRESTRICTED:
        return _answer(call, ALREADY_UNRESTRICTED_RESULT)
    reason = call.input.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return _answer(call, "request_mode_upgrade needs 'reason': a non-empty string.")
    notice = Notify(Notice.UPGRADE_REQUESTED, UpgradeRequested(reason, call.id))
    return _Stop(AwaitingModeApproval(reason, call.id, rest, done), (notice,))


def _spawn(state: ConvState, ctx: ConvContext, at: _CallAt) -> Step:
    """spawn_agents: start the sub-agents and wait for all of them."""
    call, rest, done = at.call, at.rest, at.done
    if ctx.is_sub_agent:
        return _answer(call, "spawn_agents is not available to sub-agents: sub-agents cannot nest.")
    tasks = _spawn_tasks(call)
    if isinstance(tasks, str):
        return _answer(call, tasks)
    keys = tuple(t.agent_id for t in tasks)
    phase = AwaitingSubAgents(call.id, tasks, keys, (), rest, done)
    return _Stop(phase, (SpawnSubAgents(call.id, tasks, _spawn_timeout(call)),))


def _submit(state: ConvState, ctx: ConvContext, at: _CallAt) -> Step:
    """submit_result: a sub-agent's last word; the calls after it are skipped."""
    call, rest = at.call, at.rest
    if not ctx.is_sub_agent:
        return _answer(call, "submit_result is not available here: only sub-agents submit results.")
    result, success = call.input.get("result"), call.input.get("success", True)
    if not isinstance(result, str) or not isinstance(success, bool):
        return _answer(
            call, "submit_result needs 'result' (a string) and optional 'success' (a boolean)."
        )
    outcome = SubAgentOutcome(
        "success" if success else "failure", result, None if success else ErrorKind.UNKNOWN
    )
    return _Stop(
        Completed(result, success),
        (
            tool_message(_answer(call, SUBMITTED_RESULT, is_error=False)),
            *_answered(rest, SKIPPED_AFTER_SUBMIT_RESULT),
            NotifyParent(outcome),
        ),
    )


_OWNED_TOOLS: Mapping[str, OwnedTool] = {
    UPGRADE_TOOL: _upgrade,
    SPAWN_TOOL: _spawn,
    SUBMIT_TOOL: _submit,
}


def _step(state: ConvState, ctx: ConvContext, at: _CallAt) -> Step:
    """One call: unusable input is answered, an owned tool is handled, any other runs."""
    call = at.call
    if call.input_error is not None:
        return _answer(
            call,
            f"Tool call not executed: its input was unusable ({call.input_error}). "
            "Send the call again with complete input.",
        )
    owned = _OWNED_TOOLS.get(call.name)
    if owned is not None:
        return owned(state, ctx, at)
    return _Stop(ToolExecuting(call, at.rest, at.done), (ExecuteTool(call),))


def _run_tools(
    state: ConvState,
    ctx: ConvContext,
    remaining: tuple[ToolUseBlock, ...],
    done: tuple[ToolResult, ...],
    effects: Sequence[Effect],
) -> Transition:
    """Start the next tool of a response, answering in place the calls the machine owns;
    when every call is answered, ask the model again."""
    answers: list[Effect] = []
    for index, call in enumerate(remaining):
        step = _step(state, ctx, _CallAt(call, remaining[index + 1 :], done))
        if isinstance(step, _Stop):
            return _done(_at(state, step.phase), [*effects, *answers, *step.effects])
        done = (*done, step)
        answers.append(tool_message(step))
    return _request_llm(state, ctx, [*effects, *answers])


def retry_delay(attempt: int, failure: LlmFailure) -> float:
    """Backoff after failed attempt n: the server's retry-after, else 1s, 2s, 4s ..."""
    if failure.retry_after is not None and failure.retry_after >= 0:
        return float(failure.retry_after)
    return float(2 ** (attempt - 1))


def _should_retry(attempt: int, failure: LlmFailure) -> bool:
    return failure.retryable and attempt < MAX_ATTEMPTS


def _failure_text(failure: LlmFailure) -> str:
    if failure.retryable:
        return (
            f"The request failed after {MAX_ATTEMPTS} attempts: {failure.message}. "
            "Send a message to try again."
        )
    # An authentication failure's message names the credentials its provider reads
    # (ANTHROPIC_API_KEY, OPENAI_API_KEY, AWS's or Google's): no hint is added here.
    return f"The request failed: {failure.message}. Send a message to try again."


def _retry_notice(attempt: int, delay: float, failure: LlmFailure) -> Notify:
    data = RetryScheduled(attempt, MAX_ATTEMPTS, delay, failure.kind.value, failure.message)
    return Notify(Notice.RETRY, data)


def _retry_plan(attempt: int, failure: LlmFailure) -> tuple[int, float, list[Effect]] | None:
    """The next attempt, its delay and the effects that schedule it; None when exhausted
    or not retryable. Shared by LLM requests and continuation requests (REQ-BED-006)."""
    if not _should_retry(attempt, failure):
        return None
    delay = retry_delay(attempt, failure)
    nxt = attempt + 1
    return nxt, delay, [ScheduleRetry(delay, nxt), _retry_notice(nxt, delay, failure)]


# --- handlers: user message, LLM ------------------------------------------------


def _start(state: ConvState, ctx: ConvContext, _phase: Any, event: UserMessage) -> Outcome:
    reached = None if ctx.is_sub_agent else conversation_limit(ctx.budget)
    if reached is not None:
        return Rejection(reached.text)
    state = replace(state, turn_rounds=0)
    return _done(_at(state, LlmRequesting(1)), [user_message(event), RequestLlm()])


def _on_response(
    state: ConvState, ctx: ConvContext, phase: LlmRequesting, event: LlmResponse
) -> Outcome:
    if phase.waiting:
        return Transition(state)
    fraction = context_fraction(event.usage, ctx.window)
    state = replace(
        state,
        last_usage=event.usage,
        context_warning=fraction >= WARNING_THRESHOLD,
        turns=state.turns + 1,
        turn_rounds=state.turn_rounds + 1,
    )
    content = {"blocks": to_json(event.content), "stop_reason": event.stop_reason}
    effects: list[Effect] = [PersistMessage(MessageKind.AGENT, content, None, event.usage)]
    calls = tuple(b for b in event.content if isinstance(b, ToolUseBlock))

    if fraction >= CONTINUATION_THRESHOLD or event.stop_reason == "model_context_window_exceeded":
        effects += _answered(calls, NOT_EXECUTED_CONTEXT_RESULT)
        if ctx.is_sub_agent:
            error = "Context window exhausted before the sub-agent submitted a result."
            return _sub_agent_failed(state, error, ErrorKind.CONTEXT_EXHAUSTED, effects)
        phase_next = AwaitingContinuation(calls, 1)
        effects += [
            RequestContinuation(calls),
            Notify(Notice.CONTINUATION_STARTED, ContinuationStarted(len(calls))),
        ]
        return _done(_at(state, phase_next), effects)

    if not ctx.is_sub_agent and (calls or event.stop_reason == "pause_turn"):
        reached = budget_reached(state, ctx, event)
        if reached is not None:  # the model would be asked again: stop here instead
            return _stop_at_limit(state, reached, calls, effects)
    if calls:
        return _run_tools(state, ctx, calls, (), effects)
    if event.stop_reason == "pause_turn":
        return _request_llm(state, ctx, effects)
    if ctx.is_sub_agent:
        if not state.reminded:
            effects.append(system_message(SUB_AGENT_REMINDER_TEXT))
            return _request_llm(replace(state, reminded=True), ctx, effects)
        error = "The sub-agent ended its turn twice without calling submit_result."
        return _sub_agent_failed(state, error, ErrorKind.UNKNOWN, effects)
    if event.stop_reason in ("refusal", "max_tokens"):
        effects.append(Notify(Notice(event.stop_reason)))
    return _done(_at(state, Idle()), effects)


def _on_llm_error(
    state: ConvState, ctx: ConvContext, phase: LlmRequesting, event: LlmError
) -> Outcome:
    if phase.waiting or event.attempt != phase.attempt:
        return Transition(state)
    failure = event.failure
    plan = _retry_plan(phase.attempt, failure)
    if plan is not None:
        nxt, delay, effects = plan
        return _done(_at(state, LlmRequesting(nxt, True, failure, delay)), effects)
    message = _failure_text(failure)
    if ctx.is_sub_agent:
        return _sub_agent_failed(state, message, failure.kind, [])
    error = PersistMessage(MessageKind.ERROR, {"text": message, "kind": failure.kind.value})
    return _done(_at(state, Error(message, failure.kind)), [error, Notify(Notice.ERROR)])


def _on_retry(
    state: ConvState, ctx: ConvContext, phase: LlmRequesting, event: RetryTimeout
) -> Outcome:
    if not phase.waiting or event.attempt != phase.attempt:
        return Transition(state)
    return _done(_at(state, replace(phase, waiting=False)), [RequestLlm()])


def _cancel_llm(state: ConvState, ctx: ConvContext, _phase: Any, _event: Any) -> Outcome:
    return _stopped(state, ctx, [AbortLlm()])


# --- handlers: tools -----------------------------------------------------------


def _on_tool_complete(
    state: ConvState, ctx: ConvContext, phase: ToolExecuting, event: ToolComplete
) -> Outcome:
    result = event.result
    if result.tool_use_id != phase.current.id:
        return Rejection(
            f"No running tool has id {result.tool_use_id!r} "
            f"(the running tool is {phase.current.id!r})."
        )
    effects: list[Effect] = [tool_message(result)]
    return _run_tools(state, ctx, phase.remaining, (*phase.completed, result), effects)


def _cancel_tools(state: ConvState, ctx: ConvContext, phase: ToolExecuting, _e: Any) -> Outcome:
    effects: list[Effect] = [
        *_answered((phase.current,), CANCELLED_RESULT),
        *_answered(phase.remaining, SKIPPED_RESULT),
        AbortTool(phase.current.id),
    ]
    return _stopped(state, ctx, effects)


# --- handlers: mode ------------------------------------------------------------


def _approve(state: ConvState, ctx: ConvContext, phase: AwaitingModeApproval, _e: Any) -> Outcome:
    if ctx.is_sub_agent and ctx.sandbox_available:
        # Unreachable through transition() (sub-agents never enter approval), but
        # the invariant must hold from any state, e.g. one restored from a store.
        return Rejection(SUB_AGENT_NO_UPGRADE_MESSAGE)
    state = replace(state, mode=Mode.UNRESTRICTED)
    result = ToolResult(
        phase.tool_use_id, UPGRADE_APPROVED_RESULT, approval=ApprovalDecision.APPROVED
    )
    effects: list[Effect] = [
        tool_message(result),
        system_message(MODE_UNRESTRICTED_TEXT),
        Notify(Notice.MODE_CHANGED, ModeChanged(Mode.UNRESTRICTED.value)),
    ]
    return _run_tools(state, ctx, phase.remaining, (*phase.done, result), effects)


def _deny(state: ConvState, ctx: ConvContext, phase: AwaitingModeApproval, _e: Any) -> Outcome:
    result = ToolResult(
        phase.tool_use_id, UPGRADE_DENIED_RESULT, True, approval=ApprovalDecision.DENIED
    )
    effects: list[Effect] = [tool_message(result), Notify(Notice.UPGRADE_DENIED)]
    return _run_tools(state, ctx, phase.remaining, (*phase.done, result), effects)


def _cancel_approval(
    state: ConvState, ctx: ConvContext, phase: AwaitingModeApproval, _e: Any
) -> Outcome:
    effects: list[Effect] = [
        tool_message(
            ToolResult(
                phase.tool_use_id,
                UPGRADE_CANCELLED_RESULT,
                True,
                approval=ApprovalDecision.DENIED,
            )
        ),
        *_answered(phase.remaining, SKIPPED_RESULT),
    ]
    return _stopped(state, ctx, effects)


def stopped_jobs_text(commands: Sequence[str]) -> str:
    """The note's line for background jobs stopped because they had write access."""
    shown = "\n".join(f"- {_code_span(' '.join(c.split())[:200])}" for c in commands)
    return (
        f"Stopped {len(commands)} background job(s) that ran with write access, and "
        f"every process they started:\n{shown}"
    )


def _code_span(text: str) -> str:
    """`text` as one Markdown code span, whatever backquotes it holds (CommonMark)."""
    longest = 0
    run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def _downgrade(
    state: ConvState, ctx: ConvContext, _phase: Any, event: UserRequestDowngrade
) -> Outcome:
    """Immediate, in any live phase, never touching a running tool (REQ-BED-016).

    Background jobs are not tool calls: they outlive the call that started them
    with the mode it had, so the runtime stops them first and the note names them.
    """
    if not ctx.sandbox_available:
        return Rejection(RESTRICTED_UNAVAILABLE_MESSAGE)
    if state.mode is Mode.RESTRICTED:
        return Transition(state)
    text = MODE_RESTRICTED_TEXT
    if event.stopped_jobs:
        text = f"{text}\n\n{stopped_jobs_text(event.stopped_jobs)}"
    effects: list[Effect] = [
        system_message(text),
        Notify(Notice.MODE_CHANGED, ModeChanged(Mode.RESTRICTED.value)),
    ]
    return _done(replace(state, mode=Mode.RESTRICTED), effects)


# --- handlers: sub-agents ------------------------------------------------------


CANCELLED_OUTCOME = SubAgentOutcome("cancelled", "Cancelled by the user before it finished.")


def sub_agents_result(
    phase: AwaitingSubAgents,
    completed: Sequence[AgentDone],
    missing: SubAgentOutcome = CANCELLED_OUTCOME,
) -> ToolResult:
    """One result for a spawn_agents call: every task's outcome, in request order;
    `missing` stands for agents that never reported."""
    by_id = {d.agent_id: d.outcome for d in completed}
    lines = [f"Results of {len(phase.tasks)} sub-agent(s):"]
    agents: list[AgentReport] = []
    for i, task in enumerate(phase.tasks, 1):
        outcome = by_id.get(task.agent_id, missing)
        lines.append(f"\n## Task {i}: {task.task}\nStatus: {outcome.status}\n{outcome.result}")
        agents.append(
            AgentReport(
                agent_id=task.agent_id,
                task=task.task,
                outcome=outcome.status,
                result=outcome.result,
                conversation_id=outcome.conversation_id,
            )
        )
    failed = all(a.outcome != "success" for a in agents)
    display = SubAgentsDisplay(tuple(agents))
    return ToolResult(phase.tool_use_id, "\n".join(lines), failed, display)


def _on_sub_agent(
    state: ConvState, ctx: ConvContext, phase: AwaitingSubAgents, event: SubAgentResult
) -> Outcome:
    if event.agent_id not in phase.pending:
        return Rejection(f"No sub-agent {event.agent_id!r} is pending in this conversation.")
    pending = tuple(p for p in phase.pending if p != event.agent_id)
    completed = (*phase.completed, AgentDone(event.agent_id, event.outcome))
    if pending:
        phase_next = replace(phase, pending=pending, completed=completed)
        data = SubAgentFinished(event.agent_id, event.outcome.status)
        return _done(_at(state, phase_next), [Notify(Notice.SUB_AGENT_FINISHED, data)])
    result = sub_agents_result(phase, completed)
    effects: list[Effect] = [tool_message(result)]
    return _run_tools(state, ctx, phase.remaining, (*phase.done, result), effects)


def _cancel_sub_agents(
    state: ConvState, ctx: ConvContext, phase: AwaitingSubAgents, _e: Any
) -> Outcome:
    effects: list[Effect] = [
        tool_message(sub_agents_result(phase, phase.completed)),
        *_answered(phase.remaining, SKIPPED_RESULT),
        CancelSubAgents(phase.pending),
    ]
    return _stopped(state, ctx, effects)


# --- handlers: continuation ----------------------------------------------------


def continuation_prompt(rejected_calls: Sequence[ToolUseBlock]) -> str:
    """The tool-less summary request (REQ-BED-020), naming calls that were not run."""
    prompt = (
        "The conversation context is nearly full. Write a brief continuation summary "
        "that could seed a new conversation. Include:\n"
        "1. The current task and its status\n"
        "2. Key files, findings and decisions\n"
        "3. Suggested next steps\n"
        "Keep it concise."
    )
    if rejected_calls:
        names = "\n".join(f"- {c.name} ({c.id})" for c in rejected_calls)
        prompt += (
            "\n\nThese tool calls were requested but not executed because of the "
            f"context limit:\n{names}"
        )
    return prompt


def _begin_continuation(state: ConvState, ctx: ConvContext, _phase: Any, _e: Any) -> Outcome:
    if ctx.is_sub_agent:
        return Rejection(SUB_AGENT_NO_CONTINUATION_MESSAGE)
    effects: list[Effect] = [
        RequestContinuation(()),
        Notify(Notice.CONTINUATION_STARTED, ContinuationStarted(0)),
    ]
    return _done(_at(state, AwaitingContinuation((), 1)), effects)


def _exhausted(state: ConvState, summary: str, effects: list[Effect]) -> Transition:
    effects = [
        *effects,
        PersistMessage(MessageKind.CONTINUATION, {"summary": summary}),
        Notify(Notice.CONTEXT_EXHAUSTED, ContextSummarised(summary)),
    ]
    return _done(_at(state, ContextExhausted(summary)), effects)


def fallback_summary(error: str) -> str:
    return (
        "Context limit reached. The continuation summary could not be generated "
        f"({error}). Start a new conversation."
    )


def _on_summary(
    state: ConvState, ctx: ConvContext, phase: AwaitingContinuation, e: ContinuationResponse
) -> Outcome:
    if phase.waiting:
        return Transition(state)
    summary = e.summary if e.summary.strip() else fallback_summary("the summary was empty")
    return _exhausted(state, summary, [])


def _on_summary_failed(
    state: ConvState, ctx: ConvContext, phase: AwaitingContinuation, e: ContinuationFailed
) -> Outcome:
    return _exhausted(state, fallback_summary(e.error), [])


def _on_summary_error(
    state: ConvState, ctx: ConvContext, phase: AwaitingContinuation, event: LlmError
) -> Outcome:
    if phase.waiting or event.attempt != phase.attempt:
        return Transition(state)
    failure = event.failure
    plan = _retry_plan(phase.attempt, failure)
    if plan is not None:
        nxt, _delay, effects = plan
        phase_next = AwaitingContinuation(phase.rejected_calls, nxt, waiting=True)
        return _done(_at(state, phase_next), effects)
    return _exhausted(state, fallback_summary(failure.message), [])


def _on_summary_retry(
    state: ConvState, ctx: ConvContext, phase: AwaitingContinuation, event: RetryTimeout
) -> Outcome:
    if not phase.waiting or event.attempt != phase.attempt:
        return Transition(state)
    phase_next = AwaitingContinuation(phase.rejected_calls, phase.attempt)
    return _done(_at(state, phase_next), [RequestContinuation(phase.rejected_calls)])


def _cancel_continuation(
    state: ConvState, ctx: ConvContext, phase: AwaitingContinuation, _e: Any
) -> Outcome:
    return _exhausted(state, CONTINUATION_CANCELLED_SUMMARY, [AbortLlm()])


# --- the table -----------------------------------------------------------------


def _reject(message: str) -> Handler:
    return lambda *_: Rejection(message)


_TABLE: dict[tuple[type, type], Handler] = {
    (Idle, UserMessage): _start,
    (Idle, UserTriggerContinuation): _begin_continuation,
    (Error, UserMessage): _start,
    (Error, UserTriggerContinuation): _begin_continuation,
    (LlmRequesting, LlmResponse): _on_response,
    (LlmRequesting, LlmError): _on_llm_error,
    (LlmRequesting, RetryTimeout): _on_retry,
    (LlmRequesting, UserCancel): _cancel_llm,
    (ToolExecuting, ToolComplete): _on_tool_complete,
    (ToolExecuting, UserCancel): _cancel_tools,
    (AwaitingModeApproval, UserApproveUpgrade): _approve,
    (AwaitingModeApproval, UserDenyUpgrade): _deny,
    (AwaitingModeApproval, UserCancel): _cancel_approval,
    (AwaitingSubAgents, SubAgentResult): _on_sub_agent,
    (AwaitingSubAgents, UserCancel): _cancel_sub_agents,
    (AwaitingContinuation, ContinuationResponse): _on_summary,
    (AwaitingContinuation, ContinuationFailed): _on_summary_failed,
    (AwaitingContinuation, LlmError): _on_summary_error,
    (AwaitingContinuation, RetryTimeout): _on_summary_retry,
    (AwaitingContinuation, UserCancel): _cancel_continuation,
    (Cancelling, UserMessage): _reject(CANCELLING_MESSAGE),
    (Cancelling, UserTriggerContinuation): _reject(CANCELLING_MESSAGE),
    (Cancelling, UserCancel): lambda s, c, p, e: _stopped(s, c, []),
    (ContextExhausted, UserMessage): _reject(EXHAUSTED_MESSAGE),
    (Completed, UserMessage): _reject(SUB_AGENT_FINISHED_MESSAGE),
    (Failed, UserMessage): _reject(SUB_AGENT_FINISHED_MESSAGE),
}

# Rows that hold in every live phase not named above.
_ANY_LIVE: dict[type, Handler] = {
    UserMessage: _reject(BUSY_MESSAGE),
    UserTriggerContinuation: _reject(BUSY_MESSAGE),
    UserApproveUpgrade: _reject(NO_UPGRADE_PENDING_MESSAGE),
    UserDenyUpgrade: _reject(NO_UPGRADE_PENDING_MESSAGE),
    UserRequestDowngrade: _downgrade,
}

_TERMINAL = (ContextExhausted, Completed, Failed)


def transition(state: ConvState, context: ConvContext, event: Event) -> Outcome:
    """The next state and effects for `event`, or a Rejection that changes nothing."""
    phase = state.phase
    if isinstance(phase, AwaitingLlm):
        # Transient by design: it behaves as the first attempt of a request.
        phase = LlmRequesting(1)
    handler = _TABLE.get((type(phase), type(event)))
    if handler is None:
        if isinstance(phase, _TERMINAL):
            return Transition(state)
        handler = _ANY_LIVE.get(type(event), _ignore)
    return handler(state, context, phase, event)


def initial_state(
    context: ConvContext, requested_mode: Mode | None = None
) -> ConvState | Rejection:
    """The state a new conversation starts in (REQ-BED-014, REQ-BED-018, REQ-BASH-009).

    Restricted when the sandbox is available (always, for sub-agents);
    Unrestricted is the only mode without it, and asking for Restricted then is
    rejected with the kernel requirement.
    """
    if not context.sandbox_available:
        if requested_mode is Mode.RESTRICTED:
            return Rejection(RESTRICTED_UNAVAILABLE_MESSAGE)
        return ConvState(Idle(), Mode.UNRESTRICTED)
    if context.is_sub_agent:
        return ConvState(Idle(), Mode.RESTRICTED)
    return ConvState(Idle(), requested_mode or Mode.RESTRICTED)
