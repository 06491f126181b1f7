"""Live controls of a running turn (ipywidgets).

They exist only while the turn runs and are closed when it rests, so a saved
notebook holds no dead widgets; a still-pending approval keeps its buttons.
Widget handlers may run on a subshell thread (JupyterLab 4.4+), so every
handler hands its work to the kernel's loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Awaitable, Callable

import ipywidgets as w

from phoenix_nb.core.notices import RetryScheduled
from phoenix_nb.notebook._render.view import APPROVE_MEANS
from phoenix_nb.runtime.manager import Conversation, PhoenixError

Action = Callable[[], Awaitable[object]]


class Controls:
    """The buttons of a running turn: Cancel, Restrict, Approve/Deny while a request waits,
    Continue when the context fills up, and a line for a refused click.

    Everything the reader reads (mode, state, meter, retry, the request's reason) is in
    the record right above, once; these are only what a person clicks. The box carries
    the class `jp-Phoenix-controls`, by which the labextension keeps the keyboard in the
    notebook after a click (labextension/src/focus.ts).
    """

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
        # What approving does is phoenix's own fixed sentence, next to the buttons; the
        # agent's reason (model-authored) is never put into the prompt: it is quoted, as
        # the agent's words, in the record above. A Label shows text, never HTML.
        self.approve_button = w.Button(
            description="Approve",
            button_style="success",
            tooltip="Give the agent write access (Unrestricted mode)",
        )
        self.deny_button = w.Button(
            description="Deny", button_style="danger", tooltip="Keep the agent read-only"
        )
        self.approve_means = w.Label(value=APPROVE_MEANS, layout=w.Layout(width="auto"))
        self.restrict_button = w.Button(description="Restrict", tooltip="Back to read-only now")
        self.continue_button = w.Button(
            description="Continue in a new conversation", layout=w.Layout(width="auto")
        )
        self.notice = w.HTML()
        self.approval_box = w.HBox([self.approve_button, self.deny_button, self.approve_means])
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
                w.HBox(
                    [
                        self.approval_box,
                        self.cancel_button,
                        self.restrict_button,
                        self.continue_button,
                    ],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                self.notice,
            ]
        )
        self.widget.add_class("jp-Phoenix-controls")
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
        self.restrict_button.disabled = mode == "restricted" or not self.sandbox_available

    def show_usage(self, warning: bool) -> None:
        """The record shows the meter; the button to act on it appears near the limit."""
        self.continue_button.layout.display = "" if warning else "none"

    def show_retry(self, data: RetryScheduled) -> None:
        """The record's retry banner tells it; nothing to click."""

    def clear_retry(self) -> None:
        """See `show_retry`."""

    def show_approval(self, reason: str | None) -> None:
        """Approve / Deny while a request waits (its reason is in the record above)."""
        self.approval_box.layout.display = "none" if reason is None else ""

    def show_notice(self, text: str) -> None:
        self.notice.value = f"<span>{html.escape(text)}</span>"

    def close(self) -> None:
        for child in (
            self.cancel_button,
            self.approve_button,
            self.deny_button,
            self.approve_means,
            self.restrict_button,
            self.continue_button,
            self.notice,
            self.approval_box,
            self.widget,
        ):
            child.close()
