"""Rows for modes (REQ-BED-014..018), sub-agents (REQ-BED-008/009/024), stop reasons
(REQ-BED-003) and continuation (REQ-BED-019..023)."""

from __future__ import annotations

from phoenix_nb.core import states as S
from phoenix_nb.core.effects import (
    AbortLlm,
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
    LlmError,
    LlmResponse,
    RetryTimeout,
    ToolComplete,
    UserApproveUpgrade,
    UserCancel,
    UserDenyUpgrade,
    UserMessage,
    UserRequestDowngrade,
    UserTriggerContinuation,
)
from phoenix_nb.core.models import MODELS, SMALLEST_KNOWN, model_info
from phoenix_nb.core.notices import UpgradeRequested
from phoenix_nb.core.states import ConvContext, ConvState
from phoenix_nb.core.transition import (
    ALREADY_UNRESTRICTED_RESULT,
    CONTINUATION_CANCELLED_SUMMARY,
    MODE_RESTRICTED_TEXT,
    MODE_UNRESTRICTED_TEXT,
    NOT_EXECUTED_CONTEXT_RESULT,
    SUB_AGENT_REMINDER_TEXT,
    UPGRADE_APPROVED_RESULT,
    UPGRADE_CANCELLED_RESULT,
    UPGRADE_DENIED_RESULT,
    Rejection,
    continuation_prompt,
    transition,
)
from phoenix_nb.core.values import ErrorKind, Mode, TextBlock, ToolResult, ToolUseBlock, Usage

from .helpers import CTX, SUB_CTX, Driver, call, ok, retryable, usage_at

UPGRADE = ToolUseBlock("u1", "request_mode_upgrade", {"reason": "edit a.py"})


def persisted(effects: tuple, kind: str) -> list[dict]:
    return [dict(e.content) for e in effects if isinstance(e, PersistMessage) and e.kind == kind]


def test_req_bed_015_upgrade_waits_then_approval_continues_with_remaining_tools() -> None:
    d = Driver()
    out = ok(d.send(UserMessage("fix"), LlmResponse((UPGRADE, call(2)), "tool_use")))
    assert d.state.phase == S.AwaitingModeApproval("edit a.py", "u1", (call(2),), ())
    assert Notify("upgrade_requested", UpgradeRequested("edit a.py", "u1")) in out.effects
    # No automatic timeout exists: every other event leaves the request waiting.
    assert d.send(RetryTimeout(1)).state == d.state  # type: ignore[union-attr]
    out = ok(d.send(UserApproveUpgrade()))
    assert d.state.mode is Mode.UNRESTRICTED
    assert persisted(out.effects, "tool")[0]["content"] == UPGRADE_APPROVED_RESULT
    assert persisted(out.effects, "system") == [{"text": MODE_UNRESTRICTED_TEXT}]
    assert ExecuteTool(call(2)) in out.effects


def test_req_bed_015_denial_keeps_restricted_and_resumes() -> None:
    d = Driver()
    d.send(UserMessage("fix"), LlmResponse((UPGRADE,), "tool_use"))
    out = ok(d.send(UserDenyUpgrade()))
    assert d.state.mode is Mode.RESTRICTED and d.state.phase == S.LlmRequesting(1)
    assert persisted(out.effects, "tool")[0]["content"] == UPGRADE_DENIED_RESULT
    assert out.effects[-2] == RequestLlm()


def test_upgrade_cancel_answers_the_request_and_skips_the_rest() -> None:
    d = Driver()
    d.send(UserMessage("fix"), LlmResponse((UPGRADE, call(2)), "tool_use"))
    out = ok(d.send(UserCancel()))
    texts = [r["content"] for r in persisted(out.effects, "tool")]
    assert texts[0] == UPGRADE_CANCELLED_RESULT
    assert d.state.phase == S.Idle() and d.state.mode is Mode.RESTRICTED


