"""edit_cell and insert_cell in a real kernel, with no front end that could apply them.

Cells are sent the way JupyterLab and Notebook 7 send them (`metadata.cellId` on the
execute request), so the kernel learns their ids. The fake model reads kernel_history
and proposes edits; the test checks what reached the model, that the proposal is in
the record's fallbacks (where nbconvert or papermill would leave it) and in `%phoenix
edits`, that no notebook file is touched, and — answering over the comm as the
labextension does — that the human's decisions reach the agent with the next message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Execution, Kernel

pytestmark = pytest.mark.timeout(180)

FAILING_ID = "a1b2c3d4-fail"
OTHER_ID = "e5f6a7b8-other"
FAILING = "total = 10\ncount = 0\nratio = total / count\n"
FIXED = "total = 10\ncount = 0\nratio = total / count if count else 0.0\n"
NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def run_cell(k: Kernel, code: str, cell_id: str) -> Execution:
    """Run `code` as the notebook cell `cell_id`, as JupyterLab sends it."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    msg = k.client.session.msg("execute_request", content, metadata={"cellId": cell_id})
    k.client.shell_channel.send(msg)
    execution = Execution(msg["header"]["msg_id"], 0.0)
    k.executions[execution.msg_id] = execution
    return k.finish(execution, timeout=60)


def _setup(k: Kernel) -> None:
    (k.project / "analysis.ipynb").write_text(json.dumps(NOTEBOOK))
    assert run_cell(k, "x = 1", OTHER_ID).status == "ok"
    failed = run_cell(k, FAILING, FAILING_ID)
    assert failed.status == "error" and failed.error()["ename"] == "ZeroDivisionError"
    assert run_cell(k, "x = 2", OTHER_ID).status == "ok"  # the same cell, changed and run again


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    return _setup


def result_text(fake: FakeAnthropic, tool_use_id: str) -> tuple[str, bool]:
    for request in fake.requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                    body = block["content"]
                    words = body if isinstance(body, str) else " ".join(b["text"] for b in body)
                    return words, bool(block.get("is_error"))
    raise AssertionError(f"no tool_result for {tool_use_id}")


def edit_comm(k: Kernel) -> tuple[str, list[dict[str, Any]]]:
    """The cell-edits comm the kernel opened, and every message it sent on it."""
    opened = [
        m for _, m in k.iopub
        if m["msg_type"] == "comm_open" and m["content"]["target_name"] == "phoenix.cell_edits"
    ]  # fmt: skip
    assert opened, "the kernel opened no phoenix.cell_edits comm"
    comm_id = opened[-1]["content"]["comm_id"]
    sent = [opened[-1]["content"]["data"]] + [
        m["content"]["data"]
        for _, m in k.iopub
        if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
    ]
    return comm_id, sent


def answer(k: Kernel, comm_id: str, data: dict[str, Any]) -> None:
    msg = k.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    k.client.shell_channel.send(msg)


def test_history_names_cells_and_marks_changed_ones(kern: Kernel, fake: FakeAnthropic) -> None:
    history = tool_use("kernel_history", {})
    fake.script(Turn([history]), Turn([text("Read it.")]))
    cell = kern.run("%%phoenix --name history-ids\nWhat failed?", timeout=60)
    assert cell.status == "ok", cell.error()
    words, is_error = result_text(fake, history.id)
    assert not is_error, words
    assert f"(cell {FAILING_ID}):\n{FAILING.strip()}" in words
    assert f"(cell {OTHER_ID}; changed since: run again with other source as In [" in words
    assert f"(cell {OTHER_ID}):\nx = 2" in words  # its latest run carries no mark


