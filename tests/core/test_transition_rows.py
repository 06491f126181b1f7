"""Example tests for single rows of seed 001's matrices (REQ-BED-002..006)."""

from __future__ import annotations

from phoenix_nb.core.effects import (
    AbortLlm,
    AbortTool,
    ExecuteTool,
    Notify,
    PersistMessage,
    RequestLlm,
    ScheduleRetry,
)
from phoenix_nb.core.events import (
    LlmError,
    LlmResponse,
    RetryTimeout,
    ToolComplete,
    UserCancel,
    UserMessage,
)
from phoenix_nb.core.states import ConvState, Error, Idle, LlmRequesting, ToolExecuting
from phoenix_nb.core.transition import (
    BUSY_MESSAGE,
    CANCELLED_RESULT,
    SKIPPED_RESULT,
    Rejection,
    transition,
)
from phoenix_nb.core.values import ErrorKind, TextBlock, ToolResult

from .helpers import CTX, call, fatal, ok, retryable, run, small_usage


def test_req_bed_002_idle_user_message_requests_llm() -> None:
    out = ok(transition(ConvState(), CTX, UserMessage("hello")))
    assert out.state.phase == LlmRequesting(1)
    assert out.effects[0] == PersistMessage("user", {"text": "hello", "images": []})
    assert out.effects[1] == RequestLlm()


def test_req_bed_002_busy_rejects_with_how_to_cancel() -> None:
    busy = ok(transition(ConvState(), CTX, UserMessage("a"))).state
    assert transition(busy, CTX, UserMessage("b")) == Rejection(BUSY_MESSAGE)
    assert "Cancel" in BUSY_MESSAGE and "%phoenix cancel" in BUSY_MESSAGE


def test_req_bed_003_end_turn_text_goes_idle_and_persists() -> None:
    out = run(ConvState(), CTX, [UserMessage("a"), LlmResponse((TextBlock("hi"),), "end_turn")])
    assert out.state.phase == Idle()
    assert [e.kind for e in out.effects if isinstance(e, PersistMessage)] == ["agent"]


def test_empty_end_turn_is_valid() -> None:
    out = run(ConvState(), CTX, [UserMessage("a"), LlmResponse((), "end_turn")])
    assert out.state.phase == Idle()


def test_req_bed_004_tools_run_serially_in_order() -> None:
    calls = (call(1), call(2), call(3))
    out = run(ConvState(), CTX, [UserMessage("a"), LlmResponse(calls, "tool_use", small_usage())])
    assert out.state.phase == ToolExecuting(calls[0], calls[1:], ())
    assert [e for e in out.effects if isinstance(e, ExecuteTool)] == [ExecuteTool(calls[0])]
    out = ok(transition(out.state, CTX, ToolComplete(ToolResult("t1", "one"))))
    assert [e for e in out.effects if isinstance(e, ExecuteTool)] == [ExecuteTool(calls[1])]
    out = ok(transition(out.state, CTX, ToolComplete(ToolResult("t2", "boom", is_error=True))))
    out = ok(transition(out.state, CTX, ToolComplete(ToolResult("t3", "three"))))
    assert out.state.phase == LlmRequesting(1)
    assert out.effects[-1] == RequestLlm()


def test_req_bed_005_cancel_during_tool_cancels_current_skips_rest() -> None:
    calls = (call(1), call(2), call(3))
    state = run(ConvState(), CTX, [UserMessage("a"), LlmResponse(calls, "tool_use")]).state
    out = ok(transition(state, CTX, UserCancel()))
    assert out.state.phase == Idle()
    persisted = [e.content for e in out.effects if isinstance(e, PersistMessage)]
    assert [(c["tool_use_id"], c["content"]) for c in persisted] == [
        ("t1", CANCELLED_RESULT),
        ("t2", SKIPPED_RESULT),
        ("t3", SKIPPED_RESULT),
    ]
    assert AbortTool("t1") in out.effects
    late = ok(transition(out.state, CTX, ToolComplete(ToolResult("t1", "late"))))
    assert late.state == out.state and late.effects == ()


def test_req_bed_005_cancel_during_llm_aborts_and_persists_nothing() -> None:
    state = ok(transition(ConvState(), CTX, UserMessage("a"))).state
    out = ok(transition(state, CTX, UserCancel()))
    assert out.state.phase == Idle()
    assert AbortLlm() in out.effects
    assert not any(isinstance(e, PersistMessage) for e in out.effects)
    stale = ok(transition(out.state, CTX, LlmResponse((TextBlock("x"),), "end_turn")))
    assert stale.effects == ()


def test_unknown_tool_id_is_rejected() -> None:
    state = run(ConvState(), CTX, [UserMessage("a"), LlmResponse((call(1),), "tool_use")]).state
    assert isinstance(transition(state, CTX, ToolComplete(ToolResult("zzz", "x"))), Rejection)


def test_req_bed_006_retry_backoff_then_exhaustion() -> None:
    state = ok(transition(ConvState(), CTX, UserMessage("a"))).state
    out = ok(transition(state, CTX, LlmError(retryable(), 1)))
    assert out.state.phase == LlmRequesting(2, True, retryable(), 1.0)
    assert ScheduleRetry(1.0, 2) in out.effects
    assert any(isinstance(e, Notify) and e.kind == "retry" for e in out.effects)
    # A stale timer for attempt 1 is ignored; the live one sends the request.
    assert ok(transition(out.state, CTX, RetryTimeout(1))).effects == ()
    out = ok(transition(out.state, CTX, RetryTimeout(2)))
    assert out.effects == (RequestLlm(),)
    out = ok(transition(out.state, CTX, LlmError(retryable(retry_after=7.5), 2)))
    assert ScheduleRetry(7.5, 3) in out.effects
    out = ok(transition(out.state, CTX, RetryTimeout(3)))
    out = ok(transition(out.state, CTX, LlmError(retryable(), 3)))
    assert isinstance(out.state.phase, Error)
    assert out.state.phase.message == (
        "The request failed after 3 attempts: connection reset. Send a message to try again."
    )
    assert any(isinstance(e, PersistMessage) and e.kind == "error" for e in out.effects)
    # REQ-BED-006: a message from Error tries again.
    assert ok(transition(out.state, CTX, UserMessage("again"))).state.phase == LlmRequesting(1)


def test_req_bed_006_non_retryable_is_immediate() -> None:
    state = ok(transition(ConvState(), CTX, UserMessage("a"))).state
    out = ok(transition(state, CTX, LlmError(fatal(), 1)))
    assert out.state.phase == Error(out.state.phase.message, ErrorKind.AUTH)  # type: ignore[union-attr]
    # The provider's message names its own credentials; the core adds no other provider's.
    assert out.state.phase.message == (  # type: ignore[union-attr]
        "The request failed: invalid x-api-key. Send a message to try again."
    )
