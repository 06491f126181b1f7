"""PendingRequests: every kind of waiting request listed and answered by id, and watchers
told when what waits may have changed (the side panel redraws its list from that)."""

from __future__ import annotations

import asyncio

import pytest

from phoenix_nb.errors import PhoenixError
from phoenix_nb.runtime.pending import PendingRequest, PendingRequests, UnknownRequest


class _Source:
    def __init__(self, requests: list[PendingRequest]) -> None:
        self.requests = requests
        self.answered: list[tuple[str, str]] = []

    def pending(self) -> list[PendingRequest]:
        return list(self.requests)

    async def answer(self, request: PendingRequest, answer: str) -> None:
        self.answered.append((request.id, answer))
        self.requests.remove(request)


def _request(rid: str, conversation: str = "c1", **detail: str) -> PendingRequest:
    return PendingRequest(rid, "test_kind", conversation, "why", ("yes", "no"), detail)


def test_detail_travels_with_the_request() -> None:
    data = _request("r1", cell_id="abc").as_json()
    assert data["detail"] == {"cell_id": "abc"}
    assert PendingRequest("r2", "k", "c", "why", ()).as_json()["detail"] == {}


def test_watchers_hear_changes_until_they_stop() -> None:
    pending = PendingRequests()
    heard: list[int] = []
    stop = pending.watch(lambda: heard.append(1))
    pending.add_source(_Source([_request("r1")]))  # a new source is a change
    pending.changed()
    assert heard == [1, 1]
    stop()
    pending.changed()
    stop()  # twice is harmless
    assert heard == [1, 1]


def test_answer_by_id_across_sources_and_filter_by_conversation() -> None:
    first, second = _Source([_request("r1")]), _Source([_request("r2", conversation="")])
    pending = PendingRequests([first, second])
    assert [r.id for r in pending.list()] == ["r1", "r2"]
    assert [r.id for r in pending.list(conversation="c1")] == ["r1"]
    with pytest.raises(PhoenixError, match="takes yes, no"):
        asyncio.run(pending.answer("r2", "maybe"))
    assert asyncio.run(pending.answer("r2", "no")).id == "r2"
    assert second.answered == [("r2", "no")]
    with pytest.raises(UnknownRequest):
        asyncio.run(pending.answer("r2", "no"))


def test_cell_edits_are_listed_until_decided_and_tell_the_watchers() -> None:
    """A proposed edit waits with no answers here (it is decided on its cell) and names its
    cell; the book tells the watchers when one is proposed or decided, once per decision."""
    from phoenix_nb.runtime.pending import CELL_EDIT, CellEdits
    from phoenix_nb.tools.cell_edits import CellEdit, EditBook, EditOutcome, EditPosition

    book = EditBook()
    pending = PendingRequests([CellEdits(book, {"conv-id": "my-slug"}.__getitem__)])
    book.on_change(pending.changed)
    heard: list[int] = []
    pending.watch(lambda: heard.append(1))
    edit = CellEdit("edit-1", "conv-id", "cell-a", EditPosition.REPLACE, "x = 2", "<b>Two</b>")
    book.propose(edit)
    assert heard == [1]
    [listed] = pending.list(conversation="my-slug")
    assert (listed.kind, listed.reason, listed.answers) == (CELL_EDIT, "<b>Two</b>", ())
    assert listed.detail["cell_id"] == "cell-a"
    with pytest.raises(PhoenixError):
        asyncio.run(pending.answer("edit-1", "accept"))
    assert book.resolve("edit-1", EditOutcome.ACCEPTED)
    assert heard == [1, 1] and pending.list() == []
    assert not book.resolve("edit-1", EditOutcome.REJECTED)  # already decided: no change
    assert heard == [1, 1]