def test_headless_proposals_stay_pending_in_the_record_and_edits(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    notebook = kern.project / "analysis.ipynb"
    before = (notebook.read_bytes(), notebook.stat().st_mtime_ns)
    files_before = sorted(p.name for p in kern.project.rglob("*.ipynb"))
    edit = tool_use(
        "edit_cell",
        {"cell_id": FAILING_ID, "new_source": FIXED, "explanation": "Guard the zero count."},
    )
    insert = tool_use(
        "insert_cell",
        {
            "cell_id": FAILING_ID,
            "position": "below",
            "source": "print(ratio)",
            "explanation": "Show the result.",
        },
    )
    unknown = tool_use(
        "edit_cell", {"cell_id": "no-such-cell", "new_source": "1", "explanation": "x"}
    )
    fake.script(Turn([edit, insert, unknown]), Turn([text("Proposed a fix.")]))
    cell = kern.run("%%phoenix --name headless-edit\nFix the failing cell.", timeout=60)
    assert cell.status == "ok", cell.error()

    words, is_error = result_text(fake, edit.id)
    assert not is_error, words
    assert "Nothing changes until the user accepts" in words
    assert "+ratio = total / count if count else 0.0" in words
    assert "-ratio = total / count" in words
    assert not result_text(fake, insert.id)[1]
    unknown_words, unknown_error = result_text(fake, unknown.id)
    assert unknown_error and "kernel_history" in unknown_words

    bundle = cell.last_bundle()
    for mime in ("text/plain", "text/markdown", "text/html"):
        shown = bundle[mime]
        assert "Guard the zero count." in shown, mime
        assert "if count else 0.0" in shown, mime  # the new source
    record = bundle["application/vnd.phoenix.conversation+json"]
    raw = json.dumps(record)
    assert '"cell_diff"' in raw and FAILING_ID in raw  # the typed display, for the labextension

    listing = kern.ok("%phoenix edits").text("stdout")
    assert "2 proposed cell edits waiting" in listing
    assert f"cell {FAILING_ID}" in listing and "Guard the zero count." in listing
    assert "+ratio = total / count if count else 0.0" in listing
    assert "New source:" in listing and "print(ratio)" in listing
    assert f"a new cell below cell {FAILING_ID}" in listing

    # Proposed, never applied: the kernel ran nothing and no notebook file changed.
    assert kern.eval("'ratio' in globals()") is False
    assert (notebook.read_bytes(), notebook.stat().st_mtime_ns) == before
    assert sorted(p.name for p in kern.project.rglob("*.ipynb")) == files_before

    # The comm offered both edits to any front end that listens.
    _, sent = edit_comm(kern)
    offered = [e["id"] for m in sent for e in m.get("edits", [])] + [
        m["edit"]["id"] for m in sent if m.get("type") == "edit"
    ]
    assert len(set(offered)) == 2


def test_decisions_reach_the_agent_with_the_next_message(kern: Kernel, fake: FakeAnthropic) -> None:
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": FAILING_ID, "new_source": FIXED,
                                     "explanation": "Guard it."})]),
        Turn([tool_use("edit_cell", {"cell_id": OTHER_ID, "new_source": "x = 3",
                                     "explanation": "Three."})]),
        Turn([text("Two edits proposed.")]),
    )  # fmt: skip
    cell = kern.run("%%phoenix --name decisions\nFix it.", timeout=60)
    assert cell.status == "ok", cell.error()
    comm_id, sent = edit_comm(kern)
    ids = {}
    for m in sent:
        for e in m.get("edits", []) + ([m["edit"]] if m.get("type") == "edit" else []):
            ids[e["cell_id"], e["new_source"]] = e["id"]
    fixed_id, other_id = ids[FAILING_ID, FIXED], ids[OTHER_ID, "x = 3"]
    accepted_text = FIXED + "# merged by the user\napi_token = 'sk-live-0123456789'\n"
    answer(kern, comm_id, {"type": "outcome", "id": fixed_id, "outcome": "accepted",
                           "source": accepted_text})  # fmt: skip
    answer(kern, comm_id, {"type": "outcome", "id": "edit-forged", "outcome": "accepted"})
    kern.wait_until(
        lambda: any(
            m["msg_type"] == "comm_msg" and m["content"]["data"].get("id") == fixed_id
            and m["content"]["data"].get("type") == "resolved"
            for _, m in kern.iopub
        ),
        30,
        "the kernel to confirm the decision",
    )  # fmt: skip
    assert kern.eval("'ratio' in globals()") is False  # accepted is not run

    fake.clear()
    history = tool_use("kernel_history", {})
    fake.script(Turn([history]), Turn([text("Noted.")]))
    cell = kern.run("%%phoenix --name decisions\nDone?", timeout=60)
    assert cell.status == "ok", cell.error()
    first = fake.requests[0].body["messages"][-1]["content"]
    note = " ".join(b.get("text", "") for b in first if b.get("type") == "text")
    assert f"- {fixed_id} (cell {FAILING_ID} (In [" in note
    assert "accepted, merged with the user's own edit" in note and "# merged by the user" in note
    assert "sk-live-0123456789" not in note and "[REDACTED]" in note  # the user's secret stays
    assert f"- {other_id} (cell {OTHER_ID}" in note and "still pending" in note
    assert "edit-forged" not in note
    words, _ = result_text(fake, history.id)
    assert f"(cell {FAILING_ID}; changed since: the user accepted edit {fixed_id})" in words
    # The cell of the turn in which the agent read the outcome shows it, ahead of the question.
    saved = cell.last_bundle()
    plain = saved["text/plain"]
    assert f"- {fixed_id} (cell {FAILING_ID}" in plain and "still pending" in plain
    assert plain.index("accepted, merged with the user's own edit") < plain.index("Done?")
    cycles = saved["application/vnd.phoenix.conversation+json"]["cycles"]
    assert [s["kind"] for s in cycles[0]["steps"][:2]] == ["system", "user"]
    assert fixed_id in cycles[0]["steps"][0]["text"]
    # The conversation record holds the proposal and, after it, what became of it.
    kern.ok("%phoenix export decisions --output decisions.md")
    exported = (kern.project / "decisions.md").read_text()
    assert exported.index("Guard it.") < exported.index(f"{fixed_id} (cell {FAILING_ID}")
    assert "accepted, merged with the user's own edit" in exported

    # Heard once: the next message carries no note until something changes.
    answer(kern, comm_id, {"type": "outcome", "id": other_id, "outcome": "rejected"})
    fake.clear()
    fake.script(Turn([text("Ok.")]))
    kern.wait_until(
        lambda: any(
            m["msg_type"] == "comm_msg" and m["content"]["data"].get("id") == other_id
            and m["content"]["data"].get("type") == "resolved"
            for _, m in kern.iopub
        ),
        30,
        "the rejection",
    )  # fmt: skip
    assert kern.run("%%phoenix --name decisions\nAnd now?", timeout=60).status == "ok"
    last = json.dumps(fake.requests[0].body["messages"][-1]["content"])
    assert f"{other_id} (cell {OTHER_ID}" in last and "rejected" in last
    assert fixed_id not in last


