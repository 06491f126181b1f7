"""Live controls of a running turn (ipywidgets).

They exist only while the turn runs and are closed when it rests, so a saved
notebook holds no dead widgets; a still-pending approval keeps its buttons.
Widget handlers may run on a subshell thread (JupyterLab 4.4+), so every
handler hands its work to the kernel's loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import ipywidgets as w

from phoenix_nb.runtime.manager import Conversation, PhoenixError

Action = Callable[[], Awaitable[None]]


class Controls:
    """Cancel, Approve/Deny with the agent's reason, Restrict, mode badge, meter, retry, errors."""

    def __init__(
        self,
        conv: Conversation,
        *,
        loop: asyncio.AbstractEventLoop,
        on_continue: Action | None = None,
        sandbox_available: bool = True,
    ) -> None:
        self.conv = conv
        self.loop = loop
        self.errors: list[str] = []
        self.cancel_button = w.Button(description="Cancel", button_style="warning", icon="stop")
        self.approve_button = w.Button(description="Approve", button_style="success")
        self.deny_button = w.Button(description="Deny", button_style="danger")
        self.restrict_button = w.Button(description="Restrict", tooltip="Back to read-only now")
        self.continue_button = w.Button(
            description="Continue in a new conversation", layout=w.Layout(width="auto")
        )
        self.reason = w.HTML()
        self.badge = w.HTML()
        self.meter = w.HTML()
        self.retry = w.HTML()
        self.notice = w.HTML()
        self.approval_box = w.VBox([self.reason, w.HBox([self.approve_button, self.deny_button])])
        self.approval_box.layout.display = "none"
        self.continue_button.layout.display = "none"
        self.sandbox_available = sandbox_available

        self._wire(self.cancel_button, conv.cancel)
        self._wire(self.approve_button, conv.approve)
        self._wire(self.deny_button, conv.deny)
        self._wire(self.restrict_button, conv.restrict)
        if on_continue is not None:
            self._wire(self.continue_button, on_continue)
        self.widget = w.VBox(
            [
                w.HBox([self.badge, self.cancel_button, self.restrict_button, self.meter]),
                self.retry,
                self.approval_box,
                self.continue_button,
                self.notice,
            ]
        )
        self.refresh_mode()

    def _wire(self, button: w.Button, action: Action) -> None:
        def clicked(_button: w.Button) -> None:
            self.loop.call_soon_threadsafe(self._launch, action)

        button.on_click(clicked)

    def _launch(self, action: Action) -> None:
        async def run() -> None:
            try:
                await action()
            except PhoenixError as exc:
                self.show_notice(str(exc))

        self.loop.create_task(run())

    # -- views ----------------------------------------------------------------------
    def refresh_mode(self) -> None:
        mode = self.conv.mode.value
        label = mode if self.sandbox_available else "unrestricted · sandbox unavailable"
        colour = "#2e7d32" if mode == "restricted" else "#c62828"
        self.badge.value = (
            f'<span style="border:1px solid {colour};color:{colour};border-radius:8px;'
            f'padding:1px 8px" data-phoenix-mode="{mode}">{html.escape(label)}</span>'
        )
        self.restrict_button.disabled = mode == "restricted" or not self.sandbox_available

    def show_usage(self, usage: Mapping[str, Any]) -> None:
        used, window = int(usage.get("used", 0)), int(usage.get("window", 0)) or 1
        pct = 100.0 * used / window
        warn = bool(usage.get("warning"))
        style = "color:#e65100;font-weight:bold" if warn else "opacity:0.8"
        hint = " — near the limit: you can continue in a new conversation" if warn else ""
        self.meter.value = (
            f'<span style="{style}" data-phoenix-meter="{pct:.0f}">'
            f"context {used:,} / {window:,} ({pct:.0f}%){hint}</span>"
        )
        self.continue_button.layout.display = "" if warn else "none"

    def show_retry(self, data: Mapping[str, Any]) -> None:
        kind = str(data.get("kind") or "error").replace("_", " ")
        self.retry.value = html.escape(
            f"retrying {data.get('attempt')}/{data.get('max', 3)} in "
            f"{float(data.get('delay', 0)):g} s: {kind}"
        )

    def clear_retry(self) -> None:
        self.retry.value = ""

    def show_approval(self, reason: str | None) -> None:
        if reason is None:
            self.approval_box.layout.display = "none"
            return
        self.reason.value = (
            "<b>The agent asks for write access (Unrestricted mode):</b> "
            f"<i>{html.escape(reason)}</i>"
        )
        self.approval_box.layout.display = ""

    def show_notice(self, text: str) -> None:
        self.notice.value = f"<span>{html.escape(text)}</span>"

    def close(self) -> None:
        for child in (
            self.cancel_button,
            self.approve_button,
            self.deny_button,
            self.restrict_button,
            self.continue_button,
            self.reason,
            self.badge,
            self.meter,
            self.retry,
            self.notice,
            self.approval_box,
            self.widget,
        ):
            child.close()
