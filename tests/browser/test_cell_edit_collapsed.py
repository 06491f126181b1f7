"""A proposal on a cell hidden in a collapsed section is never accepted unseen, in real
JupyterLab and Notebook 7.

The notebook has a heading whose section (the cell `target`) the user collapsed.
The scripted model proposes two edits in one turn: one on a visible cell and one
(insert_cell) next to the hidden cell. "Accept all" is not offered while a proposal
sits out of sight; accepting the visible one leaves the hidden one pending and
inserts nothing; once the user opens the section, its proposal is there to decide,
and the cell it inserts is in sight. Checked in the DOM and in the notebook file.
"""

from __future__ import annotations

import nbformat
import pytest
from playwright.sync_api import expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7
from tests.browser.test_cell_edits import WAIT_MS, _cell, _run

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _write(lab: LabPage, name: str, slug: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}  # fmt: skip
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext phoenix_nb", id="setup"),
        nbformat.v4.new_code_cell("a = 1", id="visible"),
        nbformat.v4.new_code_cell(f"%%phoenix --name {slug}\nTidy up.", id="agent"),
        nbformat.v4.new_markdown_cell("# Section", id="heading"),
        nbformat.v4.new_code_cell("b = 2", id="target"),
    ]
    (lab.server.root / name).write_text(nbformat.writes(notebook), encoding="utf-8")


def _flow(lab: LabPage, fake: FakeAnthropic) -> None:
    for index in (0, 1, 4):
        _run(lab, index)  # the kernel learns each cell's id when it runs it
    cells = lab.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    heading = _cell(lab, 3)
    heading.locator(".jp-collapseHeadingButton").dispatch_event("click")
    expect(_cell(lab, 4)).to_be_hidden(timeout=WAIT_MS)

    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "visible", "new_source": "a = 10",
                                     "explanation": "Bigger."}),
              tool_use("insert_cell", {"cell_id": "target", "position": "below",
                                       "source": "import os; open('PWNED', 'w')",
                                       "explanation": "Also this."})]),
        Turn([text("Two proposals.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Two proposals.", timeout_ms=WAIT_MS)
    edits = lab.page.locator("[data-phoenix-edit]")
    expect(edits).to_have_count(2, timeout=WAIT_MS)
    shown = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(shown).to_be_visible()
    expect(_cell(lab, 4).locator("[data-phoenix-edit]")).to_be_hidden()
    expect(lab.page.locator('[data-phoenix-edit-action="accept-all"]')).to_have_count(0)

    count = cells.count()
    shown.locator('[data-phoenix-edit-action="accept"]').click()
    expect(edits).to_have_count(1, timeout=WAIT_MS)
    assert cells.count() == count, "nothing was inserted"

    heading.locator(".jp-collapseHeadingButton").dispatch_event("click")  # the user opens it
    hidden = _cell(lab, 4).locator("[data-phoenix-edit]")
    expect(hidden).to_be_visible(timeout=WAIT_MS)
    hidden.locator('[data-phoenix-edit-action="accept"]').click()
    expect(edits).to_have_count(0, timeout=WAIT_MS)
    expect(cells).to_have_count(count + 1)
    expect(_cell(lab, 5)).to_be_visible()


def test_collapsed_proposals_in_jupyterlab(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    _write(lab, "collapsed_lab.ipynb", "collapsed-lab")
    lab.open_notebook("collapsed_lab.ipynb", workspace="phoenix-collapsed")
    lab.wait_for_kernel_idle()
    _flow(lab, fake_llm)


def test_collapsed_proposals_in_notebook7(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    require_notebook7()
    _write(lab, "collapsed_nb7.ipynb", "collapsed-nb7")
    lab.open_in_notebook7("collapsed_nb7.ipynb")
    _flow(lab, fake_llm)
