"""Small builders shared by the core tests."""

from __future__ import annotations

from collections.abc import Sequence

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.states import ConvContext, ConvState
from phoenix_nb.core.stored import StoredMessage
from phoenix_nb.core.transition import Rejection, Transition, transition
from phoenix_nb.core.values import ErrorKind, LlmFailure, ToolUseBlock, Usage

CTX = ConvContext("c-1", "/work", "demo")
SUB_CTX = ConvContext("c-2", "/work", "demo", is_sub_agent=True, max_sub_agent_turns=5)
NO_SANDBOX_CTX = ConvContext("c-3", "/work", "demo", sandbox_available=False)


def call(i: int, name: str = "bash", **inp: object) -> ToolUseBlock:
    return ToolUseBlock(f"t{i}", name, inp or {"command": f"echo {i}"})


def small_usage() -> Usage:
    return Usage(input_tokens=1000, output_tokens=100)


def usage_at(fraction: float, window: int = 200_000) -> Usage:
    return Usage(input_tokens=int(window * fraction))


def retryable(kind: ErrorKind = ErrorKind.NETWORK, retry_after: float | None = None) -> LlmFailure:
    return LlmFailure(kind, "connection reset", True, retry_after)


def fatal(kind: ErrorKind = ErrorKind.AUTH) -> LlmFailure:
    return LlmFailure(kind, "invalid x-api-key", False, status=401)


def ok(result: Transition | Rejection) -> Transition:
    assert isinstance(result, Transition), result
    return result


def run(state: ConvState, ctx: ConvContext, events: Sequence[object]) -> Transition:
    """Apply events in order; every one must be accepted."""
    out = Transition(state)
    for event in events:
        out = ok(transition(out.state, ctx, event))  # type: ignore[arg-type]
    return out


def history_of(effects_seq: Sequence[Sequence[object]]) -> list[dict[str, object]]:
    """The store records the runtime would append for these effects, in order."""
    from phoenix_nb.core.effects import PersistMessage

    records: list[dict[str, object]] = []
    for effects in effects_seq:
        for effect in effects:
            if isinstance(effect, PersistMessage):
                records.append(
                    {
                        "message_type": effect.kind,
                        "content": effect.content,
                        "display_data": effect.display,
                        "usage_data": to_json(effect.usage) if effect.usage else None,
                    }
                )
    return records


def pairs(messages: Sequence[StoredMessage]) -> list[tuple[str, dict[str, object]]]:
    """(kind, content) of each message, the form the tests compare."""
    return [(m.kind.value, dict(m.content)) for m in messages]


def restored(
    state: ConvState, history: Sequence[object], **kw: bool
) -> tuple[ConvState, list[tuple[str, dict[str, object]]]]:
    """`restore`, its messages as (kind, content) pairs."""
    from phoenix_nb.core.restore import restore

    resumed, messages = restore(state, history, **kw)  # type: ignore[arg-type]
    return resumed, pairs(messages)


class Driver:
    """Drives a conversation through `transition`, keeping the persisted history."""

    def __init__(self, ctx: ConvContext = CTX, state: ConvState | None = None) -> None:
        self.ctx = ctx
        self.state = state if state is not None else ConvState()
        self.history: list[dict[str, object]] = []

    def send(self, *events: object) -> Transition | Rejection:
        out: Transition | Rejection = Transition(self.state)
        for event in events:
            out = transition(self.state, self.ctx, event)  # type: ignore[arg-type]
            if isinstance(out, Transition):
                self.state = out.state
                self.history += history_of([out.effects])
        return out
