"""Live controls (ipywidgets) and how a control outlives its kernel in a saved notebook.

A turn's controls exist only while the turn runs and are closed when it rests, so a
saved notebook holds no dead widgets; a still-pending approval keeps its buttons.
Widget handlers may run on a subshell thread (JupyterLab 4.4+), so every handler
hands its work to the kernel's loop with `call_soon_threadsafe`.

A control that stays in the notebook (the chat's, a Revert button) is displayed by
`control_bundle`: beside the widget view it carries a hint — the `%phoenix` command
that does the same — as `application/vnd.phoenix.controls+json` and as HTML,
Markdown and plain text. The labextension shows the widget while its kernel can act
and the hint once it cannot (after a restart, in a reloaded page without the
kernel); nbconvert, which has no widget state, shows the HTML hint.

`DetachedDisplay` is an ordinary output the kernel keeps updating after its cell
ended (the chat's transcript, a control's hint): JupyterLab routes
`update_display_data` only to cells still running, so each update carries
`metadata.phoenix.detached` = its display id and the labextension applies it to
the output holding that id (labextension/src/detached.ts), which is what the
notebook saves.
"""

from __future__ import annotations

import asyncio
import html
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import ipywidgets as w
from IPython.display import display

from phoenix_nb.core.notices import RetryScheduled
from phoenix_nb.runtime.manager import Conversation, PhoenixError

Action = Callable[[], Awaitable[object]]
CONTROLS_MIME = "application/vnd.phoenix.controls+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def hint_html(hint: str) -> str:
    """The hint as HTML: escaped, with `backticked` commands as code."""
    parts = re.split(r"`([^`]*)`", hint)
    out = [
        f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    ]
    return f"<p class='jp-Phoenix-controlHint'>{''.join(out)}</p>"


def control_bundle(widget: w.Widget | None, hint: str) -> dict[str, Any]:
    """A control's output: the widget's view and, for where it cannot act, what to run."""
    bundle: dict[str, Any] = {
        CONTROLS_MIME: {"hint": hint},
        "text/html": hint_html(hint),
        "text/markdown": hint,
        "text/plain": hint,
    }
    if widget is not None:
        view = widget._repr_mimebundle_()
        if isinstance(view, dict) and WIDGET_VIEW_MIME in view:
            bundle[WIDGET_VIEW_MIME] = view[WIDGET_VIEW_MIME]
    return bundle


class DetachedDisplay:
    """An ordinary output that may be updated from any task, long after its cell ended."""

    def __init__(self) -> None:
        self.display_id = f"phoenix-{uuid.uuid4().hex}"
        self.shown = False

    def _metadata(self) -> dict[str, Any]:
        return {"phoenix": {"detached": self.display_id}}

    def show(self, bundle: dict[str, Any]) -> None:
        """Display it in the running cell (once)."""
        display(bundle, raw=True, metadata=self._metadata(), display_id=self.display_id)
        self.shown = True

    def update(self, bundle: dict[str, Any]) -> None:
        if not self.shown:
            return
        display(
            bundle, raw=True, metadata=self._metadata(), display_id=self.display_id, update=True
        )


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
        # What approving does is phoenix's own fixed sentence, said once, in the record's
        # approval block right above (a Label beside the buttons said it twice and was
        # clipped at the cell's edge); the agent's reason is quoted there too.
        self.approve_button = w.Button(
            description="Approve",
            button_style="success",
            tooltip="Give the agent write access (Unrestricted mode)",
        )
        self.deny_button = w.Button(
            description="Deny", button_style="danger", tooltip="Keep the agent read-only"
        )
        self.restrict_button = w.Button(description="Restrict", tooltip="Back to read-only now")
        self.continue_button = w.Button(
            description="Continue in a new conversation", layout=w.Layout(width="auto")
        )
        self.notice = w.HTML()
        self.approval_box = w.HBox([self.approve_button, self.deny_button])
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
        """Restrict only where it can act: an Unrestricted conversation on a sandboxed host."""
        can = self.conv.mode.value != "restricted" and self.sandbox_available
        self.restrict_button.layout.display = "" if can else "none"

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
            self.restrict_button,
            self.continue_button,
            self.notice,
            self.approval_box,
            self.widget,
        ):
            child.close()
