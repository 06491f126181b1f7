"""`%phoenix chat`: a chat panel driving the same runtime from widgets.

Turns run as background tasks on the kernel's loop, so the notebook stays usable
while the agent works. The panel is two outputs of the `%phoenix chat` cell:

* the transcript, an ordinary output carrying the conversation record's bundle
  (record plus HTML, Markdown and plain fallbacks, as a `%%phoenix` cell shows),
  kept current after the cell ended through `DetachedDisplay` — so the saved
  notebook holds the conversation as it was last shown, for any viewer;
* the controls (input, image upload, buttons, a footer saying the state), a widget
  displayed with a hint saying what to run when no kernel is there to act.

One subscription, opened with the panel, follows the conversation for the panel's
life: every update is taken into the transcript whoever caused it (Send, a button,
a `%phoenix approve` in another cell), through any number of pauses, and the footer
and buttons are drawn from the conversation's own state after each batch, so they
never show a state the conversation is not in. The transcript reuses the cell's
`TurnView` for the record, the streamed text and the throttle.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import ipywidgets as w

from phoenix_nb.core.states import ContextExhausted
from phoenix_nb.llm.images import ImageError, prepare_image
from phoenix_nb.notebook._render.view import state_words
from phoenix_nb.notebook.cell import Applied, TurnView
from phoenix_nb.notebook.controls import DetachedDisplay, control_bundle
from phoenix_nb.notebook.render import render_bundle
from phoenix_nb.notebook.session import Session
from phoenix_nb.notebook.undo import RevertButton, turn_first_write
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, PhoenixError

__all__ = ["ChatPanel"]

log = logging.getLogger(__name__)
Action = Callable[[], Awaitable[object]]
_OPEN: list[ChatPanel] = []  # panels following a conversation in this kernel


def _close_tree(widget: w.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


def _shown(widget: w.Widget, visible: bool) -> None:
    widget.layout.display = "" if visible else "none"


class _Transcript(TurnView):
    """The cell's view of a turn, drawn into a detached output for the whole conversation."""

    def __init__(self, conv: Conversation, session: Session, output: DetachedDisplay) -> None:
        super().__init__(conv, session, can_answer=True, first_cycle=0)
        self.output = output

    def _send(self, bundle: dict[str, Any]) -> None:
        self.output.update(bundle)


