"""Random event sequences through `transition` (RuleBasedStateMachine).

After every step: no exception escaped, a rejection changed nothing, the state
and effects survive JSON, the persisted chain is valid (every tool_use answered
exactly once, in order; the only unanswered calls are the ones the phase is
still working on), the API form alternates roles and pairs every call, and the
mode rules of seed 003 hold.
"""

from __future__ import annotations

import itertools
import json

import hypothesis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from phoenix_nb.core import events as ev
from phoenix_nb.core import states as S
from phoenix_nb.core.codec import from_json, to_json
from phoenix_nb.core.messages import to_api_messages, unanswered_tool_uses, validate_chain
from phoenix_nb.core.states import ConvContext, ConvState
from phoenix_nb.core.transition import Rejection, Transition, initial_state, transition
from phoenix_nb.core.values import Mode, TextBlock, ToolResult, ToolUseBlock

from .helpers import history_of
from .strategies import (
    STATEFUL_EXAMPLES,
    TOOL_NAMES,
    failures,
    outcomes,
    short_text,
    stop_reasons,
    tool_input,
)


def pending_ids(state: ConvState) -> list[str]:
    phase = state.phase
    if isinstance(phase, S.ToolExecuting):
        return [phase.current.id, *(c.id for c in phase.remaining)]
    if isinstance(phase, S.AwaitingModeApproval | S.AwaitingSubAgents):
        return [phase.tool_use_id, *(c.id for c in phase.remaining)]
    return []


