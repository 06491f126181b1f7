"""One `%%phoenix` cell: an awaited turn shown as a live, then shareable, record.

The cell's output is one display (updated in place by display id) whose bundle
is the conversation record plus self-contained fallbacks (`render.py`), and,
while the turn runs, a box of live controls. The cell ends when the
conversation rests or waits for a person. At an upgrade request in a front end
that can answer (JupyterLab, Notebook) the cell ends — the kernel is idle, so a
reloaded page restores the buttons, a second tab sees them and `%phoenix approve`
from another cell runs at once — and the view goes on *detached*: a task that keeps
updating the same outputs, by display id and `metadata.phoenix.detached` (which the
labextension applies after the cell ended, `controls.py`), until the turn rests.
The request itself is answered through `Phoenix.pending` by whoever answers it. In a
headless run (nbclient, nbconvert, nbval) the cell ends with the conversation paused
and says how to answer.
Kernel interrupt cancels the turn (REQ-BED-005) and raises `TurnInterrupted`, a
KeyboardInterrupt whose traceback is one line (IPython shows an exception's
`_render_traceback_`), so "Run All" stops without a trace through phoenix's code.

Live controls exist only where a person can click them: a headless run gets
none (no widget state in the saved file), and an interactive cell replaces its
outputs by the one final record when the turn ends, so no empty output stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from IPython import get_ipython
from IPython.display import clear_output, display

from phoenix_nb.core.notices import RetryScheduled
from phoenix_nb.core.stored import MessageKind, MessageLike
from phoenix_nb.core.values import ImageData
from phoenix_nb.llm.images import ImageError, prepare_image
from phoenix_nb.notebook._render.view import state_words
from phoenix_nb.notebook.controls import CONTROLS_MIME, Controls, control_bundle
from phoenix_nb.notebook.decorate import decorate_record
from phoenix_nb.notebook.interrupt import wake_loop_on_signals
from phoenix_nb.notebook.options import HELP_TEXT, OptionsError, parse_cell_options
from phoenix_nb.notebook.render import MIME_TYPE, render_bundle
from phoenix_nb.notebook.session import Session, get_session
from phoenix_nb.notebook.throttle import GrowthThrottle
from phoenix_nb.notebook.thumbnails import ThumbnailCache
from phoenix_nb.notebook.undo import RevertButton, turn_first_write
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, PhoenixError
from phoenix_nb.store import StoreError

CANCEL_GRACE = 5.0  # seconds a cancelled turn may take to settle after an interrupt
# Views that outlived their cell (waiting for an answer), kept until their turn rests.
_DETACHED: set[asyncio.Task[None]] = set()
CONTROLS_HINT = "`%phoenix cancel` stops this turn."
WAITING_HINT = (
    "Waiting for your answer: `%phoenix approve` or `%phoenix deny` (in any cell), "
    "or `%phoenix cancel`."
)


class TurnInterrupted(KeyboardInterrupt):
    """A kernel interrupt stopped the turn: an error for "Run All", one line for the reader."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def _render_traceback_(self) -> list[str]:
        return [self.line]


def say(text: str) -> None:
    """One clear line for a user mistake, never a traceback."""
    print(f"phoenix: {text}", file=sys.stderr)


def resolve_image(spec: str, namespace: Mapping[str, Any]) -> ImageData:
    """`--image` takes a variable (PIL image, matplotlib figure, bytes, path) or a file path."""
    if spec.isidentifier() and spec in namespace:
        value = namespace[spec]
        if isinstance(value, ImageData):
            return value
        return prepare_image(value)
    return prepare_image(spec)


def front_end_can_answer(shell: Any, session: Session) -> bool:
    """Can a human click Approve while this cell runs? (headless clients cannot)."""
    policy = session.config.wait_for_approval
    if policy != "auto":
        return policy == "always"
    kernel = getattr(shell, "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", False))


