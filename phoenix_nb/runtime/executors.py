"""The executors of a conversation's effects that wait on the world.

An LLM request, a tool call and a retry timer each run as their own asyncio
task and come back to the conversation as a core event through `post`, so the
conversation's loop is always free to take the next event (a cancel jumps the
queue and reaches the core while the work it cancels still runs). Each
executor owns its tasks; `Work` remembers the ones cancelled but not yet
finished, so a cancel can return only once their processes are gone.

Sub-agents are the fourth executor (`subagents.py`); the loop that dispatches
to all of them is `conversation.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from phoenix_nb.core import events as ev
from phoenix_nb.core.values import ErrorKind, LlmFailure, TextBlock, ToolUseBlock
from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.llm.stream import (
    LlmOutcome,
    ProviderNotice,
    ServerToolInputDelta,
    ServerToolUseStart,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
)
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.ports import EventSink, LlmProvider, ToolRunner
from phoenix_nb.runtime.turn_pool import PoolGate
from phoenix_nb.tools.base import Tool, ToolContext


class Work:
    """The tasks one conversation started, and those cancelled but still stopping."""

    def __init__(self, slug: str) -> None:
        self.slug = slug
        self.stopping: set[asyncio.Task[Any]] = set()

    def start(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(coro, name=f"{name}-{self.slug}")

    def cancel(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None and not task.done():
            task.cancel()
            self.follow(task)

    def follow(self, task: asyncio.Task[Any]) -> None:
        """Count a task someone else cancelled (a sub-agent) as stopping work."""
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def stopped(self, timeout: float) -> None:
        pending = [t for t in self.stopping if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)


class LlmExecutor:
    """One streamed request at a time; deltas go to watchers, the outcome to the core."""

    def __init__(
        self, provider: LlmProvider, hub: up.UpdateHub, post: EventSink, work: Work
    ) -> None:
        self.provider = provider
        self.hub = hub
        self.post = post
        self.work = work
        self.task: asyncio.Task[None] | None = None
        # A sub-agent's: each request is reserved from its parent turn's budget first
        # (`turn_pool`), its response's price counted before the reservation ends.
        self.gate: PoolGate | None = None

    def start(
        self,
        request: LlmRequest,
        attempt: int,
        *,
        continuation: bool,
        prepare: Callable[[LlmRequest], LlmRequest] | None = None,
    ) -> None:
        """Send `request`; `prepare`, when given, finishes it in a worker thread first
        (work that walks the whole history, kept off the event loop), inside the
        request's task, so an abort cancels it like the request itself."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
        call = self._call(request, attempt, continuation, prepare)
        self.task = self.work.start(call, "phoenix-llm")

    def abort(self) -> None:
        self.work.cancel(self.task)

    async def _call(
        self,
        request: LlmRequest,
        attempt: int,
        continuation: bool,
        prepare: Callable[[LlmRequest], LlmRequest] | None = None,
    ) -> None:
        gate = self.gate
        if gate is not None and not continuation:
            refused = await gate.enter()
            if refused is not None:  # the turn's budget is spent: nothing is sent
                self.post(ev.LlmError(LlmFailure(ErrorKind.UNKNOWN, refused, False), attempt))
                return
            try:
                await self._send(request, attempt, continuation, prepare, gate)
            finally:
                gate.leave()
            return
        await self._send(request, attempt, continuation, prepare, None)

    async def _send(
        self,
        request: LlmRequest,
        attempt: int,
        continuation: bool,
        prepare: Callable[[LlmRequest], LlmRequest] | None,
        gate: PoolGate | None,
    ) -> None:
        if prepare is not None:
            request = await asyncio.to_thread(prepare, request)
        publish = self.hub.publish
        async for item in self.provider.stream(request):
            # Deltas change no state: they bypass the core (REQ-BED-011).
            if type(item) is TextDelta:
                publish(up.StreamedText(item.index, item.text))
            elif type(item) is ThinkingDelta:
                publish(up.StreamedThinking(item.index, item.text))
            elif type(item) is ToolUseStart:
                publish(up.ToolInput(item.index, "", id=item.id, name=item.name))
            elif type(item) is ToolInputDelta:
                publish(up.ToolInput(item.index, item.partial_json))
            elif type(item) is ServerToolUseStart:
                publish(up.ServerTool(item.index, "", id=item.id, name=item.name, kind=item.kind))
            elif type(item) is ServerToolInputDelta:
                publish(up.ServerTool(item.index, item.partial_json))
            elif isinstance(item, LlmOutcome):
                if gate is not None and item.response is not None:
                    gate.spend(item.response.usage)
                self.post(outcome_event(item, attempt, continuation))
            elif type(item) is ProviderNotice:  # a feature the server rejected, now off
                publish(up.NoticeText(item.text))

    def live(self) -> list[asyncio.Task[Any]]:
        return [self.task] if self.task is not None and not self.task.done() else []


def outcome_event(outcome: LlmOutcome, attempt: int, continuation: bool) -> ev.Event:
    """The core event a finished stream becomes."""
    if outcome.failure is not None:
        return ev.LlmError(outcome.failure, attempt)
    response = outcome.response
    assert response is not None
    if continuation:
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
        return ev.ContinuationResponse(summary=text, usage=response.usage)
    return ev.LlmResponse(response.content, response.stop_reason, response.usage)


class ToolExecutor:
    """Tool calls, each in its own task; an aborted one is cancelled (its processes die)."""

    def __init__(
        self,
        tools: Sequence[Tool],
        runner: ToolRunner,
        hub: up.UpdateHub,
        post: EventSink,
        work: Work,
    ) -> None:
        self.tools = tuple(tools)
        self.runner = runner
        self.hub = hub
        self.post = post
        self.work = work
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, call: ToolUseBlock, context: ToolContext) -> None:
        self.hub.publish(up.ToolStarted(call.id, call.name, dict(call.input)))
        task = self.work.start(self._call(call, context), "phoenix-tool")
        self.tasks[call.id] = task

        def forget(_: asyncio.Task[None], key: str = call.id) -> None:
            self.tasks.pop(key, None)

        task.add_done_callback(forget)

    def abort(self, tool_use_id: str) -> None:
        self.work.cancel(self.tasks.get(tool_use_id))

    async def _call(self, call: ToolUseBlock, context: ToolContext) -> None:
        result = await self.runner(self.tools, call.name, dict(call.input), context, call.id)
        self.post(ev.ToolComplete(result))

    def live(self) -> list[asyncio.Task[Any]]:
        return [t for t in self.tasks.values() if not t.done()]


class RetryTimers:
    """Backoff timers (REQ-BED-006); the core already told watchers about the retry."""

    def __init__(self, post: EventSink, work: Work, scale: Callable[[], float]) -> None:
        self.post = post
        self.work = work
        self.scale = scale  # tests shrink real backoff delays
        self.tasks: set[asyncio.Task[None]] = set()

    def schedule(self, delay: float, attempt: int) -> None:
        wait = max(0.0, delay * self.scale())

        async def fire() -> None:
            await asyncio.sleep(wait)
            self.post(ev.RetryTimeout(attempt))

        task = self.work.start(fire(), "phoenix-retry")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def abort(self) -> None:
        for task in list(self.tasks):
            self.work.cancel(task)

    def live(self) -> list[asyncio.Task[Any]]:
        return [t for t in self.tasks if not t.done()]
