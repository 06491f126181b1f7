"""`%phoenix chat`: a chat panel driving the same runtime from widgets.

Turns run as background tasks on the kernel's loop, so the notebook stays
usable while the agent works. Output from a background task must go through
widget traits (NOTES.md: `print` from a task lands in the wrong cell), so the
transcript is an HTML widget re-rendered from the record, throttled like the
cell display.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ipywidgets as w

from phoenix_nb.notebook.render import render_html
from phoenix_nb.notebook.session import Session
from phoenix_nb.notebook.throttle import GrowthThrottle
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, PhoenixError


class ChatPanel:
    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.conv: Conversation = session.current_conversation_or_new()
        self.input = w.Textarea(placeholder="Ask phoenix…", layout=w.Layout(width="100%"))
        self.send_button = w.Button(description="Send", button_style="primary")
        self.cancel_button = w.Button(description="Cancel", button_style="warning")
        self.approve_button = w.Button(description="Approve", button_style="success")
        self.deny_button = w.Button(description="Deny", button_style="danger")
        self.transcript = w.HTML()
        self.status = w.HTML()
        self.throttle = GrowthThrottle()
        self.task: asyncio.Task[None] | None = None
        self.send_button.on_click(lambda _b: self._soon(self._send))
        self.cancel_button.on_click(lambda _b: self._soon(self.conv.cancel))
        self.approve_button.on_click(lambda _b: self._soon(self.conv.approve))
        self.deny_button.on_click(lambda _b: self._soon(self.conv.deny))
        self.widget = w.VBox(
            [
                self.transcript,
                self.status,
                self.input,
                w.HBox(
                    [self.send_button, self.cancel_button, self.approve_button, self.deny_button]
                ),
            ]
        )
        self.refresh(force=True)

    def _soon(self, action: Any) -> None:
        """Widget handlers may run on another thread: hand the work to the kernel loop."""

        def start() -> None:
            async def run() -> None:
                try:
                    await action()
                except PhoenixError as exc:
                    self.status.value = f"<b>{_escape(str(exc))}</b>"
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
        record = self.conv.payload()
        html = render_html(record)
        now = time.monotonic()
        if not self.throttle.should_send(len(html), now, structural=force):
            return
        self.throttle.sent(len(html), now)
        self.transcript.value = html
        usage = self.conv.usage()
        state = self.conv.state
        pending = is_paused(state)
        self.approve_button.disabled = self.deny_button.disabled = not pending
        self.cancel_button.disabled = is_rest(state)
        self.send_button.disabled = not is_rest(state)
        self.status.value = _escape(
            f"{self.conv.slug} · {state.name} · {self.conv.mode.value} · context "
            f"{usage['used']:,}/{usage['window']:,} ({100 * usage['fraction']:.0f}%)"
        )


def _escape(text: str) -> str:
    import html

    return html.escape(text)