async def run_cell(line: str, body: str) -> None:
    """Entry point the input transformer awaits for a `%%phoenix` cell."""
    shell = get_ipython()
    session = get_session(shell)
    try:
        opts = parse_cell_options(line)
        if opts.help:
            print(HELP_TEXT)
            return
        text = body.strip()
        if not text:
            raise OptionsError("the cell is empty: write your message below the %%phoenix line")
        namespace = shell.user_ns if shell is not None else {}
        images = [resolve_image(spec, namespace) for spec in opts.images]
        await session.settle_resumed()  # restrict_on_restart, before any turn runs
        known = None if opts.new else (opts.name or session.current)
        if known:  # a long history is read from the store off the event loop
            await session.phoenix.load(known)
        await _prepare_mcp(
            session, Path(opts.cwd or session.cwd), front_end_can_answer(shell, session)
        )
        conv = session.conversation_for(opts)
        await _announce_new_servers(session, conv)
    except (OptionsError, PhoenixError, ImageError, StoreError) as exc:
        say(str(exc))
        return
    view = TurnView(
        conv,
        session,
        on_upgrade=opts.on_upgrade,
        can_answer=front_end_can_answer(shell, session),
    )
    await view.run(lambda: conv.post_message(text, images))


async def _prepare_mcp(session: Session, cwd: Path, can_answer: bool) -> None:
    """Start the approved MCP servers before the conversation takes its tools; say
    what is pending approval or failed. Nothing is made when none is configured and
    the folder has no .mcp.json (the SDK is never imported then).

    A server awaiting approval shows what it would run with Approve / Deny. Where a
    person can answer, the cell waits for the answer before the turn starts: a
    conversation's tool list is fixed at its start (the prompt cache), so this is the
    one moment an approved server's tools can join the turn that prompted it. No
    turn runs yet, so nothing is held but this cell; an interrupt ends the wait.
    Headless (papermill), the turn goes on without the server, which stays pending."""
    from phoenix_nb.mcp.config import PROJECT_FILE

    phoenix = session.phoenix
    policy = phoenix.settings.policy
    by_policy = policy is not None and bool(policy.mcp_servers)
    if not phoenix.settings.mcp_servers and not by_policy and not (cwd / PROJECT_FILE).is_file():
        return
    from IPython.display import display

    from phoenix_nb.notebook.mcp_lines import approval_controls

    hub = phoenix.mcp
    # Where a person can answer, the prompt below says what each pending server runs.
    for line in await hub.prepare(cwd, pending_lines=not can_answer):
        say(line)
    asking = [s for s in hub.servers(cwd) if s.awaiting]
    for server in asking:
        display(approval_controls(hub, server, cwd), raw=True)
    if not asking or not can_answer:
        return
    ids = {s.request_id for s in asking}
    loop = asyncio.get_running_loop()
    answered = asyncio.Event()
    # Any front end may answer (these buttons, the panel, `%phoenix approve ID`):
    # each ends in the hub, whose change `Phoenix.pending` tells its watchers.

    def heard() -> None:
        loop.call_soon_threadsafe(answered.set)

    stop = phoenix.pending.watch(heard)
    try:
        with wake_loop_on_signals(loop):  # an interrupt reaches this idle loop at once
            while ids & {s.request_id for s in hub.awaiting()}:
                await answered.wait()
                answered.clear()
    finally:
        stop()
    for line in await hub.prepare(cwd):  # the approved ones start; wait until ready
        say(line)


async def _announce_new_servers(session: Session, conv: Conversation) -> None:
    """A server that became ready after this conversation started is not in its tool
    list (which never changes, for the prompt cache): say so once, to the user and to
    the agent (a system note), with how to get its tools."""
    servers = session.phoenix.mcp_servers_missing(conv)
    if not servers:
        return
    text = (
        f"MCP server(s) {', '.join(servers)} became ready after this conversation started; "
        "their tools are offered from the next conversation (%%phoenix --new) or after "
        "`%phoenix continue`."
    )
    say(text)
    with contextlib.suppress(PhoenixError):  # not at rest: the user line is enough
        await conv.annotate(text)


THUMBNAILS = ThumbnailCache()  # made once per stored image: decorate runs on every update


