"""One live conversation: the loop where the pure core meets the world.

One asyncio task per conversation takes events from a queue, calls
`transition`, persists the new state, and only then runs the effects
(REQ-BED-007). Effects that wait on the world (an LLM request, a tool, a retry
timer, sub-agents) run as their own tasks and come back as events, so the loop
is always free to take the next event: a cancel is put at the head of the queue
(REQ-BED-005) and reaches `transition` while the work it cancels is still
running; `AbortLlm` / `AbortTool` then cancel that work. Anything a cancelled
task still manages to post finds a phase that no longer waits for it, and the
core ignores it — late results never add a second answer.

LLM text deltas bypass the core (they change no state) and go straight to the
watchers (REQ-BED-011).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from phoenix_nb.core import effects as fx
from phoenix_nb.core import events as ev
from phoenix_nb.core.codec import to_json
from phoenix_nb.core.messages import to_api_messages
from phoenix_nb.core.restore import restore
from phoenix_nb.core.states import (
    AwaitingContinuation,
    AwaitingModeApproval,
    ConvContext,
    ConvState,
    LlmRequesting,
    context_fraction,
    from_persisted,
    persisted_fields,
)
from phoenix_nb.core.transition import Rejection, continuation_prompt, transition
from phoenix_nb.core.values import SubAgentOutcome, TextBlock, ToolResult
from phoenix_nb.errors import Rejected
from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.llm.stream import LlmOutcome, TextDelta, ThinkingDelta, ToolInputDelta, ToolUseStart
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.lease import Timeout, lease_for
from phoenix_nb.runtime.ports import LlmProvider
from phoenix_nb.runtime.prompts import system_prompt
from phoenix_nb.store import Store
from phoenix_nb.tools.base import SandboxInfo, Tool, ToolContext
from phoenix_nb.tools.kernel_port import KernelPort
from phoenix_nb.tools.registry import api_tool_specs, run_tool

log = logging.getLogger(__name__)

# Events only a user sends; the kernel sending one must hold the conversation's lease.
USER_EVENTS = (
    ev.UserMessage,
    ev.UserCancel,
    ev.UserApproveUpgrade,
    ev.UserDenyUpgrade,
    ev.UserRequestDowngrade,
    ev.UserTriggerContinuation,
)


def is_rest(state: ConvState) -> bool:
    """The agent is not working and waits for nobody but the user."""
    return not state.busy


def is_paused(state: ConvState) -> bool:
    """The agent waits for the human's answer to an upgrade request (REQ-BED-015)."""
    return isinstance(state.phase, AwaitingModeApproval)


@dataclass
class Services:
    """What a conversation needs from the world, shared by all conversations."""

    store: Store
    provider: LlmProvider
    sandbox: SandboxInfo
    tools_for: Callable[[bool], Sequence[Tool]]
    retry_delay_scale: float = 1.0
    helper_model: str | None = None
    secret_patterns: tuple[str, ...] | None = None
    env_allow: tuple[str, ...] = ()
    kernel: KernelPort | None = None  # the Jupyter kernel (notebook layer), for the kernel tools
    kernel_access: bool = True
    thinking: Mapping[str, Any] | None = None
    spawner: Any = None  # SubAgentSpawner, set by the manager
    extra_tool_env: Mapping[str, Any] = field(default_factory=dict)