def test_upgrade_in_unrestricted_mode_is_answered_in_place() -> None:
    d = Driver(state=ConvState(mode=Mode.UNRESTRICTED))
    out = ok(d.send(UserMessage("x"), LlmResponse((UPGRADE,), "tool_use")))
    assert persisted(out.effects, "tool")[0]["content"] == ALREADY_UNRESTRICTED_RESULT
    assert d.state.phase == S.LlmRequesting(1)


def test_req_bed_016_downgrade_is_immediate_and_spares_the_running_tool() -> None:
    d = Driver(state=ConvState(mode=Mode.UNRESTRICTED))
    d.send(UserMessage("x"), LlmResponse((call(1),), "tool_use"))
    running = d.state.phase
    out = ok(d.send(UserRequestDowngrade()))
    assert d.state.mode is Mode.RESTRICTED and d.state.phase == running
    assert persisted(out.effects, "system") == [{"text": MODE_RESTRICTED_TEXT}]
    assert not any(isinstance(e, ExecuteTool) for e in out.effects)
    ok(d.send(ToolComplete(ToolResult("t1", "done"))))
    assert d.history[-1]["message_type"] == "tool"  # the tool's own result still lands


def test_req_bed_009_018_sub_agent_tool_limits() -> None:
    d = Driver(SUB_CTX, ConvState(mode=Mode.RESTRICTED))
    spawn = ToolUseBlock("s1", "spawn_agents", {"tasks": [{"task": "x"}]})
    out = ok(d.send(UserMessage("task"), LlmResponse((UPGRADE, spawn), "tool_use")))
    texts = [r["content"] for r in persisted(out.effects, "tool")]
    assert "not available to sub-agents" in texts[0] and "not available to sub-agents" in texts[1]
    parent = Driver()
    submit = ToolUseBlock("r1", "submit_result", {"result": "x"})
    out = ok(parent.send(UserMessage("a"), LlmResponse((submit,), "tool_use")))
    assert "only sub-agents" in persisted(out.effects, "tool")[0]["content"]


def test_req_bed_008_spawn_input_is_validated() -> None:
    d = Driver()
    bad = ToolUseBlock("s1", "spawn_agents", {"tasks": [{"task": ""}]})
    out = ok(d.send(UserMessage("a"), LlmResponse((bad,), "tool_use")))
    [result] = persisted(out.effects, "tool")
    assert result["is_error"] and "tasks[0].task" in result["content"]


def test_req_bed_008_spawn_carries_the_timeout_the_call_asked_for() -> None:
    """The sub-agent executor reads the timeout from the effect, never from the history;
    anything but a positive number means "none asked" (the runtime's default applies)."""
    asked: dict[str, object] = {"short": 0.5, "whole": 30, "none": None, "nonsense": "soon",
                                "zero": 0, "negative": -3, "infinite": float("inf"),
                                "boolean": True}  # fmt: skip
    spawned = {}
    for name, timeout in asked.items():
        extra = {} if timeout is None else {"timeout": timeout}
        tool_input = {"tasks": [{"task": name}], **extra}
        spawn = ToolUseBlock("s1", "spawn_agents", tool_input)
        out = ok(Driver().send(UserMessage("a"), LlmResponse((spawn,), "tool_use")))
        (effect,) = [e for e in out.effects if isinstance(e, SpawnSubAgents)]
        spawned[name] = effect.timeout
    assert spawned == {"short": 0.5, "whole": 30.0, "none": None, "nonsense": None, "zero": None,
                       "negative": None, "infinite": None, "boolean": None}  # fmt: skip


def test_req_bed_008_submit_result_completes_sub_agent() -> None:
    d = Driver(SUB_CTX)
    submit = ToolUseBlock("r1", "submit_result", {"result": "found it", "success": True})
    out = ok(d.send(UserMessage("task"), LlmResponse((submit, call(9)), "tool_use")))
    assert d.state.phase == S.Completed("found it", True)
    assert NotifyParent(S.SubAgentOutcome("success", "found it")) in out.effects
    assert [r["tool_use_id"] for r in persisted(out.effects, "tool")] == ["r1", "t9"]


