"""The kernel comm that re-offers waiting requests to a front end that (re)connects.

A turn waiting for approval ends its cell, and its view goes on detached, updating
that cell's outputs by display id (cell.py). A page that has those outputs (it ran
the cell, or the notebook was saved with them) shows the controls again after a
reload. A page that never had them — the notebook reopened in a new tab before it
was saved, or its outputs cleared — would show nothing to answer. So the
labextension (labextension/src/pending.ts) opens a comm with target
`phoenix.pending` whenever it connects to a notebook's kernel; `extension.load`
registers the target (a kernel without phoenix closes the comm at once). The kernel
lists `Phoenix.pending` there, and again whenever it may have changed
(`PendingRequests.watch`). For a request whose detached view is shown in a cell the
front end does not show it in, the front end asks for that view's outputs and puts
them back into the cell (the record and the live controls, whose widget then
answers as usual; later updates find them by display id). Where the cell cannot be
found, it shows a notice whose buttons answer here, by id.

Messages (`data` of comm messages), kernel → front end:
  {"type": "pending", "requests": [PendingRequest JSON, …]}   every waiting request;
      `detail.cell_id` is the asking cell's id and `detail.outputs` the display ids
      its outputs carry (space-separated) when a detached view shows it
  {"type": "outputs", "id", "cell_id", "execution_count", "outputs": [display_data, …]}
  {"type": "refused", "id", "text"}       an answer that could not be taken
front end → kernel:
  {"type": "hello"}                        list again
  {"type": "outputs", "id"}                the outputs of the view showing request `id`
  {"type": "answer", "id", "answer"}       one of the request's `answers`

Anything else is ignored: the front end is not trusted to name requests that do not
wait (`PendingRequests.answer` checks both the id and the answer). Handlers may run
on a subshell thread; everything is handed to the kernel's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from phoenix_nb.errors import PhoenixError
from phoenix_nb.notebook.session import Session

__all__ = ["TARGET", "PendingChannel", "close_all", "open_channel"]

TARGET = "phoenix.pending"
# A page that goes away without closing its comm leaves its channel behind: the oldest
# go when there are more than this (a comm the front end still uses reopens on reload).
MAX_CHANNELS = 16
_CHANNELS: list[PendingChannel] = []


class PendingChannel:
    """One front end's comm: the waiting requests as they change, answers by id."""

    def __init__(self, comm: Any, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self.comm = comm
        self.session = session
        self.loop = loop
        self._sent: list[dict[str, object]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._unwatch = session.phoenix.pending.watch(self._changed)

    def _changed(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the kernel is ending
            self.loop.call_soon_threadsafe(self.sync, False)

    def sync(self, always: bool = True) -> None:
        """Send the waiting requests (on the loop); unchanged ones only when asked."""
        requests = [r.as_json() for r in self.session.phoenix.pending.list()]
        if always or requests != self._sent:
            self._sent = requests
            self._send({"type": "pending", "requests": requests})

    def _send(self, data: Mapping[str, Any]) -> None:
        with contextlib.suppress(Exception):  # a closed socket must not break the turn
            self.comm.send(dict(data))

    def on_msg(self, msg: Mapping[str, Any]) -> None:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        data = content.get("data") if isinstance(content, Mapping) else None
        if not isinstance(data, Mapping):
            return
        kind, request_id = data.get("type"), data.get("id")
        if kind == "hello":
            self.loop.call_soon_threadsafe(self.sync, True)
        elif kind == "outputs" and isinstance(request_id, str):
            self.loop.call_soon_threadsafe(self._outputs, request_id)
        elif kind == "answer" and isinstance(request_id, str):
            answer = data.get("answer")
            if isinstance(answer, str):
                self.loop.call_soon_threadsafe(self._answer_soon, request_id, answer)

    def _outputs(self, request_id: str) -> None:
        for request in self.session.phoenix.pending.list():
            if request.id != request_id:
                continue
            view = self.session.shown_turns.get(request.conversation)
            if view is not None:
                self._send(
                    {
                        "type": "outputs",
                        "id": request_id,
                        "cell_id": view.cell_id,
                        "execution_count": view.execution_count,
                        "outputs": view.outputs(),
                    }
                )
            return

    def _answer_soon(self, request_id: str, answer: str) -> None:
        task = self.loop.create_task(self._answer(request_id, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, request_id: str, answer: str) -> None:
        try:
            await self.session.phoenix.pending.answer(request_id, answer)
        except PhoenixError as exc:
            self._send({"type": "refused", "id": request_id, "text": str(exc)})

    def close(self) -> None:
        self._unwatch()


def open_channel(comm: Any, session: Session, loop: asyncio.AbstractEventLoop) -> PendingChannel:
    """A front end opened `comm` (the target `extension.load` registered): list for it."""
    channel = PendingChannel(comm, session, loop)
    _CHANNELS.append(channel)
    while len(_CHANNELS) > MAX_CHANNELS:
        _CHANNELS.pop(0).close()

    def closed(_close_msg: Any) -> None:
        channel.close()
        if channel in _CHANNELS:
            _CHANNELS.remove(channel)

    comm.on_msg(channel.on_msg)
    comm.on_close(closed)
    loop.call_soon_threadsafe(channel.sync, True)
    return channel


def close_all() -> None:
    """Stop every channel (`%unload_ext`)."""
    for channel in list(_CHANNELS):
        channel.close()
        with contextlib.suppress(Exception):
            channel.comm.close()
    _CHANNELS.clear()
