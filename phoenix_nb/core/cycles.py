"""The request-cycle projection of seed 002: persisted history -> the record.

`project` turns a conversation's messages and state into the
`application/vnd.phoenix.conversation+json` payload of docs/record-format.md.
It is deterministic (same history and state, same dict), so the record in a
shared notebook is exactly what the live cell showed.

Run boundaries are derived, never stored: a run ends "completed" with an agent
message that ends its turn, "error" with an error message, and "interrupted"
when it ends any other way (a cancel, a restart) - found by a later root
message or by the conversation resting, never by searching tool output.

A system note (a mode change, a revert, what the human did with the agent's cell
proposals) is read by the model with whatever message comes next. So a note placed
right before a user message that starts a new run opens that run's cycle, ahead of
the user step: the cell of the turn in which the agent reads the note shows it. A
note followed by anything else stays where it was written, and so does a note of a
run the turn budget stopped (it says why that run ended).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from phoenix_nb.core.displays import SubAgentsDisplay
from phoenix_nb.core.messages import agent_blocks, images
from phoenix_nb.core.prices import NO_PRICES, ModelPrice, Spend, price_for
from phoenix_nb.core.restore import UPGRADE_NOT_APPROVED_RESULT
from phoenix_nb.core.states import (
    CONTINUATION_THRESHOLD,
    MAX_ATTEMPTS,
    WARNING_THRESHOLD,
    AwaitingModeApproval,
    AwaitingSubAgents,
    ContextExhausted,
    ConvState,
    LlmRequesting,
    context_fraction,
)
from phoenix_nb.core.stored import MessageKind, MessageLike, StoredMessage, as_stored
from phoenix_nb.core.tool_fields import NO_TOOL_TRAITS, OTHER_GROUP, ToolTraits
from phoenix_nb.core.transition import (
    UPGRADE_APPROVED_RESULT,
    UPGRADE_CANCELLED_RESULT,
    UPGRADE_DENIED_RESULT,
)
from phoenix_nb.core.values import (
    SERVER_TOOL_CALL_TYPES,
    ApprovalDecision,
    CitedTextBlock,
    RawBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    is_server_tool_result,
)

FORMAT = "phoenix.conversation/1"
SUMMARY_LIMIT = 80

UserKindPolicy = Callable[[StoredMessage], str]


def after_stop(_message: StoredMessage) -> str:
    """Default policy: our runtime accepts a message only when the agent rests, so a
    message while a run looks active means that run ended unseen (cancel, restart):
    the message is a new root ("direct") and the old run ends "interrupted"."""
    return "direct"


def follow_up(_message: StoredMessage) -> str:
    """Seed 002's queueing: the message waits until the active run stops."""
    return "followUp"


@dataclass(frozen=True)
class RecordHeader:
    """Facts about the conversation the history does not carry."""

    conversation_id: str
    slug: str
    model: str
    cwd: str
    sandbox_available: bool
    context_window: int
    # (created_at, usage) of every response of the conversation's finished sub-agents:
    # their spend is part of the conversation's (the store keeps it in their histories).
    sub_agent_usage: tuple[tuple[str, Usage], ...] = ()
    # Who serves the model (runtime.settings.PROVIDERS) and the optional features
    # (thinking, caching, images) it is known to lack, so a shared record says why a
    # conversation has no reasoning, no cache hits or no price.
    provider: str = "anthropic"
    lacks: tuple[str, ...] = ()
    # The user's prices (c.Phoenix.models; core.prices.ModelTables.prices): the record's
    # spend, also where it is built in a child process.
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    # Each tool's record group and summary field, as the conversation's tools declare
    # them (`ToolTraits`, from the tools registry): also where the record is built in a
    # child process.
    tools: ToolTraits = NO_TOOL_TRAITS


def tool_group(name: str, tools: ToolTraits = NO_TOOL_TRAITS) -> str:
    """The record group (seed 002's read/write/bash/other, and mcp) the tool declares."""
    return tools.group(name)