def test_a_proposed_cell_carries_its_explanation(kern: Kernel, fake: FakeAnthropic) -> None:
    propose = tool_use(
        "propose_cell",
        {"code": "ratio = 0.0", "explanation": "Set a safe ratio.\nIt avoids the division."},
    )
    fake.script(Turn([propose]), Turn([text("Proposed.")]))
    cell = kern.run("%%phoenix --name explained\nFix it.", timeout=60)
    assert cell.status == "ok", cell.error()
    payloads = [p for p in cell.reply["content"]["payload"] if p["source"] == "set_next_input"]
    assert payloads[0]["text"] == "# Set a safe ratio.\n# It avoids the division.\nratio = 0.0"


def test_nbclient_run_leaves_the_proposal_in_the_record_and_the_file_alone(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nbclient sends no cell ids: the agent names the cell In[n]; nothing can apply it."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    from tests.notebook.kernel_harness import KERNEL_NAME, venv_kernelspecs

    fake.clear()
    history = tool_use("kernel_history", {})
    fake.script(
        Turn([history]),
        Turn([tool_use("edit_cell", {"cell_id": "In[2]", "new_source": FIXED,
                                     "explanation": "Guard the zero count."})]),
        Turn([text("Proposed a fix for In [2].")]),
    )  # fmt: skip
    for name, value in {
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "PHOENIX_HOME": str(tmp_path / "store"),
        "PHOENIX_MODEL": "claude-sonnet-4-5",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }.items():
        monkeypatch.setenv(name, value)
    cells = ["%load_ext phoenix_nb", FAILING, "%%phoenix --new\nFix the failing cell.",
             "%phoenix edits"]  # fmt: skip
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    path = tmp_path / "headless.ipynb"
    nbformat.write(nb, path)
    on_disk = path.read_bytes()
    km = KernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=venv_kernelspecs(tmp_path / "kernels")
    )
    client = NotebookClient(
        nb, km=km, timeout=90, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    words, _ = result_text(fake, history.id)
    assert "In [2]:\n" + FAILING.strip() in words and "In [2] (cell" not in words  # no ids
    record = [o for o in nb.cells[2].outputs if "text/plain" in o.get("data", {})][-1]["data"]
    for mime in ("text/plain", "text/markdown", "text/html"):
        assert "Guard the zero count." in record[mime] and "if count else 0.0" in record[mime]
    listing = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "1 proposed cell edit waiting" in listing and "cell In[2] (In [2])" in listing
    assert "+ratio = total / count if count else 0.0" in listing
    assert path.read_bytes() == on_disk
    assert [p.name for p in tmp_path.rglob("*.ipynb")] == ["headless.ipynb"]


def test_the_demo_model_proposes_an_edit_to_the_failing_cell(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """The offline demo's script, served by the test's fake (the kernel's ANTHROPIC_BASE_URL
    points there): it reads the last error and proposes a change to that cell."""
    from phoenix_nb.demo.screenplay import DemoScript

    previous, fake.default = fake.default, DemoScript(pace=0).reply
    try:
        cell = kern.run("%%phoenix --new\nPlease fix my failing cell.", timeout=120)
    finally:
        fake.default = previous
    assert cell.status == "ok", cell.error()
    shown = cell.last_bundle()["text/plain"]
    assert "edit_cell" in shown and "except ZeroDivisionError as error:" in shown
    listing = kern.ok("%phoenix edits").text("stdout")
    block = listing[listing.index(f"— cell {FAILING_ID}") :]
    assert "+    ratio = total / count" in block and "+except ZeroDivisionError" in block
    assert kern.eval("'ratio' in globals()") is False  # proposed, not run
