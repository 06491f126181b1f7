"""What watchers of a conversation are told (REQ-BED-011).

The runtime publishes one stream of `Update`s per conversation; any number of
watchers (a cell's display, the chat panel, a test, a parent waiting on a
sub-agent) subscribe. Each subscriber has its own unbounded queue, so a slow
watcher never blocks the conversation and none misses an update; a subscriber
that stops iterating should `close()` its subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from phoenix_nb.core.notices import Notice, NoticeData
from phoenix_nb.core.states import ConvState
from phoenix_nb.core.stored import StoredMessage


class UpdateKind(StrEnum):
    """Update kinds the runtime itself publishes, in the words the UI uses.

    The core's notifications (`core.notices.Notice`: retry, mode changes …) are
    published under their own kind; an update's kind is one of the two enums.
    Each runtime kind has one payload class below (its `KIND`), so a watcher that
    narrows `update.data` with isinstance reads fields mypy checks.
    """

    STATE = "state"
    TEXT_DELTA = "text_delta"
    THINKING_DELTA = "thinking_delta"
    TOOL_STARTED = "tool_started"
    TOOL_INPUT = "tool_input"
    # A call the API runs itself (web search, code execution, MCP): shown, never executed here.
    SERVER_TOOL = "server_tool"
    MESSAGE = "message"
    USAGE = "usage"
    APPROVAL = "approval"
    NOTICE = "notice"  # something the user should read (e.g. rejections)
    REST = "rest"  # the conversation stopped working (idle/error/…)


Kind = UpdateKind | Notice

# The names watchers use (`up.STATE` …), one per kind.
STATE = UpdateKind.STATE
TEXT_DELTA = UpdateKind.TEXT_DELTA
THINKING_DELTA = UpdateKind.THINKING_DELTA
TOOL_STARTED = UpdateKind.TOOL_STARTED
TOOL_INPUT = UpdateKind.TOOL_INPUT
SERVER_TOOL = UpdateKind.SERVER_TOOL
MESSAGE = UpdateKind.MESSAGE
USAGE = UpdateKind.USAGE
RETRY = Notice.RETRY  # data: core.notices.RetryScheduled
APPROVAL = UpdateKind.APPROVAL
NOTICE = UpdateKind.NOTICE
REST = UpdateKind.REST


# --- payloads: one frozen dataclass per runtime kind, shared by producer and watchers --


@dataclass(frozen=True)
class StateChanged:
    KIND: ClassVar[UpdateKind] = UpdateKind.STATE
    state: ConvState


@dataclass(frozen=True)
class Rested:
    """The conversation stopped working (idle, error, finished …)."""

    KIND: ClassVar[UpdateKind] = UpdateKind.REST
    state: ConvState


@dataclass(frozen=True)
class StreamedText:
    """Answer text streamed into block `index` (the provider's `TextDelta`); not saved."""

    KIND: ClassVar[UpdateKind] = UpdateKind.TEXT_DELTA
    index: int
    text: str


@dataclass(frozen=True)
class StreamedThinking:
    """Reasoning streamed into block `index` (the provider's `ThinkingDelta`); not saved."""

    KIND: ClassVar[UpdateKind] = UpdateKind.THINKING_DELTA
    index: int
    text: str


@dataclass(frozen=True)
class ToolStarted:
    KIND: ClassVar[UpdateKind] = UpdateKind.TOOL_STARTED
    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ToolInput:
    """A tool call's input as it streams; `id`/`name` only on the first, which has no JSON."""

    KIND: ClassVar[UpdateKind] = UpdateKind.TOOL_INPUT
    index: int
    partial_json: str
    id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class ServerTool:
    """A server tool call streaming; `id`/`name`/`kind` (its block type) only on the first."""

    KIND: ClassVar[UpdateKind] = UpdateKind.SERVER_TOOL
    index: int
    partial_json: str
    id: str | None = None
    name: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class MessageSaved:
    """One message was persisted, as the store holds it."""

    KIND: ClassVar[UpdateKind] = UpdateKind.MESSAGE
    message: StoredMessage


@dataclass(frozen=True)
class ContextUsage:
    """How full the context window is (REQ-BED-023)."""

    KIND: ClassVar[UpdateKind] = UpdateKind.USAGE
    used: int
    window: int
    fraction: float
    warning: bool
    limit_reached: bool


@dataclass(frozen=True)
class ApprovalNeeded:
    KIND: ClassVar[UpdateKind] = UpdateKind.APPROVAL
    reason: str
    tool_use_id: str


@dataclass(frozen=True)
class NoticeText:
    KIND: ClassVar[UpdateKind] = UpdateKind.NOTICE
    text: str


Payload = (
    StateChanged
    | Rested
    | StreamedText
    | StreamedThinking
    | ToolStarted
    | ToolInput
    | ServerTool
    | MessageSaved
    | ContextUsage
    | ApprovalNeeded
    | NoticeText
)


@dataclass(frozen=True)
class Update:
    """One update: a runtime payload under its own kind, or a core notice (data may be None)."""

    kind: Kind
    data: Payload | NoticeData | None = field(default=None)


class Subscription:
    """An async iterator over one watcher's updates."""

    def __init__(self, hub: UpdateHub) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[Update | None] = asyncio.Queue()
        self.closed = False

    def _put(self, update: Update | None) -> None:
        self._queue.put_nowait(update)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._hub._remove(self)
            self._queue.put_nowait(None)

    def pending_count(self) -> int:
        return self._queue.qsize()

    def pending(self) -> list[Update]:
        """Updates already queued, without waiting."""
        out: list[Update] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is None:
                break
            out.append(item)
        return out

    def __aiter__(self) -> AsyncIterator[Update]:
        return self

    async def __anext__(self) -> Update:
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item


class UpdateHub:
    """Fan-out of one conversation's updates to its subscribers and callbacks."""

    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._callbacks: list[Callable[[Update], None]] = []

    def subscribe(self) -> Subscription:
        sub = Subscription(self)
        self._subscriptions.append(sub)
        return sub

    def add_callback(self, callback: Callable[[Update], None]) -> Callable[[], None]:
        """Call `callback` synchronously for each update; returns a remover."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)

    def publish(self, data: Payload) -> None:
        """Publish a runtime update; its kind is its payload's."""
        self._send(Update(data.KIND, data))

    def notify(self, kind: Notice, data: NoticeData | None = None) -> None:
        """Publish one of the core's notifications (`core.effects.Notify`)."""
        self._send(Update(kind, data))

    def _send(self, update: Update) -> None:
        for sub in list(self._subscriptions):
            sub._put(update)
        for callback in list(self._callbacks):
            callback(update)