def test_sub_agent_is_reminded_once_then_fails() -> None:
    d = Driver(SUB_CTX)
    out = ok(d.send(UserMessage("task"), LlmResponse((TextBlock("done"),), "end_turn")))
    assert persisted(out.effects, "system") == [{"text": SUB_AGENT_REMINDER_TEXT}]
    assert RequestLlm() in out.effects
    out = ok(d.send(LlmResponse((TextBlock("really done"),), "end_turn")))
    assert isinstance(d.state.phase, S.Failed)
    assert any(isinstance(e, NotifyParent) and e.outcome.status == "failure" for e in out.effects)


def test_sub_agent_turn_limit_fails() -> None:
    ctx = ConvContext("c", "/w", "demo", is_sub_agent=True, max_sub_agent_turns=2)
    d = Driver(ctx)
    d.send(UserMessage("task"), LlmResponse((call(1),), "tool_use"))
    d.send(ToolComplete(ToolResult("t1", "x")), LlmResponse((call(2),), "tool_use"))
    out = ok(d.send(ToolComplete(ToolResult("t2", "x"))))
    assert isinstance(d.state.phase, S.Failed) and "2 turns" in d.state.phase.error
    assert not any(isinstance(e, RequestLlm) for e in out.effects)


def test_req_bed_024_sub_agent_fails_at_context_threshold() -> None:
    d = Driver(SUB_CTX)
    out = ok(d.send(UserMessage("task"), LlmResponse((call(1),), "tool_use", usage_at(0.9))))
    assert d.state.phase == S.Failed(d.state.phase.error, ErrorKind.CONTEXT_EXHAUSTED)  # type: ignore[union-attr]
    assert not any(isinstance(e, RequestContinuation | ExecuteTool) for e in out.effects)
    assert [e.outcome.kind for e in out.effects if isinstance(e, NotifyParent)] == [
        ErrorKind.CONTEXT_EXHAUSTED
    ]


def test_max_tokens_keeps_text_and_answers_truncated_tool() -> None:
    cut = ToolUseBlock("t1", "bash", {}, input_error="truncated by max_tokens")
    d = Driver()
    out = ok(d.send(UserMessage("a"), LlmResponse((TextBlock("partial"), cut), "max_tokens")))
    agent = persisted(out.effects, "agent")[0]
    assert agent["blocks"][0] == {"type": "TextBlock", "text": "partial"}
    [result] = persisted(out.effects, "tool")
    assert result["is_error"] and "truncated by max_tokens" in result["content"]
    assert not any(isinstance(e, ExecuteTool) for e in out.effects)
    assert d.state.phase == S.LlmRequesting(1)  # the model gets the chance to recover


def test_refusal_pause_turn_and_window_exceeded() -> None:
    d = Driver()
    out = ok(d.send(UserMessage("a"), LlmResponse((TextBlock("no"),), "refusal")))
    assert d.state.phase == S.Idle() and Notify("refusal") in out.effects
    out = ok(d.send(UserMessage("b"), LlmResponse((TextBlock("so far"),), "pause_turn")))
    assert d.state.phase == S.LlmRequesting(1) and RequestLlm() in out.effects
    out = ok(d.send(LlmResponse((call(5),), "model_context_window_exceeded", Usage(10))))
    assert isinstance(d.state.phase, S.AwaitingContinuation)


def test_req_bed_019_020_threshold_continuation_flow() -> None:
    d = Driver()
    out = ok(d.send(UserMessage("a"), LlmResponse((call(1), call(2)), "tool_use", usage_at(0.9))))
    assert [r["content"] for r in persisted(out.effects, "tool")] == [
        NOT_EXECUTED_CONTEXT_RESULT
    ] * 2
    assert RequestContinuation((call(1), call(2))) in out.effects
    assert "bash (t1)" in continuation_prompt((call(1), call(2)))
    out = ok(d.send(ContinuationResponse("We fixed add; next: tests.")))
    assert d.state.phase == S.ContextExhausted("We fixed add; next: tests.")
    assert persisted(out.effects, "continuation") == [{"summary": "We fixed add; next: tests."}]


