"""The kernel's end of the phoenix side panel (labextension/src/panel.ts).

The panel is a view of the notebook's current conversation beside the notebook
(DESIGN.md decision 23). It opens one comm (target `phoenix.panel`) on the active
notebook's kernel; `extension.load` registers the target, so a kernel without
phoenix loaded closes the comm at once, which is how the panel knows to offer
`%load_ext phoenix_nb`.

The kernel side is the chat's runtime path: one subscription to the conversation
follows every update whoever caused it (the panel, a `%%phoenix` cell, `%phoenix
chat`, `%phoenix approve`), taken into a `TurnView` over the whole conversation
(`first_cycle=0`), as `%phoenix chat`'s transcript does. The actions are the
conversation's own (`post_message`, `approve`, `deny`, `cancel`, `restrict`), so
busy is exclusive exactly as it is for cells: a second turn is refused by the core
and the refusal is shown as the panel's notice. Approve and Deny answer the waiting
request by its id through the process's `PendingRequests` (runtime/pending.py), as
`%phoenix approve` and the cell's buttons do. Revert and Continue are `%phoenix revert`'s
and `%phoenix continue`'s functions (`undo.revert`, `Conversation.continue_in_new`): Revert
undoes the latest turn that changed files, back to the checkpoint before its first write,
as the Revert button under a cell or the chat does (a refusal — someone else changed those
files since — is the notice, naming `%phoenix revert N --force`); Continue starts a new
conversation seeded with a summary and makes it the notebook's, which re-attaches the panel.

What is sent is kept to what the front end cannot work out itself, so that a panel
open beside a streaming turn adds little to the kernel's event loop (bench_panel):
the whole record only on a structural change (a message saved, a tool, a state),
and streamed text as the deltas themselves, gathered for `min_interval` seconds
(the display throttle's interval) — the front end appends them to the record it has.

The panel also lists what waits for a person (`Phoenix.pending`, runtime/pending.py): the
notebook's conversation's requests and the whole process's (`conversation == ""`, e.g. an MCP
server awaiting approval), of any kind, sent again whenever a source says they may have
changed (`PendingRequests.watch`) and only when they did. The panel answers a request by its
id with one of its `answers`; one with none (a proposed cell edit) is decided where it is.

A message may carry images (pasted or dropped into the message box, or a cell's image
outputs) and the text of cell outputs. The images are made ready as `%phoenix chat`'s are
(`llm.images.prepare_image`, off the loop); one that cannot be sent is the notice and nothing
is sent, and the panel keeps the message and its attachments until the kernel says `sent`.

Messages (`data` of comm messages), kernel → front end:
  {"type": "record", "bundle": {mime: record}, "final": bool, "status": Status}
      the conversation's record; `final` when it rests
  {"type": "bundle", "bundle": {mime, text/html, text/markdown, text/plain}}
      the record with its fallbacks, asked for by the panel when it keeps the record
      in the notebook's phoenix cell (a saved, exported notebook shows it anywhere)
  {"type": "delta", "parts": [[index, "assistant"|"reasoning", text], …]}
  {"type": "notice", "text": str}        a refused action, a task's notice
  {"type": "conversations", "items": [{"slug", "state"}, …], "current": slug|None}
  {"type": "empty", "status": Status}     no conversation in this notebook yet
  {"type": "pending", "items": [PendingRequest.as_json(), …]}   what waits for a person
  {"type": "sent"}                        the last `send` was taken (the panel clears its box)
front end → kernel:
  {"type": "hello"} | {"type": "bundle"} | {"type": "approve"} |
  {"type": "send", "text": str, "images"?: [{"name", "data": base64}, …],
   "outputs"?: [{"label": str, "text": str}, …]} |
  {"type": "answer", "id": str, "answer": str} |
  {"type": "deny"} | {"type": "cancel"} | {"type": "restrict"} | {"type": "new"} |
  {"type": "use", "slug": str} | {"type": "revert"} | {"type": "continue"}
Status: {"slug", "state", "words", "mode", "rest", "paused", "reason"}.

Handlers may run on a subshell thread (JupyterLab sends comm messages over
subshells); everything is handed to the kernel's loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from phoenix_nb.checkpoints.recorder import RevertRefused
from phoenix_nb.core.values import ImageData
from phoenix_nb.llm.images import ImageError, prepare_image
from phoenix_nb.notebook._render.view import state_words
from phoenix_nb.notebook.cell import Applied, TurnView
from phoenix_nb.notebook.render import MIME_TYPE, render_bundle
from phoenix_nb.notebook.session import Session
from phoenix_nb.notebook.undo import report_text, revert, turn_first_write
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, PhoenixError

__all__ = ["TARGET", "PanelChannel", "Port", "close_all", "open_channel"]

TARGET = "phoenix.panel"
log = logging.getLogger(__name__)
Action = Callable[[Conversation], Awaitable[object]]
_ACTIONS: dict[str, Action] = {
    "cancel": lambda conv: conv.cancel(),
    "restrict": lambda conv: conv.restrict(),
}
_ANSWERS = ("approve", "deny")  # through the process's pending requests (runtime/pending.py)
# An attached cell output longer than this is cut (head and tail kept): a cell that printed a
# whole data set should not fill the model's context unasked.
MAX_OUTPUT_CHARS = 20_000


class Port(Protocol):
    """What a panel channel sends through: a comm (`comm.base_comm.BaseComm`) in a kernel.

    `send(data)` delivers one JSON message to the front end; it may fail when the
    socket is gone, and the channel then drops the message (the panel re-syncs with
    `hello`). `close()` ends the comm from the kernel's side (the panel opens a new one)."""

    def send(self, data: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class _PanelView(TurnView):
    """The whole conversation's record, sent to the panel instead of displayed."""

    def __init__(self, conv: Conversation, session: Session, channel: PanelChannel) -> None:
        super().__init__(conv, session, can_answer=True, first_cycle=0)
        self.channel = channel

    def _send(self, bundle: dict[str, Any]) -> None:
        self.channel.send_record(bundle, final=False)


class PanelChannel:
    """One open panel on this kernel: follows the session's current conversation."""

    def __init__(
        self,
        port: Port,
        session: Session,
        loop: asyncio.AbstractEventLoop,
        *,
        min_interval: float | None = None,
    ) -> None:
        self.port = port
        self.session = session
        self.loop = loop
        self.min_interval = (
            session.config.display_min_interval if min_interval is None else min_interval
        )
        self.conv: Conversation | None = None
        self.view: _PanelView | None = None
        self.sub: up.Subscription | None = None
        self.follower: asyncio.Task[None] | None = None
        self.reason = ""  # the pending upgrade request's reason, while paused
        self._deltas: list[list[Any]] = []
        self._flush_at: asyncio.TimerHandle | None = None
        self._last_flush = float("-inf")
        self.closed = False
        self._unwatch = session.watch_current(self._current_changed)
        self._pending_sent: list[dict[str, object]] = []
        self._pending_due = False
        self._watched = session.phoenix.pending
        self._unwatch_pending = self._watched.watch(self._pending_changed)

    # -- from the front end ---------------------------------------------------------
    def on_msg(self, msg: Mapping[str, Any]) -> None:
        """A comm message (any thread): handled on the kernel's loop."""
        content = msg.get("content") if isinstance(msg, Mapping) else None
        data = content.get("data") if isinstance(content, Mapping) else None
        if isinstance(data, Mapping):
            self.loop.call_soon_threadsafe(self.handle, dict(data))

    def handle(self, data: Mapping[str, Any]) -> None:
        """One message from the front end, on the loop; anything unknown is ignored."""
        kind = data.get("type")
        if kind == "hello":
            self.sync()
        elif kind == "bundle":
            self.send_bundle()
        elif kind == "send" and isinstance(data.get("text"), str):
            text = str(data["text"]).strip()
            if text:
                images, outputs = data.get("images"), data.get("outputs")
                self._start(lambda conv: self._post(conv, text, images, outputs), create=True)
        elif kind == "answer" and isinstance(data.get("id"), str):
            self._answer_by_id(str(data["id"]), str(data.get("answer", "")))
        elif kind == "new":
            self._start(self._new, create=True)
        elif kind == "use" and isinstance(data.get("slug"), str):
            self._use(str(data["slug"]))
        elif kind == "revert":
            self._start(self._revert, create=False)
        elif kind == "continue":
            self._start(self._continue, create=False)
        elif kind in _ANSWERS:
            self._start(lambda conv: self._answer(conv, str(kind)), create=False)
        elif isinstance(kind, str) and kind in _ACTIONS:
            self._start(_ACTIONS[kind], create=False)

    def _start(self, action: Action, *, create: bool) -> None:
        async def run() -> None:
            try:
                if self.conv is None:
                    if not create:
                        return
                    self._attach(self.session.current_conversation_or_new())
                assert self.conv is not None
                await action(self.conv)
            except (PhoenixError, ImageError) as exc:
                self.send({"type": "notice", "text": str(exc)})

        self.loop.create_task(run())

    async def _post(self, conv: Conversation, text: str, images: object, outputs: object) -> None:
        """The message with its attachments; `sent` once the conversation took it (an image
        that cannot be sent, or a busy conversation, is the notice: the panel keeps it all)."""
        prepared = await asyncio.to_thread(_images, images)
        await conv.post_message(text + _outputs_text(outputs), prepared)
        self.send({"type": "sent"})

    def _answer_by_id(self, request_id: str, answer: str) -> None:
        """A request of the pending list, answered by its id (whichever front end is first)."""

        async def run() -> None:
            try:
                await self.session.phoenix.pending.answer(request_id, answer)
            except PhoenixError as exc:
                self.send({"type": "notice", "text": str(exc)})

        self.loop.create_task(run())

    async def _answer(self, conv: Conversation, answer: str) -> None:
        """Approve / Deny the request this conversation waits on, by its id, as `%phoenix
        approve` and the cell's buttons do: whichever front end answers first wins."""
        pending = self.session.phoenix.pending
        # Only a request that takes this word: a cell edit of the conversation waits too.
        waiting = [r for r in pending.list(conversation=conv.slug) if answer in r.answers]
        if not waiting:
            self.send(
                {"type": "notice", "text": f"Nothing to {answer}: {conv.slug} waits for no answer."}
            )
            return
        await pending.answer(waiting[0].id, answer)

    def _use(self, slug: str) -> None:
        """Switch the notebook's conversation (as `%phoenix use`): only to one `list` shows."""
        if slug not in {str(row["slug"]) for row in self.session.phoenix.list()}:
            self.send({"type": "notice", "text": f"No conversation named {slug!r}."})
            return
        try:
            self.session.current = self.session.phoenix.get(slug).slug  # the watcher re-attaches
        except PhoenixError as exc:
            self.send({"type": "notice", "text": str(exc)})

    async def _revert(self, conv: Conversation) -> None:
        """Undo the latest turn that changed files (the cell's and the chat's Revert): the
        newest cycle whose tool calls wrote, back to the checkpoint before its first write."""
        found = None
        for cycle in reversed(conv.payload().get("cycles") or []):
            found = turn_first_write([cycle])
            if found is not None:
                break
        if found is None:
            self.send(
                {
                    "type": "notice",
                    "text": f"Nothing to revert: no turn of {conv.slug} changed files.",
                }
            )
            return
        try:
            report = await revert(conv, self.session.phoenix.worktree, target=found[0])
        except RevertRefused as exc:
            self.send(
                {
                    "type": "notice",
                    "text": f"{exc} `%phoenix revert {found[0]} --force` reverts anyway.",
                }
            )
            return
        self.send({"type": "notice", "text": report_text(report)})

    async def _continue(self, conv: Conversation) -> None:
        """`%phoenix continue`: a new conversation seeded with a summary of this one, made the
        notebook's (watch_current re-attaches the panel to it)."""
        new = await conv.continue_in_new()
        self.session.current = new.slug
        self.send(
            {
                "type": "notice",
                "text": f"Started {new.slug}, seeded with a summary of {conv.slug}.",
            }
        )

    async def _new(self, _conv: Conversation) -> None:
        conv = self.session.phoenix.create(cwd=self.session.cwd)
        self.session.current = conv.slug  # watch_current re-attaches the panel

    # -- following ------------------------------------------------------------------
    def sync(self) -> None:
        """Attach to the notebook's conversation (if any) and send its whole record, with
        the conversations to switch to (`%phoenix list`'s)."""
        slug = self.session.current
        pending = self.session.phoenix.pending
        if pending is not self._watched:  # `%config Phoenix.home`: another store, another Phoenix
            self._unwatch_pending()
            self._watched = pending
            self._unwatch_pending = pending.watch(self._pending_changed)
        self.send_conversations(slug)
        if slug is None:
            self.send({"type": "empty", "status": _status(None, "")})
            self.send_pending()
            return
        if self.conv is None or self.conv.slug != slug:
            self._attach(self.session.phoenix.get(slug))
        else:
            self.send_final()

    def _current_changed(self, slug: str | None) -> None:
        if self.closed:
            return
        if slug is not None and (self.conv is None or self.conv.slug != slug):
            self.loop.call_soon_threadsafe(self.sync)

    def _attach(self, conv: Conversation) -> None:
        self._stop_following()
        self.conv = conv
        self.view = _PanelView(conv, self.session, self)
        self.sub = conv.subscribe()
        self.follower = self.loop.create_task(self._follow(conv, self.view, self.sub))
        self.reason = ""
        self.send_final()
        self.send_pending()

    def _stop_following(self) -> None:
        if self.sub is not None:
            self.sub.close()
        if self.follower is not None:
            self.follower.cancel()
        self.sub = self.follower = None

    async def _follow(self, conv: Conversation, view: _PanelView, sub: up.Subscription) -> None:
        """Every update of `conv` into the panel, until it stops following."""
        try:
            async for update in sub:
                structural = False
                for item in [update, *sub.pending()]:
                    data = item.data
                    if isinstance(data, up.NoticeText):
                        self.send({"type": "notice", "text": data.text})
                        continue
                    if isinstance(data, up.ApprovalNeeded):
                        self.reason = data.reason
                        structural = True
                        continue  # the panel answers it: never ends or auto-answers
                    applied = await view._apply(item)
                    if applied is Applied.DELTA:
                        assert isinstance(data, up.StreamedText | up.StreamedThinking)
                        kind = "assistant" if isinstance(data, up.StreamedText) else "reasoning"
                        self._deltas.append([data.index, kind, data.text])
                    elif applied in (Applied.STRUCTURAL, Applied.END):
                        structural = True
                if structural:
                    self._deltas.clear()  # the record carries the text streamed so far
                    if is_rest(conv.state):
                        self.reason = ""
                        view.live_parts.clear()
                        self.send_final()
                    else:
                        if not is_paused(conv.state):
                            self.reason = ""
                        self.send_record({MIME_TYPE: view.record()}, final=False)
                elif self._deltas:
                    self._schedule_flush()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the panel must say it stopped, not freeze
            log.exception("the phoenix panel stopped following %s", conv.slug)
            self.send({"type": "notice", "text": f"The panel stopped following {conv.slug}: {exc}"})
        finally:
            sub.close()

    def _schedule_flush(self) -> None:
        if self._flush_at is not None:
            return
        wait = self._last_flush + self.min_interval - time.monotonic()
        if wait <= 0:
            self._flush()
        else:
            self._flush_at = self.loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._flush_at = None
        self._last_flush = time.monotonic()
        if self._deltas:
            parts, self._deltas = self._deltas, []
            self.send({"type": "delta", "parts": parts})

    # -- to the front end -----------------------------------------------------------
    def send_final(self) -> None:
        """The whole record, without fallbacks: the panel asks for those (`bundle`) only
        when it keeps the record in the notebook, so a turn the panel merely follows costs
        no second rendering of the conversation."""
        if self.view is None:
            return
        self.send_record({MIME_TYPE: self.view.record()}, final=is_rest(self.view.conv.state))

    def send_bundle(self) -> None:
        """The record with its html/markdown/plain fallbacks: the notebook's phoenix cell."""
        if self.view is not None:
            self.send({"type": "bundle", "bundle": render_bundle(self.view.record())})

    def _pending_changed(self) -> None:
        """A pending source changed (any thread): list again on the loop, once per burst."""
        if self.closed or self._pending_due:
            return
        self._pending_due = True
        self.loop.call_soon_threadsafe(self.send_pending)

    def send_pending(self) -> None:
        """What waits for a person here (the notebook's conversation's and the whole
        process's), when it differs from what the panel last heard."""
        self._pending_due = False
        if self.closed:
            return
        slug = self.conv.slug if self.conv is not None else None
        items = [
            r.as_json()
            for r in self.session.phoenix.pending.list()
            if r.conversation == "" or r.conversation == slug
        ]
        if items != self._pending_sent:
            self._pending_sent = items
            self.send({"type": "pending", "items": items})

    def send_conversations(self, current: str | None) -> None:
        rows = self.session.phoenix.list()
        items = [{"slug": str(r["slug"]), "state": str(r["state"])} for r in rows]
        self.send({"type": "conversations", "items": items, "current": current})

    def send_record(self, bundle: dict[str, Any], *, final: bool) -> None:
        bundle = {MIME_TYPE: bundle[MIME_TYPE]}  # the view's text/plain status line: unused
        self.send({"type": "record", "bundle": bundle, "final": final, "status": self.status()})

    def status(self) -> dict[str, Any]:
        return _status(self.conv, self.reason)

    def send(self, data: dict[str, Any]) -> None:
        if self.closed:
            return
        with contextlib.suppress(Exception):  # a closed socket: the panel re-syncs on hello
            self.port.send(data)

    def close(self) -> None:
        self.closed = True
        self._unwatch()
        self._unwatch_pending()
        self._stop_following()
        if self._flush_at is not None:
            self._flush_at.cancel()


def _images(raw: object) -> list[ImageData]:
    """The message's images from the wire (`[{"name", "data": base64}]`), made ready as
    `%phoenix chat`'s are; ImageError names the one that cannot be sent."""
    if not isinstance(raw, list):
        return []
    out: list[ImageData] = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("data"), str):
            continue
        name = str(item.get("name") or "image")
        kept = "Nothing was sent: the message and its attachments are still in the box."
        try:
            data = base64.b64decode(str(item["data"]), validate=True)
            out.append(prepare_image(data))
        except binascii.Error:
            raise ImageError(f"The image {name!r} did not arrive whole. {kept}") from None
        except ImageError as exc:
            said = str(exc)  # prepare_image calls bytes "image": say which one
            said = f"{name!r}{said[5:]}" if said.startswith("image ") else said
            raise ImageError(f"The image cannot be sent: {said} {kept}") from None
    return out


