"""The turn budget's rows of the transition table (pure: no I/O, no clock)."""

from __future__ import annotations

from dataclasses import replace

from phoenix_nb.core.effects import ExecuteTool, PersistMessage, RequestLlm
from phoenix_nb.core.events import LlmResponse, ToolComplete, UserMessage
from phoenix_nb.core.messages import validate_chain
from phoenix_nb.core.prices import cost
from phoenix_nb.core.states import ConvContext, ConvState, Idle, LlmRequesting, TurnBudget
from phoenix_nb.core.transition import BUDGET_NOT_RUN_RESULT, Rejection, transition
from phoenix_nb.core.values import TextBlock, ToolResult, Usage

from .helpers import SUB_CTX, call, history_of, ok

PRICED = "claude-sonnet-4-5"
USAGE = Usage(input_tokens=100_000, output_tokens=1_000)


def ctx(**budget: object) -> ConvContext:
    return ConvContext("c-1", "/work", PRICED, budget=TurnBudget(**budget))  # type: ignore[arg-type]


def runaway(context: ConvContext, rounds: int) -> tuple[ConvState, list[list[object]]]:
    """A user message, then `rounds` responses that each call a tool (answered at once)."""
    effects: list[list[object]] = []
    out = ok(transition(ConvState(), context, UserMessage("go")))
    effects.append(list(out.effects))
    state = out.state
    for i in range(rounds):
        out = ok(transition(state, context, LlmResponse((TextBlock("again"), call(i)), "tool_use")))
        effects.append(list(out.effects))
        state = out.state
        if not isinstance(state.phase, LlmRequesting) and any(
            isinstance(e, ExecuteTool) for e in out.effects
        ):
            done = ok(transition(state, context, ToolComplete(ToolResult(f"t{i}", "ok"))))
            effects.append(list(done.effects))
            state = done.state
        if isinstance(state.phase, Idle):
            break
    return state, effects


def test_rounds_limit_answers_the_last_calls_and_rests_with_a_note() -> None:
    state, effects = runaway(ctx(max_rounds=3), 10)
    assert isinstance(state.phase, Idle)
    assert state.turn_rounds == 3
    last = effects[-1]
    assert not any(isinstance(e, ExecuteTool | RequestLlm) for e in last)
    persisted = [e for e in last if isinstance(e, PersistMessage)]
    assert [p.kind for p in persisted] == ["agent", "tool", "system"]
    assert persisted[1].content["content"] == BUDGET_NOT_RUN_RESULT.format(limit="max_turn_rounds")
    assert persisted[2].content["limit"] == "max_turn_rounds"
    assert validate_chain(history_of(effects)) == []


def test_the_count_starts_again_with_each_message() -> None:
    state, _ = runaway(ctx(max_rounds=3), 10)
    out = ok(transition(state, ctx(max_rounds=3), UserMessage("go on")))
    assert out.state.turn_rounds == 0 and RequestLlm() in out.effects


def test_pause_turn_counts_as_a_round() -> None:
    context = ctx(max_rounds=2)
    state = ok(transition(ConvState(), context, UserMessage("go"))).state
    state = ok(transition(state, context, LlmResponse((TextBlock("a"),), "pause_turn"))).state
    out = ok(transition(state, context, LlmResponse((TextBlock("b"),), "pause_turn")))
    assert isinstance(out.state.phase, Idle)
    assert [e.kind for e in out.effects if isinstance(e, PersistMessage)] == ["agent", "system"]


def test_an_answer_that_ends_the_turn_is_never_cut() -> None:
    context = ctx(max_rounds=1)
    state = ok(transition(ConvState(), context, UserMessage("go"))).state
    out = ok(transition(state, context, LlmResponse((TextBlock("done"),), "end_turn")))
    assert isinstance(out.state.phase, Idle)
    assert [e.kind for e in out.effects if isinstance(e, PersistMessage)] == ["agent"]


def test_turn_cost_counts_the_response_that_reaches_it() -> None:
    price = cost(USAGE, PRICED)
    assert price is not None
    context = ctx(max_rounds=None, max_turn_cost=1.0, turn_spent=1.0 - price / 2)
    state = ok(transition(ConvState(), context, UserMessage("go"))).state
    out = ok(transition(state, context, LlmResponse((call(1),), "tool_use", USAGE)))
    notes = [e for e in out.effects if isinstance(e, PersistMessage) and e.kind == "system"]
    assert [n.content["limit"] for n in notes] == ["max_turn_cost"]
    below = replace(context.budget, turn_spent=1.0 - price * 2)
    out = ok(
        transition(
            state, replace(context, budget=below), LlmResponse((call(1),), "tool_use", USAGE)
        )
    )
    assert any(isinstance(e, ExecuteTool) for e in out.effects)


