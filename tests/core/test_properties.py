"""Property tests of the Bedrock machine (seed 001 testing strategy, seed 003 invariants)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from phoenix_nb.core import states as S
from phoenix_nb.core.codec import from_json, to_json
from phoenix_nb.core.effects import (
    AbortTool,
    CancelSubAgents,
    PersistMessage,
    RequestLlm,
    ScheduleRetry,
    SpawnSubAgents,
)
from phoenix_nb.core.events import (
    LlmError,
    LlmResponse,
    RetryTimeout,
    SubAgentResult,
    UserApproveUpgrade,
    UserCancel,
    UserDenyUpgrade,
    UserMessage,
    UserRequestDowngrade,
)
from phoenix_nb.core.states import ConvContext, ConvState
from phoenix_nb.core.transition import (
    BUSY_MESSAGE,
    CANCELLING_MESSAGE,
    EXHAUSTED_MESSAGE,
    Rejection,
    Transition,
    initial_state,
    transition,
)
from phoenix_nb.core.values import Mode, ToolUseBlock

from .strategies import (
    PROPERTY,
    contexts,
    events,
    failures,
    outcomes,
    short_text,
    states_for,
    sub_agent_phase,
    tool_phase,
    unique_calls,
)

PARENT = ConvContext("c-1", "/work", "demo")


@PROPERTY
@given(st.data())
def test_req_bed_001_transition_is_deterministic_and_round_trips(data: st.DataObject) -> None:
    ctx = data.draw(contexts)
    state = data.draw(states_for(ctx))
    event = data.draw(events)
    first, second = transition(state, ctx, event), transition(state, ctx, event)
    assert first == second
    assert from_json(json.loads(json.dumps(to_json(state)))) == state
    assert from_json(json.loads(json.dumps(to_json(event)))) == event
    if isinstance(first, Transition):
        assert from_json(json.loads(json.dumps(to_json(first.state)))) == first.state
        for effect in first.effects:
            assert from_json(json.loads(json.dumps(to_json(effect)))) == effect


@PROPERTY
@given(st.data(), short_text)
def test_req_bed_002_busy_states_reject_user_messages(data: st.DataObject, text: str) -> None:
    ctx = data.draw(contexts)
    state = data.draw(states_for(ctx))
    before = state
    out = transition(state, ctx, UserMessage(text))
    if isinstance(state.phase, S.Cancelling):
        assert out == Rejection(CANCELLING_MESSAGE)
    elif state.busy:
        assert out == Rejection(BUSY_MESSAGE)
    elif isinstance(state.phase, S.ContextExhausted):
        assert out == Rejection(EXHAUSTED_MESSAGE)
    elif isinstance(state.phase, S.Idle | S.Error):
        assert isinstance(out, Transition) and out.state.phase == S.LlmRequesting(1)
    assert state == before  # values are immutable: nothing was changed in place


@PROPERTY
@given(contexts, short_text, st.sampled_from(list(S.ErrorKind)), short_text)
def test_req_bed_006_error_is_always_recoverable(
    ctx: ConvContext, message: str, kind: S.ErrorKind, text: str
) -> None:
    out = transition(ConvState(S.Error(message, kind)), ctx, UserMessage(text))
    assert isinstance(out, Transition)
    assert out.state.phase == S.LlmRequesting(1)
    assert out.effects[-1] == RequestLlm()


@PROPERTY
@given(st.lists(failures, min_size=1, max_size=4))
def test_req_bed_006_retryable_errors_count_attempts_then_error(fails: list) -> None:
    state = ConvState(S.LlmRequesting(1))
    for failure in fails:
        phase = state.phase
        assert isinstance(phase, S.LlmRequesting)
        out = transition(state, PARENT, LlmError(failure, phase.attempt))
        assert isinstance(out, Transition)
        if failure.retryable and phase.attempt < S.MAX_ATTEMPTS:
            assert out.state.phase.attempt == phase.attempt + 1  # type: ignore[union-attr]
            [retry] = [e for e in out.effects if isinstance(e, ScheduleRetry)]
            expected = (
                failure.retry_after
                if failure.retry_after is not None
                else 2.0 ** (phase.attempt - 1)
            )
            assert retry == ScheduleRetry(expected, phase.attempt + 1)
            state = transition(out.state, PARENT, RetryTimeout(phase.attempt + 1)).state  # type: ignore[union-attr]
        else:
            assert isinstance(out.state.phase, S.Error)
            assert out.state.phase.kind == failure.kind
            if failure.retryable:
                assert "after 3 attempts" in out.state.phase.message
            return


def _tool_results(effects: tuple) -> list[tuple[str, bool]]:
    return [
        (e.content["tool_use_id"], e.content["is_error"])
        for e in effects
        if isinstance(e, PersistMessage) and e.kind == "tool"
    ]


@PROPERTY
@given(st.one_of(tool_phase(), sub_agent_phase()), st.booleans())
def test_req_bed_005_cancel_answers_every_pending_tool_exactly_once(phase, sub: bool) -> None:
    ctx = ConvContext("c", "/w", "demo", is_sub_agent=sub)
    if isinstance(phase, S.ToolExecuting):
        pending = [phase.current.id, *(c.id for c in phase.remaining)]
    else:
        pending = [phase.tool_use_id, *(c.id for c in phase.remaining)]
    out = transition(ConvState(phase), ctx, UserCancel())
    assert isinstance(out, Transition)
    assert [i for i, _ in _tool_results(out.effects)] == pending
    # Synthetic answers are errors; a spawn result keeps the successes that came in.
    synthetic = _tool_results(out.effects)[0 if isinstance(phase, S.ToolExecuting) else 1 :]
    assert all(is_error for _, is_error in synthetic)
    assert isinstance(out.state.phase, S.Failed if sub else S.Idle)
    if isinstance(phase, S.ToolExecuting):
        assert AbortTool(phase.current.id) in out.effects
    else:
        assert CancelSubAgents(phase.pending) in out.effects


@PROPERTY
@given(st.data())
def test_mode_invariants_1_to_6(data: st.DataObject) -> None:
    """Seed 003 invariants: (1) approval exits only by approve/deny (or cancel),
    (2) sub-agents Restricted with a sandbox (000 wins over 003), (4) downgrade
    immediate, (5) no Unrestricted without approval, (6) no sandbox -> Unrestricted."""
    ctx = data.draw(contexts)
    start = initial_state(ctx, data.draw(st.sampled_from([None, Mode.UNRESTRICTED])))
    assert isinstance(start, ConvState)
    if not ctx.sandbox_available:
        assert start.mode is Mode.UNRESTRICTED
    elif ctx.is_sub_agent:
        assert start.mode is Mode.RESTRICTED
    state = data.draw(states_for(ctx))
    for event in data.draw(st.lists(events, max_size=12)):
        out = transition(state, ctx, event)
        if isinstance(out, Rejection):
            continue
        if state.mode is Mode.RESTRICTED and out.state.mode is Mode.UNRESTRICTED:
            assert isinstance(event, UserApproveUpgrade)
            assert isinstance(state.phase, S.AwaitingModeApproval)
        if isinstance(state.phase, S.AwaitingModeApproval) and not isinstance(
            event, UserApproveUpgrade | UserDenyUpgrade | UserCancel
        ):
            assert out.state.phase == state.phase
        if isinstance(event, UserRequestDowngrade) and ctx.sandbox_available and not state.terminal:
            assert out.state.mode is Mode.RESTRICTED
            assert out.state.phase == state.phase  # never touches a running tool
        if not ctx.sandbox_available:
            assert out.state.mode is Mode.UNRESTRICTED
        if ctx.is_sub_agent and ctx.sandbox_available:
            assert out.state.mode is Mode.RESTRICTED
        state = out.state


def test_req_bash_009_restricted_without_sandbox_is_rejected() -> None:
    ctx = ConvContext("c", "/w", "demo", sandbox_available=False)
    out = initial_state(ctx, Mode.RESTRICTED)
    assert isinstance(out, Rejection) and "Landlock" in out.message and "5.13" in out.message
    assert transition(ConvState(mode=Mode.UNRESTRICTED), ctx, UserRequestDowngrade()) == out


@PROPERTY
@given(st.integers(1, 6), st.randoms(use_true_random=False), outcomes)
def test_req_bed_008_sub_agents_conserved_and_pending_decreases(n: int, rnd, outcome) -> None:
    spawn = ToolUseBlock(
        "toolu_s", "spawn_agents", {"tasks": [{"task": f"t{i}"} for i in range(n)]}
    )
    out = transition(ConvState(S.LlmRequesting(1)), PARENT, LlmResponse((spawn,), "tool_use"))
    assert isinstance(out, Transition)
    [spawned] = [e for e in out.effects if isinstance(e, SpawnSubAgents)]
    keys = [t.agent_id for t in spawned.tasks]
    assert len(set(keys)) == n
    order = keys[:]
    rnd.shuffle(order)
    state = out.state
    for i, key in enumerate(order):
        phase = state.phase
        assert isinstance(phase, S.AwaitingSubAgents)
        assert len(phase.pending) == n - i
        assert isinstance(transition(state, PARENT, SubAgentResult("nope", outcome)), Rejection)
        out = transition(state, PARENT, SubAgentResult(key, outcome))
        assert isinstance(out, Transition)
        state = out.state
    assert state.phase == S.LlmRequesting(1)
    [result] = [e for e in out.effects if isinstance(e, PersistMessage) and e.kind == "tool"]
    assert [a["agent_id"] for a in result.display["agents"]] == keys  # request order


@PROPERTY
@given(st.data())
def test_req_bed_021_context_exhausted_rejects_messages_ignores_all_else(
    data: st.DataObject,
) -> None:
    ctx = data.draw(contexts)
    state = ConvState(S.ContextExhausted(data.draw(short_text)), data.draw(st.sampled_from(Mode)))
    event = data.draw(events)
    out = transition(state, ctx, event)
    if isinstance(event, UserMessage):
        assert out == Rejection(EXHAUSTED_MESSAGE)
    else:
        assert out == Transition(state)


@PROPERTY
@given(unique_calls(1, 4), st.floats(0.9, 1.5))
def test_req_bed_019_threshold_rejects_every_tool(calls: tuple, fraction: float) -> None:
    usage = S.Usage(input_tokens=int(200_000 * fraction) + 1)
    out = transition(ConvState(S.LlmRequesting(1)), PARENT, LlmResponse(calls, "tool_use", usage))
    assert isinstance(out, Transition)
    assert out.state.phase == S.AwaitingContinuation(calls, 1)
    assert [i for i, _ in _tool_results(out.effects)] == [c.id for c in calls]
