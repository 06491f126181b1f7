"""Issue 38 in real Chromium, JupyterLab and Notebook 7: a pending cell edit comes back,
with working Accept, in a page that never saved it.

The agent proposes an edit on a cell; the page is left without saving and the notebook
reopened. The kernel still holds the proposal: the page finds the kernel's
`phoenix.cell_edits` comm again and says `hello` (labextension/src/celledits.ts), the
diff is drawn on the same cell, and Accept there replaces the cell's source. The agent
hears "accepted" with the next message (the request the fake Messages API received).
(tests/browser/test_cell_edits.py covers a reload after a save, then Reject.)
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7
from tests.browser.test_cell_edits import (
    FIXED,
    WAIT_MS,
    _cell,
    _note_of,
    _run,
    _sources,
    _write,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(params=["lab", "notebook7"])
def ui(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _open(lab: LabPage, name: str, ui: str) -> None:
    if ui == "lab":
        lab.open_notebook(name, workspace=f"phoenix-{name.removesuffix('.ipynb')}")
    else:
        require_notebook7()
        lab.open_in_notebook7(name)


def test_a_pending_edit_comes_back_unsaved_and_accept_works(
    lab: LabPage, fake_llm: FakeAnthropic, ui: str
) -> None:
    name = f"edits-reoffer-{ui}.ipynb"
    _write(lab.server.root, name, f"edits-reoffer-{ui}")
    path = lab.server.root / name
    before = path.read_text(encoding="utf-8")
    _open(lab, name, ui)
    _run(lab, 0)
    _run(lab, 1)
    fake_llm.clear()
    fake_llm.script(
        Turn([tool_use("edit_cell", {"cell_id": "failing", "new_source": FIXED,
                                     "explanation": "Guard the division."})]),
        Turn([text("I proposed a fix on your cell.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("I proposed a fix on your cell.", timeout_ms=WAIT_MS)
    expect(_cell(lab, 1).locator("[data-phoenix-edit]")).to_be_visible(timeout=WAIT_MS)

    # Leave without saving; the file is as it was before the run (no autosave kept it).
    lab.page.goto("about:blank")
    path.write_text(before, encoding="utf-8")
    _open(lab, name, ui)
    view = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(view).to_be_visible(timeout=WAIT_MS)  # from the kernel: the file never held it
    expect(view.locator('[data-phoenix-edit-line="add"]')).to_have_text(
        "+ ratio = 10 / count if count else 0.0"
    )
    view.locator('[data-phoenix-edit-action="accept"]').click()
    expect(view).to_have_count(0, timeout=WAIT_MS)
    assert _sources(lab)[1] == FIXED

    fake_llm.clear()
    fake_llm.script(Turn([text("Thanks.")]))
    _run(lab, 2)
    lab.wait_for_text("Thanks.", timeout_ms=WAIT_MS)
    note = _note_of(fake_llm)
    assert "(cell failing" in note and "accepted" in note, note