def test_req_bed_020_continuation_failure_retries_then_falls_back() -> None:
    d = Driver(state=ConvState(S.AwaitingContinuation((), 1)))
    out = ok(d.send(LlmError(retryable(), 1)))
    assert ScheduleRetry(1.0, 2) in out.effects
    out = ok(d.send(RetryTimeout(2)))
    assert out.effects == (RequestContinuation(()),)
    ok(d.send(ContinuationFailed("server down")))
    assert isinstance(d.state.phase, S.ContextExhausted)
    assert "could not be generated (server down)" in d.state.phase.summary


def test_continuation_cancel_lands_exhausted() -> None:
    d = Driver(state=ConvState(S.AwaitingContinuation((), 1)))
    out = ok(d.send(UserCancel()))
    assert d.state.phase == S.ContextExhausted(CONTINUATION_CANCELLED_SUMMARY)
    assert AbortLlm() in out.effects


def test_req_bed_023_warning_flag_and_manual_trigger() -> None:
    d = Driver()
    d.send(UserMessage("a"), LlmResponse((TextBlock("x"),), "end_turn", usage_at(0.8)))
    assert d.state.context_warning and d.state.phase == S.Idle()
    out = ok(d.send(UserTriggerContinuation()))
    assert d.state.phase == S.AwaitingContinuation((), 1)
    assert RequestContinuation(()) in out.effects
    d2 = Driver()
    d2.send(UserMessage("a"), LlmResponse((TextBlock("x"),), "end_turn", usage_at(0.79)))
    assert not d2.state.context_warning
    assert isinstance(transition(ConvState(), SUB_CTX, UserTriggerContinuation()), Rejection)


def test_req_bed_022_model_windows() -> None:
    assert model_info("claude-sonnet-4-5-20250929").context_window == 200_000
    assert model_info("claude-sonnet-4-5[1m]").context_window == 1_000_000
    unknown = model_info("some-future-model")
    assert unknown.context_window == SMALLEST_KNOWN.context_window
    assert SMALLEST_KNOWN.context_window == min(m.context_window for m in MODELS.values())
    big = ConvContext("c", "/w", "claude-sonnet-4-5[1m]")
    out = ok(
        transition(ConvState(S.LlmRequesting(1)), big, LlmResponse((), "end_turn", usage_at(0.9)))
    )
    assert out.state.phase == S.Idle()  # 180k of 1M is far from the limit
    assert CTX.window == 200_000


def test_req_bed_018_sub_agent_in_approval_cannot_be_approved_into_unrestricted() -> None:
    """Regression (found by test_mode_invariants_1_to_6 on a random seed): a sub-agent
    with the sandbox, in AwaitingModeApproval (e.g. restored from a store), is never
    made Unrestricted by an approval; the core rejects it."""
    ctx = ConvContext("c-1", "/w", "demo", is_sub_agent=True, sandbox_available=True)
    state = ConvState(S.AwaitingModeApproval("edit a.py", "u1", (), ()), Mode.RESTRICTED)
    out = transition(state, ctx, UserApproveUpgrade())
    assert isinstance(out, Rejection)
    assert "Restricted" in out.message
    # Denying still answers the request and stays Restricted.
    denied = ok(transition(state, ctx, UserDenyUpgrade()))
    assert denied.state.mode is Mode.RESTRICTED


def test_req_bed_021_restrict_leaves_an_exhausted_conversation_as_it_is() -> None:
    """Found by tests/explore.sh through the runtime (approve, context exhausted, then
    restrict): an exhausted conversation is read-only (seed 001) and ignores a
    downgrade; it can never run a tool again, so its mode is moot."""
    state = ConvState(S.ContextExhausted("summary"), Mode.UNRESTRICTED)
    out = ok(transition(state, CTX, UserRequestDowngrade()))
    assert out.state == state and out.effects == ()