def call_summary(call: ToolUseBlock, tools: ToolTraits = NO_TOOL_TRAITS) -> str:
    """One line for the collapsed view of a call: its tool's summary field's value."""
    if call.name == "spawn_agents":
        tasks = call.input.get("tasks")
        count = len(tasks) if isinstance(tasks, list | tuple) else 0
        text = f"{count} sub-agent task(s)"
    else:
        value = call.input.get(tools.summary_field(call.name), "")
        text = value if isinstance(value, str) else ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= SUMMARY_LIMIT else line[: SUMMARY_LIMIT - 1] + "…"


def _plain(value: Any) -> Any:
    """JSON data for the record (tuples -> lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class _Projector:
    """Walks the history once; each message kind has one method."""

    def __init__(
        self, policy: UserKindPolicy, offset: int = 0, tools: ToolTraits = NO_TOOL_TRAITS
    ) -> None:
        self.policy = policy
        self.tools = tools  # each tool's group and summary field
        self.offset = offset  # cycles before `cycles[0]` (a tail copy holds only the last few)
        self.cycles: list[dict[str, Any]] = []
        self.active = False
        self.ends_completed = False  # the last agent message ended its turn
        self.calls: dict[str, dict[str, Any]] = {}
        self.queued: list[dict[str, Any]] = []
        self.limit = ""  # the turn budget's limit that stopped the open run, if one did
        # System notes not yet placed: the next message decides their cycle.
        self.held: list[dict[str, Any]] = []

    # -- cycle boundaries
    def _open(self, step: dict[str, Any]) -> None:
        index = self.offset + len(self.cycles)
        self.cycles.append({"index": index, "steps": [step], "stop": None})
        self.active = True
        self.ends_completed = False

    def _close(self, reason: str) -> None:
        if self.active:
            stop = {"reason": reason}
            if self.limit:
                stop["limit"] = self.limit
            self.cycles[-1]["stop"] = stop
        self.active = False
        self.limit = ""
        self.ends_completed = False
        if self.queued:
            self._open(self.queued.pop(0))

    def _steps(self) -> list[dict[str, Any]]:
        if not self.cycles:
            self.cycles.append({"index": self.offset, "steps": [], "stop": None})
            self.active = True
        steps: list[dict[str, Any]] = self.cycles[-1]["steps"]
        return steps

    def _close_open_run(self) -> None:
        self._close("completed" if self.ends_completed else "interrupted")

    def _place_held(self) -> None:
        """Held notes join the current cycle: what follows them continues it."""
        if self.held:
            self._steps().extend(self.held)
            self.held = []

    # -- message kinds
    def user(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        step = {
            "kind": "user",
            "user_kind": "direct",
            "text": str(content.get("text") or ""),
            "images": [
                {"media_type": i.media_type, "name": i.source_name} for i in images(content)
            ],
        }
        notes, self.held = self.held, []
        if self.active and self.ends_completed:
            self._close("completed")  # a new root after a finished run
        if not self.active:
            self._open_with(notes, step)
            return
        kind = self.policy(message)
        step["user_kind"] = kind
        if kind == "steer":
            self._steps().extend([*notes, step])
        elif kind == "followUp":
            self._steps().extend(notes)
            self.queued.append(step)
        else:
            self._close_open_run()
            self._open_with(notes, step)

    def _open_with(self, notes: list[dict[str, Any]], step: dict[str, Any]) -> None:
        """A new run's cycle: the notes the model reads with its first message, then it."""
        self._open(step)
        if notes:
            self.cycles[-1]["steps"][:0] = notes

    def agent(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        self._place_held()
        steps = self._steps()
        current: dict[str, Any] | None = None
        has_calls = False
        for block in agent_blocks(message):
            if isinstance(block, RawBlock):
                current = self._raw(block, steps, current)
                continue
            if isinstance(block, TextBlock | ThinkingBlock):
                kind, text = (
                    ("assistant", block.text)
                    if isinstance(block, TextBlock)
                    else ("reasoning", block.thinking)
                )
                if not text.strip():
                    continue
                item: dict[str, Any] = {"type": kind, "text": text}
                if isinstance(block, CitedTextBlock) and block.citations:
                    item["citations"] = [_citation(c.data) for c in block.citations]
                current = {"kind": "ai", "item": item, "tool_groups": []}
                steps.append(current)
                continue
            has_calls = True
            if current is None:
                current = {"kind": "ai", "item": None, "tool_groups": []}
                steps.append(current)
            call = {
                "id": block.id,
                "name": block.name,
                "input": _plain(block.input),
                "summary": call_summary(block, self.tools),
                "result": None,
            }
            self.calls[block.id] = call
            groups = current["tool_groups"]
            group = tool_group(block.name, self.tools)
            if groups and groups[-1]["group"] == group:
                groups[-1]["calls"].append(call)
            else:
                groups.append({"group": group, "calls": [call]})
        self.ends_completed = not has_calls and content.get("stop_reason") != "pause_turn"

    def _raw(
        self, block: RawBlock, steps: list[dict[str, Any]], current: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Server tool calls join the `other` group; their results fill the call in.

        Other raw blocks (redacted reasoning, compaction, unknown types) are kept in
        the history for the API and not shown."""
        data = block.data
        if block.kind in SERVER_TOOL_CALL_TYPES:
            if current is None:
                current = {"kind": "ai", "item": None, "tool_groups": []}
                steps.append(current)
            tool_input = data.get("input")
            call: dict[str, Any] = {
                "id": str(data.get("id") or ""),
                "name": str(data.get("name") or block.kind),
                "input": _plain(tool_input) if isinstance(tool_input, Mapping) else {},
                "summary": _server_summary(tool_input),
                "result": None,
                "server": True,
            }
            self.calls[call["id"]] = call
            groups = current["tool_groups"]
            if groups and groups[-1]["group"] == OTHER_GROUP:
                groups[-1]["calls"].append(call)
            else:
                groups.append({"group": OTHER_GROUP, "calls": [call]})
        elif is_server_tool_result(block.kind):
            target = self.calls.get(str(data.get("tool_use_id") or ""))
            if target is not None:
                text, is_error = _server_result_text(data.get("content"))
                target["result"] = {"content": text, "is_error": is_error, "display": None}
        return current

    def tool(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        self._place_held()
        call = self.calls.get(str(content.get("tool_use_id")))
        display = message.display
        result = {
            "content": str(content.get("content") or ""),
            "is_error": bool(content.get("is_error")),
            "display": _plain(display) if display is not None else None,
        }
        if call is None:
            return
        call["result"] = result
        if call["name"] == "request_mode_upgrade":
            decision = _approval(content)
            if decision is not None:
                reason = str(call["input"].get("reason", ""))
                step = {"kind": "approval", "reason": reason, "decision": decision}
                self._steps().append(step)
        elif call["name"] == "spawn_agents" and display is not None:
            agents = [
                {
                    "task": a.task,
                    "conversation_id": a.conversation_id,
                    "outcome": a.outcome,
                    "result": a.result,
                }
                for a in SubAgentsDisplay.read(display).agents
            ]
            self._steps().append({"kind": "sub_agents", "agents": agents})

    def system(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        step: dict[str, Any] = {"kind": "system", "text": str(content.get("text") or "")}
        limit = content.get("limit")
        if isinstance(limit, str) and limit:
            step["limit"] = limit  # the turn budget's limit that stopped the turn
            self.limit = limit
            self._place_held()
            self._steps().append(step)
            return
        self.held.append(step)

    def error(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        step = {
            "kind": "error",
            "text": str(content.get("text") or ""),
            "error_kind": str(content.get("kind") or "unknown"),
            "retry": None,
        }
        self._place_held()
        self._steps().append(step)
        self._close("error")

    def continuation(self, message: StoredMessage, content: Mapping[str, Any]) -> None:
        self._place_held()
        self._steps().append({"kind": "continuation", "summary": str(content.get("summary") or "")})
        self._close("completed")


def _citation(data: Mapping[str, Any]) -> dict[str, str]:
    """What a reader needs of a citation: where it points and the words it backs."""

    def field(name: str) -> str:
        value = data.get(name)
        return value if isinstance(value, str) else ""

    return {
        "url": field("url"),
        "title": field("title") or field("document_title") or field("source"),
        "cited_text": field("cited_text"),
    }


def _server_summary(tool_input: Any) -> str:
    if not isinstance(tool_input, Mapping):
        return ""
    for key in ("query", "url", "code", "command"):
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            line = value.strip().splitlines()[0]
            return line if len(line) <= SUMMARY_LIMIT else line[: SUMMARY_LIMIT - 1] + "…"
    return ""


def _server_result_text(content: Any) -> tuple[str, bool]:
    """A server tool result as a few readable lines, and whether it is an error."""
    if isinstance(content, Mapping):
        kind = str(content.get("type") or "")
        if kind.endswith("_error"):
            return f"{kind}: {content.get('error_code', '')}".strip(), True
        return ", ".join(f"{k}" for k in content if k != "type"), False
    if isinstance(content, list):
        lines = []
        for item in content:
            if isinstance(item, Mapping):
                title = str(item.get("title") or item.get("type") or "")
                url = str(item.get("url") or "")
                lines.append(f"{title} — {url}" if url else title)
        return "\n".join(lines), False
    return (content if isinstance(content, str) else ""), False


def spending(
    history: Sequence[MessageLike],
    model: str,
    sub_agents: Sequence[tuple[str, Usage]] = (),
    prices: Mapping[str, ModelPrice] = NO_PRICES,
) -> dict[str, Any]:
    """The record's `usage`: this turn's spend (since the last user message), the
    conversation's, sub-agents included, and whether the model has a known price
    (else cost is null); `prices`: the user's."""
    total = turn = Spend()
    turn_start = ""
    for message in map(as_stored, history):
        kind = message.kind
        if kind is MessageKind.USER:
            turn = Spend()
            turn_start = message.created_at
        elif kind is MessageKind.AGENT:
            usage = message.usage
            if usage is not None:
                total, turn = total.add(usage, model, prices), turn.add(usage, model, prices)
    for created_at, usage in sub_agents:
        total = total.add(usage, model, prices)
        if created_at >= turn_start:
            turn = turn.add(usage, model, prices)
    priced = price_for(model, prices) is not None
    out_turn, out_total = turn.as_json(), total.as_json()
    if not priced:
        out_turn["cost_usd"] = out_total["cost_usd"] = None
    return {"priced": priced, "turn": out_turn, "total": out_total}


def _state_fields(state: ConvState) -> dict[str, Any]:
    """The phase's simple fields, for the record's `state` object."""
    out: dict[str, Any] = {"name": state.name, "busy": state.busy}
    phase = state.phase
    if is_dataclass(phase):
        for f in fields(phase):
            value = getattr(phase, f.name)
            if isinstance(value, bool | int | float | str):
                out[f.name] = getattr(value, "value", value)
            elif value is not None and hasattr(value, "value"):  # enums
                out[f.name] = value.value
    if isinstance(phase, AwaitingSubAgents):
        out["pending"] = len(phase.pending)
    return out


def _merge(a: Spend, b: Spend) -> Spend:
    """Two spends of one model together."""
    cost_usd = None if a.cost_usd is None or b.cost_usd is None else a.cost_usd + b.cost_usd
    return Spend(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        cost_usd,
        a.responses + b.responses,
    )


def _finish(walker: _Projector, state: ConvState) -> None:
    """What the state adds to the walked history: a pending approval or sub-agents step,
    and the end of a run that is no longer active. Notes no message has followed yet
    show at the end of the last cycle until one does."""
    walker._place_held()
    phase = state.phase
    if isinstance(phase, AwaitingModeApproval):
        step = {"kind": "approval", "reason": phase.reason, "decision": "pending"}
        walker._steps().append(step)
    if isinstance(phase, AwaitingSubAgents):
        done = {d.agent_id: d.outcome for d in phase.completed}
        agents = []
        for task in phase.tasks:
            outcome = done.get(task.agent_id)
            agents.append(
                {
                    "task": task.task,
                    "conversation_id": outcome.conversation_id if outcome else "",
                    "outcome": outcome.status if outcome else "pending",
                    "result": outcome.result if outcome else "",
                }
            )
        walker._steps().append({"kind": "sub_agents", "agents": agents})
    if not state.busy and walker.active:
        walker._close_open_run()
    while walker.queued:  # followUps still waiting become open cycles
        walker._close_open_run()


class Projection:
    """The record of a history that only grows, kept up to date message by message.

    A live conversation appends a few messages a round and shows its record many
    times a second, and a notebook conversation grows to thousands of messages:
    walking the whole history for every display would make each turn cost more
    than the last. So each stored message is decoded and walked once (`extend`),
    the spend is summed as it arrives, and `record` copies only the cycles asked
    for (a cell shows its own turn), applying what the state adds to a copy.
    `project` is the same walk over a whole history at once.
    """

    def __init__(
        self,
        model: str,
        *,
        user_kind: UserKindPolicy = after_stop,
        prices: Mapping[str, ModelPrice] = NO_PRICES,
        tools: ToolTraits = NO_TOOL_TRAITS,
    ) -> None:
        self.model = model
        self.prices = prices  # the user's (c.Phoenix.models), for the spend
        self._walker = _Projector(user_kind, tools=tools)
        self._total = Spend()
        self._turn = Spend()
        self._turn_start = ""
        self._children: list[str] = []
        self.count = 0  # messages fed so far
        self._sub_key: tuple[tuple[tuple[str, Usage], ...], str] | None = None
        self._sub_spend = (Spend(), Spend())

    @property
    def cycle_count(self) -> int:
        """Cycles the history holds so far (the state may still open or close one)."""
        return len(self._walker.cycles)

    @property
    def child_ids(self) -> tuple[str, ...]:
        """Conversation ids of the sub-agents whose results the history records."""
        return tuple(self._children)

    def extend(self, history: Iterable[MessageLike]) -> None:
        """Take the next stored messages, in order (rows are parsed; the runtime's
        history is parsed already, so a message is never parsed twice)."""
        for message in history:
            self._feed(as_stored(message))

    def _feed(self, message: StoredMessage) -> None:
        kind = message.kind
        walker = self._walker
        _STEPS[kind](walker, message, message.content)
        self.count += 1
        if kind is MessageKind.USER:
            self._turn = Spend()
            self._turn_start = message.created_at
        elif kind is MessageKind.AGENT:
            usage = message.usage
            if usage is not None:
                self._total = self._total.add(usage, self.model, self.prices)
                self._turn = self._turn.add(usage, self.model, self.prices)
        elif kind is MessageKind.TOOL:
            display = message.display
            agents = SubAgentsDisplay.read(display).agents if display is not None else ()
            self._children += [a.conversation_id for a in agents if a.conversation_id]

    def spending(self, sub_agents: tuple[tuple[str, Usage], ...] = ()) -> dict[str, Any]:
        """The record's `usage` (see `spending`), from the sums kept so far."""
        known = self._sub_key
        if known is None or known[0] is not sub_agents or known[1] != self._turn_start:
            total = turn = Spend()
            for created_at, usage in sub_agents:
                total = total.add(usage, self.model, self.prices)
                if created_at >= self._turn_start:
                    turn = turn.add(usage, self.model, self.prices)
            self._sub_key, self._sub_spend = (sub_agents, self._turn_start), (total, turn)
        sub_total, sub_turn = self._sub_spend
        total, turn = _merge(self._total, sub_total), _merge(self._turn, sub_turn)
        priced = price_for(self.model, self.prices) is not None
        out_turn, out_total = turn.as_json(), total.as_json()
        if not priced:
            out_turn["cost_usd"] = out_total["cost_usd"] = None
        return {"priced": priced, "turn": out_turn, "total": out_total}

    def spent(self, sub_agents: tuple[tuple[str, Usage], ...] = ()) -> tuple[float, float] | None:
        """Dollars spent (this turn, the whole conversation), or None when unpriced."""
        usage = self.spending(sub_agents)
        if not usage["priced"]:
            return None
        turn, total = usage["turn"]["cost_usd"], usage["total"]["cost_usd"]
        if turn is None or total is None:
            return None
        return float(turn), float(total)

    def record(
        self, state: ConvState, header: RecordHeader, *, since_cycle: int = 0
    ) -> dict[str, Any]:
        """The conversation record (docs/record-format.md), holding the cycles from
        `since_cycle` on (their `index` stays their place in the whole record)."""
        walker = self._walker
        count = len(walker.cycles)
        # The last cycle is always copied: the state may add a step to it or close it.
        start = max(0, min(since_cycle, count - 1))
        tail = _Projector(walker.policy, offset=start, tools=walker.tools)
        tail.cycles = _plain(walker.cycles[start:])
        tail.active, tail.ends_completed = walker.active, walker.ends_completed
        tail.limit = walker.limit
        tail.held = _plain(walker.held)
        tail.queued = _plain(walker.queued)
        _finish(tail, state)
        cycles = [c for c in tail.cycles if c["index"] >= since_cycle]
        return _record(state, header, cycles, self.spending(header.sub_agent_usage))


def _record(
    state: ConvState, header: RecordHeader, cycles: list[dict[str, Any]], usage: dict[str, Any]
) -> dict[str, Any]:
    phase = state.phase
    retry = None
    if isinstance(phase, LlmRequesting) and phase.failure is not None:
        retry = {
            "attempt": phase.attempt,
            "max": MAX_ATTEMPTS,
            "delay": phase.delay,
            "kind": phase.failure.kind.value,
            "message": phase.failure.message,
        }
    window = header.context_window
    fraction = context_fraction(state.last_usage, window)
    return {
        "format": FORMAT,
        "conversation": {
            "id": header.conversation_id,
            "slug": header.slug,
            "model": header.model,
            "provider": header.provider,
            "lacks": list(header.lacks),
            "cwd": header.cwd,
            "mode": state.mode.value,
            "sandbox_available": header.sandbox_available,
            "state": _state_fields(state),
        },
        "context": {
            "used": state.last_usage.context_tokens if state.last_usage else 0,
            "window": window,
            "fraction": round(fraction, 4),
            "warning": fraction >= WARNING_THRESHOLD,
            "limit_reached": fraction >= CONTINUATION_THRESHOLD,
        },
        "usage": usage,
        "cycles": cycles,
        "pending_approval": (
            {"reason": phase.reason, "tool_use_id": phase.tool_use_id}
            if isinstance(phase, AwaitingModeApproval)
            else None
        ),
        "retry": retry,
        "summary": phase.summary if isinstance(phase, ContextExhausted) else None,
    }


def project(
    history: Sequence[MessageLike],
    state: ConvState,
    header: RecordHeader,
    *,
    user_kind: UserKindPolicy = after_stop,
) -> dict[str, Any]:
    """The conversation record (docs/record-format.md) of a whole history."""
    projection = Projection(
        header.model, user_kind=user_kind, prices=header.prices, tools=header.tools
    )
    projection.extend(history)
    return projection.record(state, header)


def _approval(content: Mapping[str, Any]) -> str | None:
    """The decision an upgrade request's answer records, or None when it records none
    (an invalid request answered with an explanation is not an approval step)."""
    if "approval" in content:
        recorded = content["approval"]
        known = {d.value for d in ApprovalDecision}
        return str(recorded) if isinstance(recorded, str) and recorded in known else None
    # Stored before answers carried `approval`: only these exact replies decided.
    return _LEGACY_DECISIONS.get(str(content.get("content") or ""))


_LEGACY_DECISIONS: Mapping[str, str] = {
    UPGRADE_APPROVED_RESULT: ApprovalDecision.APPROVED.value,
    UPGRADE_DENIED_RESULT: ApprovalDecision.DENIED.value,
    UPGRADE_CANCELLED_RESULT: ApprovalDecision.DENIED.value,
    UPGRADE_NOT_APPROVED_RESULT: ApprovalDecision.DENIED.value,
}
# The walker's step for each kind of message: every kind has one.
_STEPS: Mapping[MessageKind, Callable[[_Projector, StoredMessage, Mapping[str, Any]], None]] = {
    MessageKind.USER: _Projector.user,
    MessageKind.AGENT: _Projector.agent,
    MessageKind.TOOL: _Projector.tool,
    MessageKind.SYSTEM: _Projector.system,
    MessageKind.ERROR: _Projector.error,
    MessageKind.CONTINUATION: _Projector.continuation,
}
