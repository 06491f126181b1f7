"""Hypothesis strategies for core values, states and events.

`PHOENIX_STATEFUL_EXAMPLES` sets the stateful machine's example count
(default 2000, the CI figure the foundation issue asks for) and
`PHOENIX_PROPERTY_EXAMPLES` each property's (default 300); set them lower for a
quick local run, higher for a soak.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from phoenix_nb.core import events as ev
from phoenix_nb.core import states as S
from phoenix_nb.core.states import ConvContext, ConvState
from phoenix_nb.core.values import (
    ErrorKind,
    ImageData,
    LlmFailure,
    Mode,
    SubAgentOutcome,
    SubAgentTask,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    Usage,
)

STATEFUL_EXAMPLES = int(os.environ.get("PHOENIX_STATEFUL_EXAMPLES", "2000"))
PROPERTY_EXAMPLES = int(os.environ.get("PHOENIX_PROPERTY_EXAMPLES", "300"))
PROPERTY = settings(
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOL_NAMES = (
    "bash",
    "patch",
    "keyword_search",
    "think",
    "request_mode_upgrade",
    "spawn_agents",
    "submit_result",
)

ids = st.text("abcdef0123456789", min_size=1, max_size=6).map(lambda s: "toolu_" + s)
short_text = st.text(max_size=12)
usages = st.builds(
    Usage,
    st.integers(0, 250_000),
    st.integers(0, 20_000),
    st.integers(0, 5_000),
    st.integers(0, 5_000),
)
failures = st.builds(
    LlmFailure,
    st.sampled_from(ErrorKind),
    short_text,
    st.booleans(),
    st.one_of(st.none(), st.floats(0, 60, allow_nan=False)),
    st.one_of(st.none(), st.integers(400, 599)),
)


@st.composite
def tool_input(draw: st.DrawFn, name: str) -> dict[str, object]:
    if name == "spawn_agents":
        task = st.fixed_dictionaries({"task": st.one_of(st.just("look"), short_text)})
        return {"tasks": draw(st.one_of(st.lists(task, min_size=1, max_size=3), st.just([])))}
    if name == "request_mode_upgrade":
        return {"reason": draw(st.one_of(st.just("need to write"), short_text))}
    if name == "submit_result":
        return {"result": draw(short_text), "success": draw(st.booleans())}
    return {"command": draw(short_text)}


@st.composite
def tool_use(draw: st.DrawFn, id_: str | None = None) -> ToolUseBlock:
    name = draw(st.sampled_from(TOOL_NAMES))
    error = draw(st.one_of(st.none(), st.none(), st.just("truncated by max_tokens")))
    return ToolUseBlock(id_ or draw(ids), name, draw(tool_input(name)), error)


def unique_calls(
    min_size: int = 0, max_size: int = 4
) -> st.SearchStrategy[tuple[ToolUseBlock, ...]]:
    return st.lists(ids, min_size=min_size, max_size=max_size, unique=True).flatmap(
        lambda keys: st.tuples(*(tool_use(k) for k in keys))
    )


results = st.builds(ToolResult, ids, short_text, st.booleans())
outcomes = st.builds(
    SubAgentOutcome,
    st.sampled_from(("success", "failure", "timeout")),
    short_text,
    st.one_of(st.none(), st.sampled_from(ErrorKind)),
)


@st.composite
def sub_agent_phase(draw: st.DrawFn) -> S.AwaitingSubAgents:
    tool_id = draw(ids)
    n = draw(st.integers(1, 4))
    tasks = tuple(SubAgentTask(f"{tool_id}/{i}", f"task {i}") for i in range(n))
    done_n = draw(st.integers(0, n - 1))
    done = tuple(S.AgentDone(t.agent_id, draw(outcomes)) for t in tasks[:done_n])
    pending = tuple(t.agent_id for t in tasks[done_n:])
    return S.AwaitingSubAgents(tool_id, tasks, pending, done, draw(unique_calls(0, 2)))


@st.composite
def tool_phase(draw: st.DrawFn) -> S.ToolExecuting:
    calls = draw(unique_calls(1, 5))
    return S.ToolExecuting(calls[0], calls[1:], ())


phases = st.one_of(
    st.just(S.Idle()),
    st.just(S.AwaitingLlm()),
    st.builds(S.LlmRequesting, st.integers(1, 3), st.booleans()),
    tool_phase(),
    st.builds(S.Cancelling, st.one_of(st.none(), ids)),
    sub_agent_phase(),
    st.builds(S.AwaitingModeApproval, short_text, ids, unique_calls(0, 2)),
    st.builds(S.AwaitingContinuation, unique_calls(0, 2), st.integers(1, 3), st.booleans()),
    st.builds(S.ContextExhausted, short_text),
    st.builds(S.Error, short_text, st.sampled_from(ErrorKind)),
    st.builds(S.Completed, short_text, st.booleans()),
    st.builds(S.Failed, short_text, st.sampled_from(ErrorKind)),
)

contexts = st.builds(
    ConvContext,
    st.just("c-1"),
    st.just("/work"),
    st.sampled_from(("demo", "claude-sonnet-4-5", "unknown-model")),
    st.booleans(),
    st.booleans(),
    st.none(),
    st.integers(1, 6),
)


@st.composite
def states_for(draw: st.DrawFn, ctx: ConvContext) -> ConvState:
    """A state consistent with the context's mode rules."""
    phase = draw(phases)
    if not ctx.sandbox_available:
        mode = Mode.UNRESTRICTED
    elif ctx.is_sub_agent or isinstance(phase, S.AwaitingModeApproval):
        mode = Mode.RESTRICTED
    else:
        mode = draw(st.sampled_from(Mode))
    return ConvState(phase, mode, draw(st.one_of(st.none(), usages)), draw(st.booleans()))


content_blocks = st.one_of(
    st.builds(TextBlock, short_text), st.builds(ThinkingBlock, short_text, short_text)
)
images = st.builds(ImageData, st.sampled_from(("image/png", "image/jpeg")), st.just("AAAA"))
stop_reasons = st.sampled_from(
    (
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    )
)

events = st.one_of(
    st.builds(ev.UserMessage, short_text, st.lists(images, max_size=1).map(tuple)),
    st.just(ev.UserCancel()),
    st.builds(
        ev.LlmResponse,
        st.tuples(st.lists(content_blocks, max_size=2).map(tuple), unique_calls(0, 3)).map(
            lambda p: p[0] + p[1]
        ),
        stop_reasons,
        usages,
    ),
    st.builds(ev.LlmError, failures, st.integers(1, 4)),
    st.builds(ev.RetryTimeout, st.integers(1, 4)),
    st.builds(ev.ToolComplete, results),
    st.just(ev.UserApproveUpgrade()),
    st.just(ev.UserDenyUpgrade()),
    st.just(ev.UserRequestDowngrade()),
    st.just(ev.UserTriggerContinuation()),
    st.builds(ev.ContinuationResponse, short_text, usages),
    st.builds(ev.ContinuationFailed, short_text),
    st.builds(ev.SubAgentResult, ids, outcomes),
)
