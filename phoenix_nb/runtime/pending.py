"""Requests that wait for a person, answerable from anywhere in the kernel.

A turn that waits for the user (a mode upgrade today; a proposed cell edit or an
MCP approval may join) must be answerable whatever happened to the cell that asked:
the page was reloaded, a second tab is open, the websocket dropped. So the answer
does not go through the asking cell's widgets only: `PendingRequests` lists every
waiting request of this process with a stable id and answers one by id. `%phoenix
approve / deny / cancel`, a kernel comm (a side panel) and the cell's own buttons all
call it, so they cannot disagree about what is pending.

The kinds are an open set: each kind is a `PendingSource` (a small port), and a new
kind registers its source with `PendingRequests.add_source` without touching the
others. A request's `kind` is a plain string for the same reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from phoenix_nb.core.states import AwaitingModeApproval
from phoenix_nb.errors import PhoenixError
from phoenix_nb.tools.cell_edits import EditBook

__all__ = [
    "CELL_EDIT",
    "MODE_APPROVAL",
    "CellEdits",
    "ModeApprovals",
    "PendingRequest",
    "PendingRequests",
    "PendingSource",
    "UnknownRequest",
    "WaitingApproval",
]

MODE_APPROVAL = "mode_approval"
CELL_EDIT = "cell_edit"


@dataclass(frozen=True)
class PendingRequest:
    """One request waiting for a person.

    `id` is stable while the request waits and unique in the process (a mode
    approval's is its tool call's id), so two front ends answering it cannot answer
    two different things. `reason` is the agent's words: quote it, never render it.
    `answers` are the words `answer` accepts for this request; a request answered
    somewhere else (a cell edit is accepted on its cell) has none. `conversation` is
    "" for a request of the whole process (an MCP server awaiting approval). `detail`
    is what a front end needs to show or find it (e.g. `cell_id`, `server`), plain
    strings, each as hostile as `reason`.
    """

    id: str
    kind: str
    conversation: str
    reason: str
    answers: tuple[str, ...]
    detail: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        """The request as a comm or a record carries it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "conversation": self.conversation,
            "reason": self.reason,
            "answers": list(self.answers),
            "detail": dict(self.detail),
        }


class UnknownRequest(PhoenixError):
    """No request with that id waits (already answered, or never asked)."""


class PendingSource(Protocol):
    """One kind of pending request.

    `pending()` lists what waits now (cheap: called on every listing); `answer`
    acts on one of them with one of its `answers` and returns once the answer is
    taken (the turn goes on by itself). It raises PhoenixError for an answer it
    cannot take.
    """

    def pending(self) -> list[PendingRequest]: ...

    async def answer(self, request: PendingRequest, answer: str) -> None: ...


class _Answerable(Protocol):
    """What `ModeApprovals` needs of a conversation (runtime.manager.Conversation)."""

    @property
    def slug(self) -> str: ...

    async def approve(self) -> None: ...

    async def deny(self) -> None: ...

    async def cancel(self) -> None: ...


@dataclass(frozen=True)
class WaitingApproval:
    """A conversation whose state waits for an upgrade answer."""

    conversation: _Answerable
    phase: AwaitingModeApproval


class ModeApprovals:
    """Upgrade requests (`request_mode_upgrade`) of the conversations this process has open."""

    def __init__(self, waiting: Callable[[], Iterable[WaitingApproval]]) -> None:
        self._waiting = waiting
        self._by_id: dict[str, _Answerable] = {}

    def pending(self) -> list[PendingRequest]:
        found: list[PendingRequest] = []
        by_id: dict[str, _Answerable] = {}
        for item in self._waiting():
            request = PendingRequest(
                id=item.phase.tool_use_id,
                kind=MODE_APPROVAL,
                conversation=item.conversation.slug,
                reason=item.phase.reason,
                answers=("approve", "deny", "cancel"),
            )
            found.append(request)
            by_id[request.id] = item.conversation
        self._by_id = by_id
        return found

    async def answer(self, request: PendingRequest, answer: str) -> None:
        conv = self._by_id.get(request.id)
        if conv is None:
            raise UnknownRequest(f"No request {request.id!r} waits.")
        if answer == "approve":
            await conv.approve()
        elif answer == "deny":
            await conv.deny()
        elif answer == "cancel":
            await conv.cancel()
        else:
            raise PhoenixError(f"A mode approval takes approve, deny or cancel, not {answer!r}.")