class ConversationRuntime:
    """The event loop of one conversation and the executor of its effects."""

    def __init__(
        self,
        *,
        record: Mapping[str, Any],
        context: ConvContext,
        state: ConvState,
        history: list[dict[str, Any]],
        services: Services,
        on_parent: Callable[[SubAgentOutcome], None] | None = None,
    ) -> None:
        self.record = dict(record)
        self.context = context
        self.state = state
        self.history = history
        self.services = services
        self.on_parent = on_parent
        self.hub = up.UpdateHub()
        self.tools: tuple[Tool, ...] = tuple(services.tools_for(context.is_sub_agent))
        self._queue: collections.deque[tuple[Any, asyncio.Future[Any]]] = collections.deque()
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._llm_task: asyncio.Task[None] | None = None
        self._tool_tasks: dict[str, asyncio.Task[None]] = {}
        self._timer_tasks: set[asyncio.Task[None]] = set()
        self._aborting: set[asyncio.Task[Any]] = set()
        self._lease: FileLock | None = None
        self._settled = asyncio.Event()
        self._update_settled()
        self.closed = False

    # ---- identity -------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def slug(self) -> str:
        return str(self.record.get("slug") or self.id)

    # ---- posting events ---------------------------------------------------------
    def post(self, event: Any, *, urgent: bool = False) -> asyncio.Future[Any]:
        """Queue an event; the future resolves to the Transition or Rejection."""
        if self.closed:
            raise RuntimeError(f"conversation {self.slug} is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if urgent:
            self._queue.appendleft((event, future))
        else:
            self._queue.append((event, future))
        self._settled.clear()
        self._wakeup.set()
        self._ensure_loop()
        return future

    async def submit(self, event: Any, *, urgent: bool = False) -> Any:
        """Post and wait for the core's answer; a rejection raises `Rejected`."""
        outcome = await self.post(event, urgent=urgent)
        if isinstance(outcome, Rejection):
            raise Rejected(outcome.message)
        return outcome

    def _ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(
                self._run(), name=f"phoenix-conversation-{self.slug}"
            )

    async def _run(self) -> None:
        while not self.closed:
            if not self._queue:
                self._update_settled()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            event, future = self._queue.popleft()
            try:
                outcome = self._step(event)
            except Exception as exc:  # a bug: keep the loop alive and tell the user
                log.exception("phoenix: failed to process %r", event)
                self.hub.publish(up.NOTICE, text=f"Internal error while handling an event: {exc}")
                outcome = Rejection(f"internal error: {exc}")
            if not future.done():
                future.set_result(outcome)

    def _step(self, event: Any) -> Any:
        if isinstance(event, USER_EVENTS) and not self._holds_lease():
            refused = self._claim()
            if refused is not None:
                return refused
        outcome = transition(self.state, self.context, event)
        if isinstance(outcome, Rejection):
            self._release_if_rest()
            return outcome
        previous = self.state
        self.state = outcome.state
        if self.state != previous:
            self.record = self.services.store.update_conversation(
                self.id, **persisted_fields(self.state)
            )
        self._execute(outcome.effects)
        if self.state != previous:
            self._publish_state()
        self._release_if_rest()
        return outcome

    # ---- two kernels, one store -----------------------------------------------------
    def _claim(self) -> Rejection | None:
        """Take the conversation's lease before it starts working, fresh from the store.

        Another kernel may have used this conversation since we loaded it: its
        messages and state are read back first, so our history never diverges.
        The lease (a file lock, released by the OS if a kernel dies) keeps two
        kernels from working on one conversation at once; a conversation another
        kernel left mid-work when it died is restored here, as at start-up.
        """
        if self._lease is None:
            self._lease = lease_for(self.services.store.root, self.id)
        try:
            self._lease.acquire(timeout=0)
        except Timeout:
            return Rejection(
                f"Conversation {self.slug} is working in another kernel. Wait for it to "
                "finish there (or cancel it there), or use another conversation."
            )
        store = self.services.store
        record = store.get_conversation(self.id) or self.record
        stored = from_persisted(record)
        if stored != self.state or store.message_count(self.id) != len(self.history):
            self.record, self.state = dict(record), stored
            self.history = store.messages(self.id)
        if not is_rest(self.state):
            state, repairs = restore(
                self.state, self.history, is_sub_agent=self.context.is_sub_agent
            )
            self._persist([fx.PersistMessage(kind, content) for kind, content in repairs])
            self.state = state
            self.record = store.update_conversation(self.id, **persisted_fields(state))
        return None

    def _holds_lease(self) -> bool:
        return self._lease is not None and self._lease.is_locked

    def _release_if_rest(self) -> None:
        if self._lease is not None and self._lease.is_locked and is_rest(self.state):
            self._lease.release()

    def annotate(self, text: str) -> None:
        """Record a system note (e.g. an answer given in advance) while the agent waits.

        Only at rest or paused, so it never lands between a tool_use and its result.
        """
        if not (is_rest(self.state) or is_paused(self.state)):
            raise Rejected("notes can only be added while the agent waits")
        self._persist([fx.PersistMessage("system", {"text": text})])

    # ---- effects -----------------------------------------------------------------
    def _execute(self, effects: Sequence[Any]) -> None:
        batch: list[fx.PersistMessage] = []
        for effect in effects:
            if isinstance(effect, fx.PersistMessage):
                batch.append(effect)
                continue
            if batch:
                self._persist(batch)
                batch = []
            self._run_effect(effect)
        if batch:
            self._persist(batch)

    def _persist(self, batch: Sequence[fx.PersistMessage]) -> None:
        items = [
            (
                m.kind,
                dict(m.content),
                dict(m.display) if m.display is not None else None,
                to_json(m.usage) if m.usage is not None else None,
            )
            for m in batch
        ]
        records = self.services.store.append_messages(self.id, items)
        self.history.extend(records)
        for record in records:
            self.hub.publish(up.MESSAGE, record=record)

    def _run_effect(self, effect: Any) -> None:
        match effect:
            case fx.RequestLlm():
                self._start_llm(continuation=None)
            case fx.RequestContinuation(rejected_calls=rejected):
                self._start_llm(continuation=continuation_prompt(rejected))
            case fx.ExecuteTool(call=call):
                self._start_tool(call)
            case fx.ScheduleRetry(delay=delay, attempt=attempt):
                self._schedule_retry(delay, attempt)
            case fx.AbortLlm():
                self._cancel_task(self._llm_task)
                for timer in list(self._timer_tasks):  # a pending retry is part of the request
                    self._cancel_task(timer)
            case fx.AbortTool(tool_use_id=tool_use_id):
                self._cancel_task(self._tool_tasks.get(tool_use_id))
            case fx.SpawnSubAgents():
                self._require_spawner().spawn(self, effect)
            case fx.CancelSubAgents(agent_ids=agent_ids):
                # The children's tasks count as aborted work: cancel() returns only
                # once their runtimes and processes are gone.
                for task in self._require_spawner().cancel(self, agent_ids) or ():
                    self._aborting.add(task)
                    task.add_done_callback(self._aborting.discard)
            case fx.Notify(kind=kind, data=data):
                self.hub.publish(kind, **dict(data))
            case fx.NotifyParent(outcome=outcome):
                if self.on_parent is not None:
                    self.on_parent(outcome)
            case _:
                raise TypeError(f"unknown effect {effect!r}")

    def _require_spawner(self) -> Any:
        if self.services.spawner is None:
            raise RuntimeError("sub-agents need a manager (no spawner configured)")
        return self.services.spawner

    def _cancel_task(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None and not task.done():
            task.cancel()
            self._aborting.add(task)
            task.add_done_callback(self._aborting.discard)

    async def aborted_work_stopped(self, timeout: float = 5.0) -> None:
        """Wait until cancelled requests and tools have really stopped (processes reaped)."""
        pending = [t for t in self._aborting if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def _track(self, coro: Any, name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(coro, name=f"{name}-{self.slug}")

    # ---- LLM ------------------------------------------------------------------------
    def _attempt(self) -> int:
        phase = self.state.phase
        if isinstance(phase, LlmRequesting | AwaitingContinuation):
            return phase.attempt
        return 1

    def build_request(self, continuation: str | None = None) -> LlmRequest:
        """The request for the current history; a continuation asks for a summary, no tools."""
        messages = _foreign_tools_as_text(
            to_api_messages(self.history), {tool.name for tool in self.tools}
        )
        if continuation is not None:
            messages = _append_user_text(_tools_as_text(messages), continuation)
        info = self.context.model_info
        max_tokens = info.max_output if info is not None else 4096
        return LlmRequest(
            model=self.context.model,
            system=system_prompt(cwd=self.context.cwd, is_sub_agent=self.context.is_sub_agent),
            messages=messages,
            tools=[] if continuation is not None else api_tool_specs(self.tools),
            max_tokens=max_tokens,
            thinking=self.services.thinking if continuation is None else None,
        )

    def _start_llm(self, *, continuation: str | None) -> None:
        if self._llm_task is not None and not self._llm_task.done():
            self._llm_task.cancel()
        attempt = self._attempt()
        self._llm_task = self._track(self._llm_call(attempt, continuation), "phoenix-llm")

    async def _llm_call(self, attempt: int, continuation: str | None) -> None:
        request = self.build_request(continuation)
        publish = self.hub.publish
        async for item in self.services.provider.stream(request):
            if type(item) is TextDelta:
                publish(up.TEXT_DELTA, index=item.index, text=item.text)
            elif type(item) is ThinkingDelta:
                publish(up.THINKING_DELTA, index=item.index, text=item.text)
            elif type(item) is ToolUseStart:
                publish(
                    up.TOOL_INPUT, index=item.index, id=item.id, name=item.name, partial_json=""
                )
            elif type(item) is ToolInputDelta:
                publish(up.TOOL_INPUT, index=item.index, partial_json=item.partial_json)
            elif isinstance(item, LlmOutcome):
                self.post(self._outcome_event(item, attempt, continuation is not None))

    @staticmethod
    def _outcome_event(outcome: LlmOutcome, attempt: int, continuation: bool) -> Any:
        if outcome.failure is not None:
            return ev.LlmError(outcome.failure, attempt)
        response = outcome.response
        assert response is not None
        if continuation:
            text = "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
            return ev.ContinuationResponse(summary=text, usage=response.usage)
        return ev.LlmResponse(response.content, response.stop_reason, response.usage)

    def _schedule_retry(self, delay: float, attempt: int) -> None:
        """The core already told watchers (Notify "retry"); tests may shrink the wait."""
        scaled = max(0.0, delay * self.services.retry_delay_scale)

        async def fire() -> None:
            await asyncio.sleep(scaled)
            self.post(ev.RetryTimeout(attempt))

        task = self._track(fire(), "phoenix-retry")
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)

    # ---- tools --------------------------------------------------------------------------
    def tool_context(self) -> ToolContext:
        kwargs: dict[str, Any] = {}
        if self.services.secret_patterns is not None:
            kwargs["secret_patterns"] = self.services.secret_patterns
        return ToolContext(
            cwd=Path(self.context.cwd),
            mode=self.state.mode,
            sandbox=self.services.sandbox,
            conversation_id=self.id,
            helper_llm=self._helper_llm if self.services.helper_model else None,
            extra=self.services.extra_tool_env,
            env_allow=self.services.env_allow,
            kernel=self.services.kernel,
            kernel_access=self.services.kernel_access,
            **kwargs,
        )

    async def _helper_llm(self, system: str, prompt: str) -> str:
        model = self.services.helper_model or self.context.model
        request = LlmRequest(
            model=model,
            system=system,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1024,
        )
        return await self.services.provider.complete_text(request)

    def _start_tool(self, call: Any) -> None:
        self.hub.publish(up.TOOL_STARTED, id=call.id, name=call.name, input=dict(call.input))
        task = self._track(self._tool_call(call), "phoenix-tool")
        self._tool_tasks[call.id] = task
        task.add_done_callback(lambda _t, key=call.id: self._tool_tasks.pop(key, None))

    async def _tool_call(self, call: Any) -> None:
        result: ToolResult = await run_tool(
            self.tools, call.name, dict(call.input), self.tool_context(), call.id
        )
        self.post(ev.ToolComplete(result))

    # ---- watchers ------------------------------------------------------------------------
    def usage_summary(self) -> dict[str, Any]:
        window = self.context.window
        usage = self.state.last_usage
        used = usage.context_tokens if usage is not None else 0
        fraction = context_fraction(usage, window)
        return {
            "used": used,
            "window": window,
            "fraction": fraction,
            "warning": fraction >= 0.80,
            "limit_reached": fraction >= 0.90,
        }

    def _publish_state(self) -> None:
        self.hub.publish(up.STATE, state=self.state)
        if self.state.last_usage is not None:
            self.hub.publish(up.USAGE, **self.usage_summary())
        if is_paused(self.state):
            phase = self.state.phase
            assert isinstance(phase, AwaitingModeApproval)
            self.hub.publish(up.APPROVAL, reason=phase.reason, tool_use_id=phase.tool_use_id)
        if is_rest(self.state):
            self.hub.publish(up.REST, state=self.state)
        self._update_settled()

    def _update_settled(self) -> None:
        if (is_rest(self.state) or is_paused(self.state)) and not self._queue:
            self._settled.set()
        else:
            self._settled.clear()

    async def wait_settled(self) -> ConvState:
        """Wait until the agent rests or waits for the human; returns that state."""
        while True:
            await self._settled.wait()
            if not self._queue and (is_rest(self.state) or is_paused(self.state)):
                return self.state
            self._settled.clear()

    # ---- lifecycle -------------------------------------------------------------------------
    def live_tasks(self) -> list[asyncio.Task[Any]]:
        tasks = [self._llm_task, *self._tool_tasks.values(), *self._timer_tasks]
        return [t for t in tasks if t is not None and not t.done()]

    async def close(self) -> None:
        """Stop the loop and every task it started; processes die with their tool tasks."""
        self.closed = True
        tasks = self.live_tasks()
        if self._loop_task is not None and not self._loop_task.done():
            tasks.append(self._loop_task)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for _event, future in self._queue:
            if not future.done():
                future.set_result(Rejection("the conversation was closed"))
        self._queue.clear()
        if self._lease is not None and self._lease.is_locked:
            self._lease.release(force=True)


def _tools_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls and results as plain text, for a request that offers no tools.

    The API refuses tool_use blocks in a request without tool definitions, and a
    continuation request must not offer tools (REQ-BED-020).
    """
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(message)
            continue
        blocks = []
        for block in content:
            kind = block.get("type")
            if kind == "tool_use":
                call = json.dumps(block.get("input", {}), ensure_ascii=False)[:2000]
                blocks.append({"type": "text", "text": f"[called {block['name']}: {call}]"})
            elif kind == "tool_result":
                result = block.get("content")
                if isinstance(result, list):
                    result = " ".join(str(b.get("text", "")) for b in result if isinstance(b, dict))
                blocks.append({"type": "text", "text": f"[result: {str(result)[:2000]}]"})
            elif kind in ("thinking", "redacted_thinking"):
                continue
            else:
                blocks.append(block)
        out.append({"role": message["role"], "content": blocks or [{"type": "text", "text": "…"}]})
    return out


def _foreign_tools_as_text(
    messages: list[dict[str, Any]], offered: set[str]
) -> list[dict[str, Any]]:
    """Calls of tools this conversation does not offer, and their results, as text.

    A model may call a tool it was not given (a sub-agent asking for
    spawn_agents); the core answers with an error result, but the API refuses a
    history whose tool_use names an unknown tool. Turned into text, the call and
    its refusal stay visible to the model and the request stays valid.
    """
    foreign = {
        block["id"]
        for message in messages
        if message["role"] == "assistant" and not isinstance(message["content"], str)
        for block in message["content"]
        if block.get("type") == "tool_use" and block.get("name") not in offered
    }
    if not foreign:
        return messages
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(message)
            continue
        results: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type")
            if kind == "tool_use" and block.get("id") in foreign:
                call = json.dumps(block.get("input", {}), ensure_ascii=False)[:2000]
                blocks.append({"type": "text", "text": f"[called {block['name']}: {call}]"})
            elif kind == "tool_result" and block.get("tool_use_id") in foreign:
                result = block.get("content")
                if isinstance(result, list):
                    result = " ".join(str(b.get("text", "")) for b in result if isinstance(b, dict))
                blocks.append({"type": "text", "text": f"[result: {str(result)[:2000]}]"})
            elif kind == "tool_result":
                results.append(block)  # the API wants tool results first
            else:
                blocks.append(block)
        out.append({"role": message["role"], "content": results + blocks})
    return out


def _append_user_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Add a user text block at the end, merging into a trailing user message."""
    out = list(messages)
    block = {"type": "text", "text": text}
    if out and out[-1]["role"] == "user":
        content = out[-1]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        out[-1] = {"role": "user", "content": [*blocks, block]}
    else:
        out.append({"role": "user", "content": [block]})
    return out