def _outputs_text(raw: object) -> str:
    """Attached cell outputs (`[{"label", "text"}]`) as text after the message: each in a
    fence longer than any backtick run in it, so the output cannot end the fence early."""
    if not isinstance(raw, list):
        return ""
    parts: list[str] = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            continue
        label, body = str(item.get("label") or "output of a cell"), str(item["text"])
        if len(body) > MAX_OUTPUT_CHARS:
            half = MAX_OUTPUT_CHARS // 2
            cut = len(body) - 2 * half
            body = f"{body[:half]}\n[… {cut} characters cut …]\n{body[-half:]}"
        runs = [len(m) for m in re.findall(r"`+", body)]
        fence = "`" * max(3, max(runs, default=0) + 1)
        head = f"{label[:1].upper()}{label[1:]} (attached from the notebook):"
        parts.append(f"{head}\n{fence}\n{body}\n{fence}")
    return "".join("\n\n" + part for part in parts)


def _status(conv: Conversation | None, reason: str) -> dict[str, Any]:
    if conv is None:
        return {
            "slug": None,
            "state": "none",
            "words": "no conversation yet",
            "mode": "",
            "rest": True,
            "paused": False,
            "reason": "",
        }
    state = conv.state
    paused = is_paused(state)
    return {
        "slug": conv.slug,
        "state": state.name,
        "words": state_words(state.name),
        "mode": conv.mode.value,
        "rest": is_rest(state),
        "paused": paused,
        "reason": reason if paused else "",
    }


_CHANNELS: list[PanelChannel] = []
# A page that goes away without closing its comm (a crash, a lost network) leaves its
# channel following and sending: beyond this many, the oldest are closed. Pages close
# their comms when they unload (panel.ts), so this bounds only what is left behind.
MAX_CHANNELS = 8


def open_channel(comm: Any, session: Session, loop: asyncio.AbstractEventLoop) -> PanelChannel:
    """A panel opened `comm` (the target `extension.load` registered): follow for it."""
    channel = PanelChannel(comm, session, loop)
    _CHANNELS.append(channel)
    while len(_CHANNELS) > MAX_CHANNELS:
        oldest = _CHANNELS.pop(0)
        oldest.close()
        with contextlib.suppress(Exception):
            oldest.port.close()

    def closed(_close_msg: Any) -> None:
        channel.close()
        if channel in _CHANNELS:
            _CHANNELS.remove(channel)

    comm.on_msg(channel.on_msg)
    comm.on_close(closed)
    loop.call_soon_threadsafe(channel.sync)
    return channel


def close_all() -> None:
    """Stop every panel channel (`%unload_ext`)."""
    for channel in list(_CHANNELS):
        channel.close()
    _CHANNELS.clear()