class CellEdits:
    """The agent's proposed cell edits that wait for a decision (tools/cell_edits.py).

    An edit is decided on its cell (Accept / Reject under it, celledits.ts), where the
    diff is, so here it has no answers: a front end shows it with `detail["cell_id"]` to
    find that cell. `reason` is the agent's explanation (as hostile as any reason). The
    book tells the process's `PendingRequests` when an edit is proposed or decided
    (`EditBook.on_change`), which is how a panel's list redraws.
    """

    def __init__(self, book: EditBook, slug_of: Callable[[str], str]) -> None:
        self._book = book
        self._slug_of = slug_of  # a conversation's id -> its slug (what requests carry)

    def pending(self) -> list[PendingRequest]:
        return [
            PendingRequest(
                id=edit.id,
                kind=CELL_EDIT,
                conversation=self._slug_of(edit.conversation_id),
                reason=edit.explanation,
                answers=(),
                detail={"cell_id": edit.cell_id, "where": edit.where()},
            )
            for edit in self._book.pending()
        ]

    async def answer(self, request: PendingRequest, answer: str) -> None:
        raise PhoenixError(f"Cell edit {request.id} is accepted or rejected on its cell.")


class PendingRequests:
    """Every request of this process that waits for a person, from all its sources."""

    def __init__(self, sources: Iterable[PendingSource] = ()) -> None:
        self._sources: list[PendingSource] = list(sources)
        self._watchers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def add_source(self, source: PendingSource) -> None:
        """A new kind of request (e.g. MCP approvals) joins the listing."""
        self._sources.append(source)
        self.changed()

    def watch(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` whenever a source says what waits may have changed; returns
        the call that stops it. Listeners are called on the thread that called `changed`
        (a comm handler's subshell, the kernel's loop): one that touches the loop hands
        itself over (`call_soon_threadsafe`), and none may raise or block."""
        with self._lock:
            self._watchers.append(listener)

        def unwatch() -> None:
            with self._lock:
                if listener in self._watchers:
                    self._watchers.remove(listener)

        return unwatch

    def changed(self) -> None:
        """A source's requests were added or answered: tell every watcher (who then
        lists again). Cheap and safe to call when nothing changed."""
        with self._lock:
            watchers = list(self._watchers)
        for listener in watchers:
            listener()

    def list(self, conversation: str | None = None) -> list[PendingRequest]:
        """What waits now, oldest source first; only `conversation`'s when given."""
        out: list[PendingRequest] = []
        for source in self._sources:
            out.extend(
                r
                for r in source.pending()
                if conversation is None or r.conversation == conversation
            )
        return out

    async def answer(self, request_id: str, answer: str) -> PendingRequest:
        """Answer the request `request_id`; returns it. UnknownRequest if none waits."""
        for source in self._sources:
            for request in source.pending():
                if request.id == request_id:
                    if not request.answers:
                        raise PhoenixError(
                            f"{request.kind} {request_id!r} is answered where it is shown "
                            f"(it takes no answer here, not {answer!r})."
                        )
                    if answer not in request.answers:
                        raise PhoenixError(
                            f"{request.kind} {request_id!r} takes "
                            f"{', '.join(request.answers)}, not {answer!r}."
                        )
                    await source.answer(request, answer)
                    return request
        raise UnknownRequest(f"No request {request_id!r} waits (already answered?).")