class ChatPanel:
    """One `%phoenix chat`: a transcript output, a controls output, and the task following."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.conv: Conversation = session.current_conversation_or_new()
        self.input = w.Textarea(placeholder="Ask phoenix…", layout=w.Layout(width="auto"))
        self.images = w.FileUpload(accept="image/*", multiple=True, description="Images")
        self.send_button = w.Button(description="Send", button_style="primary")
        self.cancel_button = w.Button(description="Cancel", button_style="warning")
        self.approve_button = w.Button(description="Approve", button_style="success")
        self.deny_button = w.Button(description="Deny", button_style="danger")
        self.restrict_button = w.Button(description="Restrict", tooltip="Back to read-only now")
        self.continue_button = w.Button(
            description="Continue in a new conversation", layout=w.Layout(width="auto")
        )
        self.status = w.HTML()
        self.status.add_class("jp-Phoenix-chatStatus")
        self.notice = w.HTML()
        self.revert_slot = w.Box()
        self.send_button.on_click(lambda _b: self._soon(self._send))
        self.cancel_button.on_click(lambda _b: self._soon(lambda: self.conv.cancel()))
        self.approve_button.on_click(lambda _b: self._soon(lambda: self.conv.approve()))
        self.deny_button.on_click(lambda _b: self._soon(lambda: self.conv.deny()))
        self.restrict_button.on_click(lambda _b: self._soon(lambda: self.conv.restrict()))
        self.continue_button.on_click(lambda _b: self._soon(self._continue))
        buttons = w.HBox(
            [
                self.send_button,
                self.images,
                self.cancel_button,
                self.approve_button,
                self.deny_button,
                self.restrict_button,
                self.continue_button,
            ],
            layout=w.Layout(flex_flow="row wrap"),
        )
        buttons.add_class("jp-Phoenix-controls")
        self.widget = w.VBox(
            [self.status, self.input, buttons, self.revert_slot, self.notice],
            layout=w.Layout(width="auto"),
        )
        self.widget.add_class("jp-Phoenix-chat")
        self.transcript_output = DetachedDisplay()
        self.controls_output = DetachedDisplay()
        self.busy = False  # a button's action is under way: Send waits for it
        self.turn_start: int | None = None  # first cycle of the turn Send started
        self.turn_worked = False  # that turn left the rest (a message is saved before it does)
        self.revert: RevertButton | None = None
        self._attach(self.conv)

    # -- lifecycle ---------------------------------------------------------------------
    def _attach(self, conv: Conversation) -> None:
        """Follow `conv` from now on (the panel's conversation, or the one it continues in)."""
        self.conv = conv
        self.view = _Transcript(conv, self.session, self.transcript_output)
        self.sub = conv.subscribe()
        self.follower = self.loop.create_task(self._follow(self.sub))

    def show(self) -> None:
        """Display the transcript and the controls in the running `%phoenix chat` cell.

        The newest panel is the live one: earlier panels stop following (each would
        redraw the whole record on every update) and close their widgets, so their
        outputs show the hint to run `%phoenix chat` instead of dead buttons.
        """
        for old in list(_OPEN):
            old.close(widgets=True)
        _OPEN.append(self)
        self.transcript_output.show(self._final_bundle())
        self.controls_output.show(control_bundle(self.widget, self.hint()))
        self.refresh()

    def close(self, *, widgets: bool = False) -> None:
        """Stop following; with `widgets`, close the controls too (the panel is done)."""
        self.sub.close()
        self.follower.cancel()
        if widgets:
            if self in _OPEN:
                _OPEN.remove(self)
            _close_tree(self.widget)

    def _final_bundle(self) -> dict[str, Any]:
        return render_bundle(self.view.record())

    # -- following the conversation ------------------------------------------------
    async def _follow(self, sub: up.Subscription) -> None:
        """Take every update into the transcript until the panel closes."""
        final_shown = True
        try:
            async for update in sub:
                structural = streamed = False
                for item in [update, *sub.pending()]:
                    if isinstance(item.data, up.NoticeText):
                        self.show_notice(item.data.text)  # a task's print lands elsewhere
                        continue
                    applied = await self.view._apply(item)
                    structural = structural or applied in (Applied.STRUCTURAL, Applied.END)
                    streamed = streamed or applied is Applied.DELTA
                if is_rest(self.conv.state):
                    if structural or not final_shown:
                        self.view.show_final()
                        final_shown = True
                        self._offer_revert()
                else:
                    final_shown = False
                    self.turn_worked = True
                    if structural or streamed:
                        self.view.show_streaming(structural=structural)
                self.refresh()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the panel must say it stopped, not freeze
            log.exception("phoenix chat stopped following %s", self.conv.slug)
            self.show_notice(f"The chat stopped following {self.conv.slug}: {exc}")
        finally:
            sub.close()

    # -- actions -----------------------------------------------------------------------
    def _soon(self, action: Action) -> None:
        """Widget handlers may run on another thread: hand the work to the kernel loop."""

        def start() -> None:
            async def run() -> None:
                self.busy = True
                self.refresh()
                try:
                    await action()
                except (PhoenixError, ImageError) as exc:
                    self.show_notice(str(exc))
                finally:
                    self.busy = False
                    self.refresh()

            self.loop.create_task(run())

        self.loop.call_soon_threadsafe(start)

    async def _send(self) -> None:
        text = self.input.value.strip()
        if not text:
            return
        images = [prepare_image(bytes(item["content"])) for item in self.images.value]
        self.turn_start = self.conv.cycle_count()
        self.turn_worked = False
        self.notice.value = ""
        await self.conv.post_message(text, images)
        self.input.value = ""
        self.images.value = ()

    async def _continue(self) -> None:
        new = await self.conv.continue_in_new()
        self.session.current = new.slug
        self.close()
        self.turn_start = None
        self.revert_slot.children = ()
        self._attach(new)
        self.show_notice(
            f"Started {new.slug}, seeded with the summary of the conversation before: "
            "this chat talks to it now."
        )
        self.view.show_final()

    def _offer_revert(self) -> None:
        """A Revert button after a turn sent from this chat whose tool calls changed files."""
        if self.turn_start is None or not self.turn_worked:
            return
        cycles = self.conv.payload(since_cycle=self.turn_start).get("cycles", [])
        self.turn_start = None
        found = turn_first_write(cycles)
        if found is None:
            return
        self.revert = RevertButton(
            self.conv, self.session.phoenix.worktree, found[0], found[1], self.loop
        )
        self.revert.on_hint = lambda _hint: self._update_hint()
        self.revert_slot.children = (self.revert.widget,)
        self._update_hint()

    def _update_hint(self) -> None:
        self.controls_output.update(control_bundle(self.widget, self.hint()))

    # -- the footer --------------------------------------------------------------------
    def hint(self) -> str:
        """What the controls say where they cannot act (a saved notebook, a new kernel)."""
        slug = self.conv.slug
        hint = (
            f"Chat with {slug}: `%phoenix use {slug}` then `%phoenix chat` opens it again "
            "(or talk to it in a `%%phoenix` cell)."
        )
        if self.revert is not None:
            hint += f" {self.revert.hint}"
        return hint

    def show_notice(self, text: str) -> None:
        self.notice.value = f"<span data-phoenix-notice>{html.escape(text)}</span>"

    def refresh(self) -> None:
        """Buttons and footer from the conversation's state, never from what was clicked."""
        conv = self.conv
        state = conv.state
        rest = is_rest(state)
        paused = is_paused(state)
        exhausted = isinstance(state.phase, ContextExhausted)
        _shown(self.approve_button, paused)
        _shown(self.deny_button, paused)
        _shown(self.cancel_button, not rest and not paused)
        can_restrict = conv.mode.value != "restricted" and self.session.phoenix.sandbox.available
        _shown(self.restrict_button, can_restrict)
        _shown(self.continue_button, exhausted or (rest and conv.context_usage().warning))
        self.send_button.disabled = not rest or exhausted or self.busy
        words = state_words(state.name)
        mode = "read-only" if exhausted else conv.mode.value
        self.status.value = (
            f"<span data-phoenix-state='{html.escape(state.name)}'>"
            f"{html.escape(f'{conv.slug} · {words} · {mode}')}</span>"
        )