def test_dollar_limits_are_off_without_a_price() -> None:
    unpriced = ConvContext(
        "c-1",
        "/work",
        "a-model-without-a-price",
        budget=TurnBudget(max_rounds=None, max_turn_cost=0.0, max_conversation_cost=0.0),
    )
    state = ok(transition(ConvState(), unpriced, UserMessage("go"))).state
    out = ok(transition(state, unpriced, LlmResponse((call(1),), "tool_use", USAGE)))
    assert any(isinstance(e, ExecuteTool) for e in out.effects)


def test_a_conversation_over_its_dollar_limit_refuses_messages_saying_how_to_go_on() -> None:
    context = ctx(max_conversation_cost=5.0, conversation_spent=5.0)
    refused = transition(ConvState(), context, UserMessage("go"))
    assert isinstance(refused, Rejection)
    assert "%config Phoenix.max_conversation_cost" in refused.message


def test_sub_agents_keep_their_own_limit_only() -> None:
    sub = replace(SUB_CTX, budget=TurnBudget(max_rounds=1))
    state = ok(transition(ConvState(), sub, UserMessage("task"))).state
    out = ok(transition(state, sub, LlmResponse((call(1),), "tool_use")))
    assert any(isinstance(e, ExecuteTool) for e in out.effects)


# --- sub-agents draw from the same budget; nothing within a turn resets its count ----


def test_sub_agent_rounds_count_toward_the_turn_and_stop_its_next_request() -> None:
    """After the sub-agents used what was left, the parent's tool round ends with the
    limit's note (naming the sub-agents), not with another request."""
    context = ctx(max_rounds=4)
    out = ok(transition(ConvState(), context, UserMessage("go")))
    out = ok(transition(out.state, context, LlmResponse((call(0),), "tool_use")))
    spent = replace(context, budget=replace(context.budget, sub_agent_rounds=3))
    done = ok(transition(out.state, spent, ToolComplete(ToolResult("t0", "ok"))))
    assert isinstance(done.state.phase, Idle)
    assert not any(isinstance(e, RequestLlm) for e in done.effects)
    [note] = [e for e in done.effects if isinstance(e, PersistMessage) and e.kind == "system"]
    assert note.content["limit"] == "max_turn_rounds"
    assert "4 model responses (3 of them by its sub-agents" in note.content["text"]
    # with rounds left, the same step asks the model again
    left = replace(context, budget=replace(context.budget, sub_agent_rounds=2))
    again = ok(transition(out.state, left, ToolComplete(ToolResult("t0", "ok"))))
    assert any(isinstance(e, RequestLlm) for e in again.effects)


def test_sub_agent_spend_stops_the_parents_next_request() -> None:
    context = ctx(max_turn_cost=1.0, turn_spent=0.0, conversation_spent=0.0)
    out = ok(transition(ConvState(), context, UserMessage("go")))
    out = ok(transition(out.state, context, LlmResponse((call(0),), "tool_use")))
    spent = replace(context, budget=replace(context.budget, turn_spent=1.2, sub_agent_rounds=5))
    done = ok(transition(out.state, spent, ToolComplete(ToolResult("t0", "ok"))))
    assert isinstance(done.state.phase, Idle)
    [note] = [e for e in done.effects if isinstance(e, PersistMessage) and e.kind == "system"]
    assert note.content["limit"] == "max_turn_cost"
    assert "sub-agents' spend included" in note.content["text"]


def test_a_mode_approval_cycle_keeps_the_turns_round_count() -> None:
    from phoenix_nb.core.events import UserApproveUpgrade, UserDenyUpgrade
    from phoenix_nb.core.states import AwaitingModeApproval

    context = ctx(max_rounds=3)
    state = ok(transition(ConvState(), context, UserMessage("go"))).state
    for i in range(2):
        ask = call(i, "request_mode_upgrade", reason="write")
        state = ok(transition(state, context, LlmResponse((ask,), "tool_use"))).state
        assert isinstance(state.phase, AwaitingModeApproval)
        decide = UserDenyUpgrade() if i == 0 else UserApproveUpgrade()
        state = ok(transition(state, context, decide)).state
        assert state.turn_rounds == i + 1
    out = ok(transition(state, context, LlmResponse((call(9),), "tool_use")))
    assert isinstance(out.state.phase, Idle), "the third response is the turn's last"
