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
from typing import Any

from phoenix_nb.core.notices import Notice


class UpdateKind(StrEnum):
    """Update kinds the runtime itself publishes, in the words the UI uses.

    The core's notifications (`core.notices.Notice`: retry, mode changes …) are
    published under their own kind; an update's kind is one of the two enums.
    """

    STATE = "state"  # data: {"state": <ConvState>}
    TEXT_DELTA = "text_delta"  # data: {"index", "text"}
    THINKING_DELTA = "thinking_delta"  # data: {"index", "text"}
    TOOL_STARTED = "tool_started"  # data: {"id", "name", "input"}
    TOOL_INPUT = "tool_input"  # data: {"index", "id", "name", "partial_json"}
    # A call the API runs itself (web search, code execution, MCP): shown, never executed here.
    SERVER_TOOL = "server_tool"  # data: {"index", "partial_json"} (+ "id", "name", "kind")
    MESSAGE = "message"  # data: {"record": <persisted message record>}
    USAGE = "usage"  # data: {"used", "window", "fraction", "warning", "limit_reached"}
    APPROVAL = "approval"  # data: {"reason", "tool_use_id"}
    NOTICE = "notice"  # data: {"text"} — something the user should read (e.g. rejections)
    REST = "rest"  # data: {"state": ...} — the conversation stopped working (idle/error/…)


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
RETRY = Notice.RETRY  # data: {"attempt", "max", "delay", "kind", "message"}
APPROVAL = UpdateKind.APPROVAL
NOTICE = UpdateKind.NOTICE
REST = UpdateKind.REST


@dataclass(frozen=True)
class Update:
    kind: Kind
    data: Mapping[str, Any] = field(default_factory=dict)


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

    def publish(self, kind: Kind, /, **data: Any) -> None:
        update = Update(kind, data)
        for sub in list(self._subscriptions):
            sub._put(update)
        for callback in list(self._callbacks):
            callback(update)
