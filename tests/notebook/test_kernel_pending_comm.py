"""The `phoenix.pending` comm through a real kernel (notebook/pending_comm.py): what a
front end that (re)connects hears about a waiting turn, and how it answers.

A front end opens the comm as the labextension does at kernel connection, and runs a
`%%phoenix` cell with a cell id in the request's metadata, as JupyterLab and Notebook 7
send it. The kernel lists the waiting request with the asking cell's id and its
outputs' display ids, sends those outputs (the record and the controls, with the
cell's execution count) when asked, refuses an answer to a request that does not
wait, and takes an answer by id: the turn goes on in the cell that asked and the list
empties. The page-level behaviour is tests/browser/test_pending_reoffer.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Execution, Kernel, state_name

pytestmark = pytest.mark.timeout(180)

TARGET = "phoenix.pending"
CONTROLS = "application/vnd.phoenix.controls+json"
REASON = "I need to create a file"


def _comm_data(kern: Kernel, comm_id: str, since: int) -> list[dict[str, Any]]:
    return [
        m["content"]["data"]
        for _, m in kern.iopub[since:]
        if m["msg_type"] == "comm_msg" and m["content"].get("comm_id") == comm_id
    ]


def _wait_for(
    kern: Kernel, comm_id: str, since: int, match: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def seen() -> bool:
        found[:] = [d for d in _comm_data(kern, comm_id, since) if match(d)]
        return bool(found)

    kern.wait_until(seen, 60, what)
    return found[-1]


def _send(kern: Kernel, msg_type: str, content: dict[str, Any], **kwargs: Any) -> str:
    msg = kern.client.session.msg(msg_type, content, **kwargs)
    kern.client.shell_channel.send(msg)
    return str(msg["header"]["msg_id"])


def _run_with_cell_id(kern: Kernel, code: str, cell_id: str) -> Execution:
    """An execute_request carrying `metadata.cellId`, as JupyterLab sends it."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": True,
        "stop_on_error": True,
    }
    msg_id = _send(kern, "execute_request", content, metadata={"cellId": cell_id})
    execution = Execution(msg_id, 0.0)
    kern.executions[msg_id] = execution
    return execution


def _mine(data: dict[str, Any], slug: str) -> list[dict[str, Any]]:
    if data.get("type") != "pending":
        return []
    return [r for r in data.get("requests", []) if r.get("conversation") == slug]


def test_a_connecting_front_end_hears_the_waiting_request_gets_its_outputs_and_answers(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    comm_id = uuid.uuid4().hex
    start = len(kern.iopub)
    _send(kern, "comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": {}})
    first = _wait_for(kern, comm_id, start, lambda d: d.get("type") == "pending", "a list")
    assert isinstance(first["requests"], list)

    slug, cell_id = "comm-asks", "asking-cell"
    fake.script(
        Turn([text("I will ask."), tool_use("request_mode_upgrade", {"reason": REASON})]),
        Turn([tool_use("bash", {"command": "touch by-comm.txt"})]),
        Turn([text("Wrote by-comm.txt.")]),
    )
    cell = _run_with_cell_id(kern, f"%%phoenix --name {slug}\nplease create it", cell_id)
    kern.finish(cell, timeout=60)  # the cell ends at the request
    assert cell.status == "ok", cell.error()
    count = cell.reply["content"]["execution_count"] if cell.reply else None

    def placed(data: dict[str, Any]) -> bool:
        return any(r["detail"].get("outputs") for r in _mine(data, slug))

    listing = _wait_for(kern, comm_id, start, placed, "the request with its cell")
    (request,) = _mine(listing, slug)
    assert request["kind"] == "mode_approval" and request["reason"] == REASON
    assert request["answers"] == ["approve", "deny", "cancel"]
    assert request["detail"]["cell_id"] == cell_id
    ids = request["detail"]["outputs"].split()
    assert len(ids) == 2, "the record's display id and the controls'"

    since = len(kern.iopub)
    _send(kern, "comm_msg", {"comm_id": comm_id, "data": {"type": "outputs", "id": request["id"]}})
    sent = _wait_for(kern, comm_id, since, lambda d: d.get("type") == "outputs", "outputs")
    assert sent["id"] == request["id"] and sent["cell_id"] == cell_id
    assert sent["execution_count"] == count, "the asking cell's own In [n]"
    record, controls = sent["outputs"]
    assert record["output_type"] == "display_data"
    assert state_name(record["data"][MIME]) == "awaiting_mode_approval"
    assert CONTROLS in controls["data"]
    assert "application/vnd.jupyter.widget-view+json" in controls["data"], "live buttons"
    assert [o["metadata"]["phoenix"]["detached"] for o in sent["outputs"]] == ids

    since = len(kern.iopub)
    bogus = {"type": "answer", "id": "no-such-request", "answer": "approve"}
    _send(kern, "comm_msg", {"comm_id": comm_id, "data": bogus})
    refused = _wait_for(kern, comm_id, since, lambda d: d.get("type") == "refused", "a refusal")
    assert refused["id"] == "no-such-request"
    assert not (kern.project / "by-comm.txt").exists()

    since = len(kern.iopub)
    answer = {"type": "answer", "id": request["id"], "answer": "approve"}
    _send(kern, "comm_msg", {"comm_id": comm_id, "data": answer})
    kern.finish_turn(cell, timeout=60)  # the turn went on in the cell that asked
    assert state_name(cell.last_bundle()[MIME]) == "idle"
    assert (kern.project / "by-comm.txt").exists(), "the approved tool really ran"
    _wait_for(
        kern,
        comm_id,
        since,
        lambda d: d.get("type") == "pending" and not _mine(d, slug),
        "the list without the answered request",
    )