class Conversation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = ConvContext("c-1", "/work", "demo")
        self.state = ConvState()
        self.history: list[dict[str, object]] = []
        self.counter = 0
        self.last: Transition | Rejection = Transition(self.state)
        self.last_event: object = None
        self.before = self.state

    @initialize(
        sub=st.sampled_from((False, False, True)),
        sandbox=st.sampled_from((True, True, False)),
        turns=st.integers(1, 6),
    )
    def start(self, sub: bool, sandbox: bool, turns: int) -> None:
        self.ctx = ConvContext("c-1", "/work", "demo", sub, sandbox, None, turns)
        start = initial_state(self.ctx)
        assert isinstance(start, ConvState)
        self.state = self.before = start

    def send(self, event: object) -> None:
        self.before = self.state
        self.last_event = event
        out = transition(self.state, self.ctx, event)  # type: ignore[arg-type]
        assert out == transition(self.state, self.ctx, event)  # type: ignore[arg-type]
        self.last = out
        if isinstance(out, Transition):
            self.state = out.state
            self.history += history_of([out.effects])
            hypothesis.event(f"reached {self.state.name}")  # shown by --hypothesis-show-statistics

    def new_id(self) -> str:
        self.counter += 1
        return f"toolu_{self.counter}"

    # -- user
    @rule(text=short_text)
    def user_message(self, text: str) -> None:
        self.send(ev.UserMessage(text))

    @rule()
    def cancel(self) -> None:
        self.send(ev.UserCancel())

    @rule(approve=st.booleans())
    def answer_upgrade(self, approve: bool) -> None:
        self.send(ev.UserApproveUpgrade() if approve else ev.UserDenyUpgrade())

    @rule()
    def downgrade(self) -> None:
        self.send(ev.UserRequestDowngrade())

    @rule()
    def trigger_continuation(self) -> None:
        self.send(ev.UserTriggerContinuation())

    # -- LLM
    @rule(
        data=st.data(),
        text=st.one_of(st.none(), short_text),
        stop=stop_reasons,
        fraction=st.sampled_from((0.1, 0.1, 0.1, 0.1, 0.5, 0.85, 0.95)),
    )
    def llm_response(
        self, data: st.DataObject, text: str | None, stop: str, fraction: float
    ) -> None:
        blocks: list[object] = [] if text is None else [TextBlock(text)]
        names = st.sampled_from(
            (*TOOL_NAMES, "request_mode_upgrade", "spawn_agents", "submit_result")
        )
        for name in data.draw(st.lists(names, min_size=0, max_size=3)):
            broken = data.draw(st.sampled_from((None, None, None, "truncated")))
            blocks.append(ToolUseBlock(self.new_id(), name, data.draw(tool_input(name)), broken))
        usage = S.Usage(input_tokens=int(self.ctx.window * fraction))
        self.send(ev.LlmResponse(tuple(blocks), stop, usage))  # type: ignore[arg-type]

    @rule(failure=failures, offset=st.sampled_from((0, 0, 0, -1, 1)))
    def llm_error(self, failure: S.LlmFailure, offset: int) -> None:
        attempt = getattr(self.state.phase, "attempt", 1) + offset
        self.send(ev.LlmError(failure, attempt))

    @rule(offset=st.sampled_from((0, 0, -1)))
    def retry_timer(self, offset: int) -> None:
        self.send(ev.RetryTimeout(getattr(self.state.phase, "attempt", 1) + offset))

    @rule(summary=short_text, failed=st.booleans())
    def continuation_answer(self, summary: str, failed: bool) -> None:
        self.send(ev.ContinuationFailed("boom") if failed else ev.ContinuationResponse(summary))

    # -- tools and sub-agents
    @rule(content=short_text, is_error=st.booleans(), stray=st.sampled_from((False, False, True)))
    def tool_complete(self, content: str, is_error: bool, stray: bool) -> None:
        phase = self.state.phase
        current = (
            phase.current.id if isinstance(phase, S.ToolExecuting) and not stray else "toolu_x"
        )
        self.send(ev.ToolComplete(ToolResult(current, content, is_error)))

    @rule(data=st.data(), outcome=outcomes, stray=st.sampled_from((False, False, True)))
    def sub_agent_result(
        self, data: st.DataObject, outcome: S.SubAgentOutcome, stray: bool
    ) -> None:
        phase = self.state.phase
        if isinstance(phase, S.AwaitingSubAgents) and not stray:
            key = data.draw(st.sampled_from(phase.pending))
        else:
            key = "toolu_x/9"
        self.send(ev.SubAgentResult(key, outcome))

    # -- the next expected event, so that random runs get deep into the machine
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        phase = self.state.phase
        if isinstance(phase, S.Idle | S.Error):
            self.user_message("go")
        elif isinstance(phase, S.LlmRequesting) and phase.waiting:
            self.retry_timer(0)
        elif isinstance(phase, S.LlmRequesting | S.AwaitingLlm):
            self.llm_response(data, data.draw(st.one_of(st.none(), short_text)), "tool_use", 0.1)
        elif isinstance(phase, S.ToolExecuting):
            self.tool_complete("ok", data.draw(st.booleans()), False)
        elif isinstance(phase, S.AwaitingModeApproval):
            self.answer_upgrade(data.draw(st.booleans()))
        elif isinstance(phase, S.AwaitingSubAgents):
            self.sub_agent_result(data, data.draw(outcomes), False)
        elif isinstance(phase, S.AwaitingContinuation):
            self.continuation_answer("summary", False)
        else:
            self.user_message("after the end")

    @rule(data=st.data())
    def advance_again(self, data: st.DataObject) -> None:
        self.advance(data)

    # -- invariants
    @invariant()
    def rejection_changes_nothing(self) -> None:
        if isinstance(self.last, Rejection):
            assert self.state == self.before
            assert self.last.message

    @invariant()
    def values_round_trip(self) -> None:
        assert from_json(json.loads(json.dumps(to_json(self.state)))) == self.state
        if isinstance(self.last, Transition):
            for effect in self.last.effects:
                assert from_json(json.loads(json.dumps(to_json(effect)))) == effect

    @invariant()
    def chain_is_valid(self) -> None:
        problems = [p for p in validate_chain(self.history) if not p.endswith("has no result")]
        assert problems == []
        assert [c.id for c in unanswered_tool_uses(self.history)] == pending_ids(self.state)
        if not pending_ids(self.state):
            messages = to_api_messages(self.history)
            roles = [m["role"] for m in messages]
            assert all(a != b for a, b in itertools.pairwise(roles))
            for prev, nxt in itertools.pairwise(messages):
                calls = [b["id"] for b in prev["content"] if b["type"] == "tool_use"]
                answers = [b["tool_use_id"] for b in nxt["content"] if b["type"] == "tool_result"]
                assert answers == calls

    @invariant()
    def mode_rules(self) -> None:
        if not self.ctx.sandbox_available:
            assert self.state.mode is Mode.UNRESTRICTED
        elif self.ctx.is_sub_agent:
            assert self.state.mode is Mode.RESTRICTED
        if self.before.mode is Mode.RESTRICTED and self.state.mode is Mode.UNRESTRICTED:
            assert isinstance(self.last_event, ev.UserApproveUpgrade)

    @invariant()
    def sub_agent_pending_only_shrinks(self) -> None:
        b, a = self.before.phase, self.state.phase
        same_call = (
            isinstance(b, S.AwaitingSubAgents)
            and isinstance(a, S.AwaitingSubAgents)
            and a.tool_use_id == b.tool_use_id
        )
        if same_call:
            assert set(a.pending) <= set(b.pending)  # type: ignore[union-attr]
            assert len(a.pending) + len(a.completed) == len(a.tasks)  # type: ignore[union-attr]


Conversation.TestCase.settings = settings(
    max_examples=STATEFUL_EXAMPLES, stateful_step_count=20, deadline=None
)
TestConversation = Conversation.TestCase
