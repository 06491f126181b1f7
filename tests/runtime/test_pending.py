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