def decorate(
    payload: dict[str, Any],
    session: Session,
    history: Sequence[MessageLike] | None = None,
    *,
    thumbnails: ThumbnailCache = THUMBNAILS,
) -> dict[str, Any]:
    """The runtime's record as the notebook shows it (`decorate.decorate_record`), with
    this session's settings and, by default, the kernel's shared thumbnail cache."""
    return decorate_record(
        payload,
        show_thinking=session.config.show_thinking,
        history=history,
        thumbnails=thumbnails,
    )


class Applied(enum.Enum):
    """What taking one update into a `TurnView` calls for."""

    NOTHING = enum.auto()  # the controls may have changed; the record did not
    DELTA = enum.auto()  # streamed text grew: a throttled display update
    STRUCTURAL = enum.auto()  # a message, tool or state changed: the record is re-sent
    END = enum.auto()  # the cell ends now (a headless run paused at an approval)
    DETACH = enum.auto()  # the cell ends now; the view goes on without it (a person answers)


class TurnView:
    """Drives one turn's display and controls from the conversation's updates."""

    def __init__(
        self,
        conv: Conversation,
        session: Session,
        *,
        on_upgrade: str = "ask",
        can_answer: bool = False,
        first_cycle: int | None = None,
        from_approval: bool = False,
    ) -> None:
        self.conv = conv
        self.session = session
        self.on_upgrade = on_upgrade
        self.can_answer = can_answer
        self.first_cycle = first_cycle
        # An answer (`%phoenix approve`) shows the paused cycle from its approval on: the
        # cell above already shows what came before.
        self.first_step = 0
        # The messages this view shows start here: thumbnails look only at them (a view
        # of the whole conversation, the chat's transcript, looks at all of them).
        self.first_message = 0 if first_cycle == 0 else conv.message_count()
        if from_approval:
            cycles = conv.payload(since_cycle=max(0, conv.cycle_count() - 1)).get("cycles", [])
            if cycles:
                self.first_cycle = int(cycles[-1].get("index", 0))
                steps = cycles[-1].get("steps", [])
                approvals = [i for i, st in enumerate(steps) if st.get("kind") == "approval"]
                self.first_step = approvals[-1] if approvals else len(steps)
        self.paused_headless = False
        # Streamed text as chunks: joining once per display update, not once per delta,
        # keeps a long answer linear in CPU as well as in bytes.
        self.live_parts: dict[int, list[str]] = {}
        self.live_chars = 0  # characters streamed since the last display update
        self.live_kind: dict[int, str] = {}
        resumed = session.take_resumed_note()
        self.notes: list[str] = [resumed] if resumed else []
        self.throttle = GrowthThrottle(min_interval=session.config.display_min_interval)
        self.display_id: str | None = None  # the record's output, once shown
        self.controls: Controls | None = None
        self.controls_id: str | None = None  # the controls' output, once shown
        self.detached = False  # the cell ended; this view updates its outputs from a task

    # -- the record -------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """The record of this view's turn. It costs what the turn holds, not what the
        conversation does: only the turn's cycles are projected (`payload(since_cycle)`)
        and only the turn's messages are searched for thumbnails."""
        if self.first_cycle is None:
            self.first_cycle = self.conv.cycle_count()
        payload = self.conv.payload(since_cycle=self.first_cycle)
        cycles = payload.get("cycles", [])
        if cycles and self.first_step:
            first = cycles[0]
            cycles = [
                {**first, "steps": first.get("steps", [])[self.first_step :], "continued": True},
                *cycles[1:],
            ]
        if self.live_parts:
            cycles = _with_live_text(cycles, self.live_text(), self.live_kind)
        payload = {**payload, "cycles": cycles}
        if self.paused_headless:
            conv = dict(payload.get("conversation", {}))
            conv["state"] = {**conv.get("state", {}), "busy": False, "paused": True}
            payload["conversation"] = conv
        payload = decorate(payload, self.session, self.conv.history_since(self.first_message))
        if self.notes:
            payload["notes"] = list(self.notes)
        return payload

    def _metadata(self, display_id: str) -> dict[str, Any]:
        """Every output of a view names its display id, so the labextension can update it
        after the cell ended; `live` marks updates JupyterLab still routes by itself."""
        return {"phoenix": {"detached": display_id, "live": not self.detached}}

    def _send(self, bundle: dict[str, Any]) -> None:
        if self.display_id is None:
            self.display_id = f"phoenix-{uuid.uuid4().hex}"
            update = False
        else:
            update = True
        display(
            bundle,
            raw=True,
            display_id=self.display_id,
            metadata=self._metadata(self.display_id),
            update=update,
        )

    def _controls_bundle(self) -> dict[str, Any]:
        assert self.controls is not None
        waiting = self.controls.approval_box.layout.display != "none"
        return control_bundle(self.controls.widget, WAITING_HINT if waiting else CONTROLS_HINT)

    def _show_controls(self, *, update: bool) -> None:
        """The controls' output: the widget, and the commands where it cannot act."""
        if self.controls is None or (update and self.controls_id is None):
            return
        if self.controls_id is None:
            self.controls_id = f"phoenix-{uuid.uuid4().hex}"
        display(
            self._controls_bundle(),
            raw=True,
            display_id=self.controls_id,
            metadata=self._metadata(self.controls_id),
            update=update,
        )

    def show_streaming(self, *, structural: bool) -> None:
        if structural and is_rest(self.conv.state):
            return  # the turn is over: `show_final` sends the whole record once, with fallbacks
        now = time.monotonic()
        # Decide on an estimate first: projecting and encoding the record for every delta
        # would cost O(answer) per delta and starve the loop (and the Cancel click).
        estimate = self.throttle.last_size + self.live_chars
        if not self.throttle.should_send(estimate, now, structural=structural):
            return
        record = self.record()
        size = len(json.dumps(record))
        self.throttle.sent(size, now)
        self.live_chars = 0
        live = self.live_text()
        self._send({MIME_TYPE: record, "text/plain": _status_line(record, live)})

    def live_text(self) -> dict[int, str]:
        return {index: "".join(parts) for index, parts in self.live_parts.items()}

    def show_final(self) -> None:
        self.live_parts.clear()
        record = self.record()
        bundle = render_bundle(record)
        if self.detached:
            # No cell to clear: the record is updated in place; the controls' output
            # becomes the Revert button or goes (`_end_detached_controls`).
            self._send(bundle)
        elif self.controls_id is not None and self.display_id is not None:
            # The controls' output would stay behind as an empty one: replace both by
            # the final record, under the same display id.
            clear_output()
            self.controls_id = None
            display(
                bundle,
                raw=True,
                display_id=self.display_id,
                metadata=self._metadata(self.display_id),
            )
        else:
            self._send(bundle)
        shown = self.conv.payload(since_cycle=self.first_cycle or 0)
        self.session.mark_shown(self.conv.slug, shown)

    # -- the turn ---------------------------------------------------------------------
    async def run(self, start: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        with wake_loop_on_signals(loop):  # or a kernel interrupt waits for the tool to end
            await self._run(start, loop)

    async def _run(
        self, start: Callable[[], Awaitable[None]], loop: asyncio.AbstractEventLoop
    ) -> None:
        await self.conv.prepare()  # a long history loaded from the store: off the loop
        self.record()  # fixes first_cycle before the new message lands
        if self.can_answer:  # nobody could click them in a headless run
            self.controls = Controls(
                self.conv,
                loop=loop,
                on_continue=self._continue_in_new,
                sandbox_available=self.session.phoenix.sandbox.available,
            )
            # The meter starts from what earlier turns used: a warning must show before
            # the next response, not only after it.
            self.controls.show_usage(self.conv.context_usage().warning)
        sub = self.conv.subscribe()
        try:
            try:
                await start()
            except PhoenixError as exc:
                for note in self.notes:  # no record will carry it: say it first, here
                    print(f"phoenix: {note}.")
                say(str(exc))
                return
            self.show_streaming(structural=True)
            self._show_controls(update=False)
            await self._pump(sub)
            if self.detached:
                task = loop.create_task(self._go_on_detached(sub, loop))
                _DETACHED.add(task)
                task.add_done_callback(_DETACHED.discard)
                return
        except asyncio.CancelledError:
            await self._cancel_after_interrupt()
            raise TurnInterrupted(
                f"phoenix: interrupted — {self.conv.slug} stopped and is "
                f"{state_words(self.conv.state.name)}; send another message to go on."
            ) from None
        finally:
            if not self.detached:
                self._end(sub, loop)

    def _end(self, sub: up.Subscription, loop: asyncio.AbstractEventLoop) -> None:
        sub.close()
        if self.display_id is not None:
            self.show_final()
        self._close_controls()
        if self.detached:
            self._end_detached_controls(loop)
        else:
            self._offer_revert(loop)

    def _end_detached_controls(self, loop: asyncio.AbstractEventLoop) -> None:
        """A detached view has no cell to display a new output in: its controls' output
        becomes the Revert button (a turn that changed files), or asks to be removed
        (`gone`, applied by the labextension)."""
        if self.controls_id is None:
            return
        button = self._revert_button(loop)
        if button is not None:
            button.output.display_id = self.controls_id
            button.output.shown = True
            button.output.update(control_bundle(button.widget, button.hint))
        else:
            metadata = self._metadata(self.controls_id)
            metadata["phoenix"]["gone"] = True
            display(
                {CONTROLS_MIME: {"hint": ""}, "text/plain": ""},
                raw=True,
                display_id=self.controls_id,
                metadata=metadata,
                update=True,
            )
        self.controls_id = None

    async def _go_on_detached(self, sub: up.Subscription, loop: asyncio.AbstractEventLoop) -> None:
        """The rest of a turn whose cell ended at an approval: same outputs, until rest."""
        self.session.watching.add(self.conv.slug)
        try:
            await self._pump(sub)
        finally:
            self.session.watching.discard(self.conv.slug)
            self._end(sub, loop)

    async def _pump(self, sub: up.Subscription) -> None:
        """Apply updates in batches: whatever queued while the loop was busy is applied at
        once and shown with one display update, so the display never lags behind the
        conversation (a Cancel must show at once even while an answer streams flat out)."""
        conv = self.conv
        structural = streamed = deferred = False
        while True:
            if is_rest(conv.state) and not sub.pending_count():
                return
            batch = [await sub.__anext__(), *sub.pending()]
            for update in batch:
                applied = await self._apply(update)
                if applied is Applied.END:
                    return
                if applied is Applied.DETACH:
                    self.detached = True
                    return
                structural = structural or applied is Applied.STRUCTURAL
                streamed = streamed or applied is Applied.DELTA
                if update.kind == up.REST or (update.kind == up.STATE and is_rest(conv.state)):
                    return
            if structural and not deferred:
                # A persisted message is followed by its state change: let that land first,
                # so a turn's last answer is not sent once more just before the final record.
                await asyncio.sleep(0)
                if sub.pending_count():
                    deferred = True
                    continue
            if structural or streamed:
                self.show_streaming(structural=structural)
            structural = streamed = deferred = False

    async def _apply(self, update: up.Update) -> Applied:
        """Take one update into the view and say what it calls for."""
        data = update.data
        controls = self.controls
        if isinstance(data, up.StreamedText | up.StreamedThinking):
            self.live_parts.setdefault(data.index, []).append(data.text)
            self.live_chars += len(data.text)
            self.live_kind[data.index] = (
                "assistant" if isinstance(data, up.StreamedText) else "reasoning"
            )
            return Applied.DELTA
        if isinstance(data, up.MessageSaved):
            if data.message.kind is MessageKind.AGENT:
                self.live_parts.clear()
            return Applied.STRUCTURAL
        if isinstance(data, up.ToolStarted | up.StateChanged):
            if controls is not None:
                controls.refresh_mode()
                if isinstance(data, up.StateChanged):
                    controls.clear_retry()
                    waiting = controls.approval_box.layout.display != "none"
                    controls.show_approval(None)
                    if waiting and self.detached:  # the hint says what can be run now
                        self._show_controls(update=True)
            return Applied.STRUCTURAL
        if isinstance(data, up.ContextUsage) and controls is not None:
            controls.show_usage(data.warning)
        elif isinstance(data, RetryScheduled) and controls is not None:
            controls.show_retry(data)
        elif isinstance(data, up.NoticeText):
            if controls is not None:
                controls.show_notice(data.text)
            say(data.text)  # kept in the cell's output: a failed save never passes in silence
        elif isinstance(data, up.ApprovalNeeded):
            return await self._on_approval(data.reason)
        return Applied.NOTHING

    async def _on_approval(self, reason: str) -> Applied:
        """Answer or surface an upgrade request, and say whether the cell ends now."""
        if self.on_upgrade in ("approve", "deny"):
            answer = "approved" if self.on_upgrade == "approve" else "denied"
            await self.conv.annotate(
                f"The user {answer} this upgrade request in advance "
                f"(%%phoenix --on-upgrade {self.on_upgrade})."
            )
            await (self.conv.approve() if self.on_upgrade == "approve" else self.conv.deny())
            return Applied.NOTHING
        if self.can_answer:
            if self.controls is not None:
                self.controls.show_approval(reason)
            if self.detached:  # a second request in a turn already detached
                self._show_controls(update=True)
                self.show_streaming(structural=True)
                return Applied.NOTHING
            # The cell ends, so nothing it started blocks the shell while a person
            # decides; the view goes on detached (module docstring).
            self.detached = True
            self._show_controls(update=True)
            self.show_streaming(structural=True)
            return Applied.DETACH
        self.paused_headless = True  # the record says "paused — run `%phoenix approve` …"
        return Applied.END

    async def _cancel_after_interrupt(self) -> None:
        try:
            await asyncio.shield(self.conv.cancel())
            await asyncio.wait_for(asyncio.shield(self.conv.wait()), CANCEL_GRACE)
        except (PhoenixError, TimeoutError, asyncio.CancelledError):
            pass

    async def _continue_in_new(self) -> None:
        new = await self.conv.continue_in_new()
        self.session.current = new.slug
        if self.controls is not None:
            self.controls.show_notice(
                f"Started {new.slug}, seeded with this conversation's summary: "
                "your next %%phoenix cell talks to it."
            )

    def _offer_revert(self, loop: asyncio.AbstractEventLoop) -> None:
        """A Revert button after a turn whose tool calls changed files (`undo.py`)."""
        button = self._revert_button(loop)
        if button is not None:
            button.show()

    def _revert_button(self, loop: asyncio.AbstractEventLoop) -> RevertButton | None:
        if not self.can_answer or self.display_id is None:
            return None
        cycles = self.conv.payload(since_cycle=self.first_cycle or 0).get("cycles", [])
        found = turn_first_write(cycles)
        if found is None:
            return None
        worktree = self.session.phoenix.worktree
        return RevertButton(self.conv, worktree, found[0], found[1], loop)

    def _close_controls(self) -> None:
        if self.controls is None:
            return
        if is_paused(self.conv.state) and self.can_answer:
            return  # a pending approval keeps its buttons
        self.controls.close()
        self.controls = None


def _with_live_text(
    cycles: Sequence[Mapping[str, Any]], live: Mapping[int, str], kinds: Mapping[int, str]
) -> list[dict[str, Any]]:
    """Show text still streaming as AI steps at the end of the last cycle."""
    if not cycles:
        return []
    out = [dict(c) for c in cycles]
    last = out[-1]
    steps = list(last.get("steps", []))
    for index in sorted(live):
        steps.append(
            {
                "kind": "ai",
                "item": {"type": kinds.get(index, "assistant"), "text": live[index]},
                "tool_groups": [],
                "streaming": True,
            }
        )
    last["steps"] = steps
    return out


def _status_line(record: Mapping[str, Any], live: Mapping[int, str]) -> str:
    from phoenix_nb.notebook._render.view import state_line

    state = state_line(record.get("conversation", {}).get("state", {}), record)
    tail = "".join(live[i] for i in sorted(live))[-400:]
    return f"phoenix · {state}\n{tail}" if tail else f"phoenix · {state}"
