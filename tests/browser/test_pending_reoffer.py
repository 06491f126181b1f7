"""Issue 38 in real Chromium, JupyterLab and Notebook 7: a page that never had a waiting
turn's outputs gets its controls from the kernel (notebook/pending_comm.py,
labextension/src/pending.ts).

A `%%phoenix` cell asks for write access and ends; the page that ran it is then
navigated away without saving, and the notebook file is written back as it was before
the run (so an autosave cannot have kept the outputs). Reopened, the page shows the
notebook without them; the kernel still waits.
- The asking cell is found by its id: the kernel's outputs (the record and the live
  controls) come back into that cell, and Approve there completes the turn in it.
- The asking cell is not in the reopened notebook (its id changed): a notice above
  the notebook quotes the request with Approve / Deny / Cancel, and Approve there
  completes the turn in the kernel.
What the other side received is checked: the file the agent patched, and the request
the fake Messages API got after the approval.

Both fail on the code before: nothing brought a waiting turn's outputs back into a page
that never had them, so the reopened page had nothing to answer with.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect

from phoenix_nb.testing import FakeAnthropic
from tests.browser.lab import LabPage
from tests.browser.test_never_stranded import (
    FIXED,
    REASON,
    WAIT_MS,
    _approve_button,
    _cell,
    _no_dead_widgets,
    _notebook,
    _open,
    _record,
    _run,
    _script,
    _wait_asking,
    _wait_done,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]


@pytest.fixture(params=["lab", "notebook7"])
def ui(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _reopen_unsaved(lab: LabPage, path: Path, text: str, name: str, ui: str) -> None:
    """Leave the page without saving, put the file back as `text`, open it again."""
    lab.page.goto("about:blank")
    path.write_text(text, encoding="utf-8")
    _open(lab, name, ui)
    expect(_cell(lab.page, 1)).to_be_visible(timeout=WAIT_MS)


def _approved_upstream(fake: FakeAnthropic) -> bool:
    """The Messages API got the request that follows an approval (the tool's result)."""
    return any("the user granted Unrestricted mode" in json.dumps(r.body) for r in fake.requests)


def _start_waiting(lab: LabPage, fake: FakeAnthropic, tmp_path: Path, name: str, ui: str):
    fake.clear()
    _script(fake)
    project = _notebook(lab, tmp_path, name)
    path = lab.server.root / f"{name}.ipynb"
    before = path.read_text(encoding="utf-8")
    _open(lab, name, ui)
    _run(lab, 0)
    _run(lab, 1)
    _wait_asking(lab.page, 1)
    return project, path, before


def test_a_page_that_never_had_the_outputs_gets_the_controls_back_in_the_asking_cell(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path, ui: str
) -> None:
    name = f"reoffer-cell-{ui}"
    project, path, before = _start_waiting(lab, fake_llm, tmp_path, name, ui)
    assert "awaiting_mode_approval" not in before
    prompt = _cell(lab.page, 1).locator(".jp-InputPrompt").inner_text()

    _reopen_unsaved(lab, path, before, name, ui)
    # The outputs come from the kernel, not from the file: it never held them.
    assert "awaiting_mode_approval" not in path.read_text(encoding="utf-8")
    _wait_asking(lab.page, 1)
    expect(_cell(lab.page, 1).locator(".jp-InputPrompt")).to_have_text(prompt)  # its `[n]:`
    expect(_record(lab.page, 1).locator("[data-phoenix-pending-approval]")).to_have_count(
        1, timeout=WAIT_MS
    )
    expect(lab.page.locator("[data-phoenix-pending-request]")).to_have_count(0)
    _no_dead_widgets(lab.page)
    _approve_button(lab.page, 1).click()
    _wait_done(lab.page, 1, "Fixed add().")
    assert (project / "calc.py").read_text(encoding="utf-8") == FIXED
    assert _approved_upstream(fake_llm)


def test_a_request_whose_cell_is_not_found_gets_a_notice_that_answers_it(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path, ui: str
) -> None:
    name = f"reoffer-notice-{ui}"
    project, path, before = _start_waiting(lab, fake_llm, tmp_path, name, ui)
    notebook = nbformat.reads(before, as_version=4)
    notebook.cells[1].id = "not-the-asking-cell"
    _reopen_unsaved(lab, path, nbformat.writes(notebook), name, ui)

    notice = lab.page.locator("[data-phoenix-pending-request]")
    expect(notice).to_have_count(1, timeout=WAIT_MS)
    expect(notice).to_contain_text(REASON)
    expect(notice).to_contain_text(name)
    for word in ("Approve", "Deny", "Cancel"):
        expect(notice.get_by_role("button", name=word, exact=True)).to_be_visible()
    expect(_cell(lab.page, 1).locator("[data-phoenix-record]")).to_have_count(0)
    notice.get_by_role("button", name="Approve", exact=True).click()
    expect(notice).to_have_count(0, timeout=WAIT_MS)  # answered: the request is gone
    _wait_for_file(project / "calc.py", FIXED)
    assert _approved_upstream(fake_llm)


def _wait_for_file(path: Path, wanted: str) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while path.read_text(encoding="utf-8") != wanted:
        assert time.monotonic() < deadline, f"{path.name} never became {wanted!r}"
        time.sleep(0.1)  # polling the file the agent patches, bounded by the deadline
