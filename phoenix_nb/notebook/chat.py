"""`%phoenix chat`: a chat panel driving the same runtime from widgets.

Turns run as background tasks on the kernel's loop, so the notebook stays
usable while the agent works. Output from a background task must go through
widget traits (NOTES.md: `print` from a task lands in the wrong cell), so the
transcript is an `Output` widget whose `outputs` trait is set to the record's
bundle: JupyterLab draws it with the same MIME renderer as a `%%phoenix` cell
(same labels, same look, light or dark), and other front ends with the same
HTML fallback. Streaming updates send only the record (throttled like the cell
display); the fallbacks are rendered when the turn rests.

The footer says the state in words and shows only the buttons that can act:
Approve / Deny while a request waits, Cancel while the agent works.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import ipywidgets as w

from phoenix_nb.notebook._render.view import state_line
from phoenix_nb.notebook.cell import decorate
from phoenix_nb.notebook.render import MIME_TYPE, render_bundle
from phoenix_nb.notebook.session import Session
from phoenix_nb.notebook.throttle import GrowthThrottle
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, PhoenixError


def _shown(button: w.Button, visible: bool) -> None:
    button.layout.display = "" if visible else "none"


class ChatPanel:
    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.conv: Conversation = session.current_conversation_or_new()
        self.input = w.Textarea(placeholder="Ask phoenix…", layout=w.Layout(width="auto"))
        self.send_button = w.Button(description="Send", button_style="primary")
        self.cancel_button = w.Button(description="Cancel", button_style="warning")
        self.approve_button = w.Button(description="Approve", button_style="success")
        self.deny_button = w.Button(description="Deny", button_style="danger")
        self.transcript = w.Output(layout=w.Layout(width="auto"))
        self.status = w.HTML()
        self.status.add_class("jp-Phoenix-chatStatus")
        self.throttle = GrowthThrottle()
        self.task: asyncio.Task[None] | None = None
        self.send_button.on_click(lambda _b: self._soon(self._send))
        self.cancel_button.on_click(lambda _b: self._soon(self.conv.cancel))
        self.approve_button.on_click(lambda _b: self._soon(self.conv.approve))
        self.deny_button.on_click(lambda _b: self._soon(self.conv.deny))
        buttons = w.HBox(
            [self.send_button, self.cancel_button, self.approve_button, self.deny_button],
            layout=w.Layout(flex_flow="row wrap"),
        )
        buttons.add_class("jp-Phoenix-controls")
        self.widget = w.VBox(
            [self.transcript, self.status, self.input, buttons],
            layout=w.Layout(width="auto"),
        )
        self.widget.add_class("jp-Phoenix-chat")
        self.refresh(force=True)

    def _soon(self, action: Any) -> None:
        """Widget handlers may run on another thread: hand the work to the kernel loop."""

        def start() -> None:
            async def run() -> None:
                try:
                    await action()
                except PhoenixError as exc:
                    self.status.value = f"<b>{_escape(str(exc))}</b>"
                    return
                self.refresh(force=True)

            self.loop.create_task(run())

        self.loop.call_soon_threadsafe(start)

    async def _send(self) -> None:
        text = self.input.value.strip()
        if not text:
            return
        sub = self.conv.subscribe()
        try:
            await self.conv.post_message(text)
        except PhoenixError:
            sub.close()
            raise
        self.input.value = ""
        self.task = self.loop.create_task(self._follow(sub))

    async def _follow(self, sub: up.Subscription) -> None:
        try:
            async for update in sub:
                self.refresh(force=update.kind != up.TEXT_DELTA)
                settled = is_rest(self.conv.state) or is_paused(self.conv.state)
                if settled and update.kind in (up.REST, up.APPROVAL, up.STATE):
                    break
        finally:
            sub.close()
            self.refresh(force=True)

    def refresh(self, *, force: bool) -> None:
        state = self.conv.state
        settled = is_rest(state) or is_paused(state)
        record = decorate(self.conv.payload(), self.session, self.conv.history())
        size = len(json.dumps(record))
        now = time.monotonic()
        if not self.throttle.should_send(size, now, structural=force):
            return
        self.throttle.sent(size, now)
        # At rest the full bundle (fallbacks for other front ends); while streaming the record.
        data = render_bundle(record) if settled else {MIME_TYPE: record, "text/plain": ""}
        self.transcript.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
        pending = is_paused(state)
        _shown(self.approve_button, pending)
        _shown(self.deny_button, pending)
        _shown(self.cancel_button, not is_rest(state) and not pending)
        self.send_button.disabled = not is_rest(state)
        words = state_line(record.get("conversation", {}).get("state", {}), record)
        self.status.value = _escape(f"{self.conv.slug} · {words} · {self.conv.mode.value}")


def _escape(text: str) -> str:
    import html

    return html.escape(text)
