"""The agent edits the user's cell as a proposal, in real JupyterLab and Notebook 7.

A cell raises; the scripted model (the fake Messages API through the real SDK) reads
kernel_history and calls edit_cell on that cell by the id the front end sent. The
diff shows on the cell with the agent's explanation as plain text; Accept (pressed
from the keyboard) changes the source without running it, and Ctrl+Z in the cell
restores it; a second proposal is rejected and leaves its cell alone; a third, made
after the user typed in the cell, says the cell changed and Accept shows the
three-way difference instead of overwriting. A pending proposal comes back after a
page reload. Two proposals of one turn are accepted at once (one of them a new cell); one for a
cell the user deleted comes back as gone.
Each decision reaches the agent with
the next message (checked in the requests the fake server received).

The tour's cell-fix section runs as a user runs it, with the offline demo model's own
script (served by the fake, as the kernel's ANTHROPIC_BASE_URL points there): its
failing cell gets the demo's proposal, and Accept changes the cell without running it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Locator, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from phoenix_nb.demo.cell_fix import guarded
from phoenix_nb.demo.screenplay import DemoScript
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAIT_MS = 60_000
FAILING = "count = 0\nratio = 10 / count"
FIXED = "count = 0\nratio = 10 / count if count else 0.0"
OTHER = "print('after')"
EXPLAIN = "Guard the division: count is 0. <button>Approve</button> **not bold**"
CELLS = [
    ("setup", "%load_ext phoenix_nb"),
    ("failing", FAILING),
    ("agent", "%%phoenix --name {slug}\nFix the failing cell."),
    ("other", OTHER),
]


def _write(root: Path, name: str, slug: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}  # fmt: skip
    notebook.cells = [
        nbformat.v4.new_code_cell(source.replace("{slug}", slug), id=cell_id)
        for cell_id, source in CELLS
    ]
    nbformat.validate(notebook)
    (root / name).write_text(nbformat.writes(notebook), encoding="utf-8")


def _sources(lab: LabPage) -> list[str]:
    return lab.page.evaluate(
        """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Cell'))
               .map(cell => Array.from(cell.querySelectorAll('.cm-line'))
                               .map(line => line.textContent).join('\\n'))"""
    )


def _cell(lab: LabPage, index: int) -> Locator:
    return lab.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def _run(lab: LabPage, index: int) -> None:
    """Shift+Enter on a cell; waits until its prompt shows a new execution count. A run
    sent before the kernel is connected is dropped by the front end, so it is re-sent."""
    prompt = _cell(lab, index).locator(".jp-InputPrompt")
    before = prompt.inner_text().strip()
    for _attempt in range(12):
        lab.answer_kernel_dialog()
        try:  # the dialog can open between the check and the click: answer it next time
            _cell(lab, index).locator(".jp-InputArea-editor").click(timeout=10_000)
        except PlaywrightTimeout:
            continue
        lab.page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\[ \]:$"), timeout=5_000)
            break
        except AssertionError:
            continue
    expect(prompt).to_have_text(re.compile(r"^\[\d+\]:$"), timeout=WAIT_MS)
    assert prompt.inner_text().strip() != before or before == "[ ]:"


def _note_of(fake: FakeAnthropic) -> str:
    """The text of the last user turn of the first request of the newest turn."""
    content = fake.requests[0].body["messages"][-1]["content"]
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def _edit_flow(lab: LabPage, fake: FakeAnthropic) -> None:
    _run(lab, 0)
    _run(lab, 3)  # the kernel learns a cell's id when it runs it
    _run(lab, 1)
    expect(_cell(lab, 1).locator(".jp-OutputArea-output")).to_contain_text(
        "ZeroDivisionError", timeout=WAIT_MS
    )
    failing_prompt = _cell(lab, 1).locator(".jp-InputPrompt").inner_text()

    # 1. The agent reads the history and proposes a fix on that cell, by its id.
    fake.clear()
    history = tool_use("kernel_history", {})
    fake.script(
        Turn([text("Let me look."), history]),
        Turn([tool_use("edit_cell", {"cell_id": "failing", "new_source": FIXED,
                                     "explanation": EXPLAIN})]),
        Turn([text("I proposed a fix on your cell.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("I proposed a fix on your cell.", timeout_ms=WAIT_MS)
    seen = str(fake.requests[1].tool_results[0]["content"])
    assert "(cell failing):\ncount = 0\nratio = 10 / count" in seen, seen

    view = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(view).to_be_visible(timeout=WAIT_MS)
    expect(view.locator('[data-phoenix-edit-line="add"]')).to_have_text(
        "+ ratio = 10 / count if count else 0.0"
    )
    expect(view.locator('[data-phoenix-edit-line="del"]')).to_have_text("- ratio = 10 / count")
    # The model's words are text: no element made from them, nothing looks like a control.
    why = view.locator("[data-phoenix-edit-explanation]")
    expect(why).to_have_text(EXPLAIN)
    expect(why.locator("button, b, strong")).to_have_count(0)
    # Showing the proposal took no focus from the notebook.
    assert not lab.page.evaluate(
        "() => !!document.activeElement && !!document.activeElement.closest('[data-phoenix-edit]')"
    )
    lab.screenshot("cell-edit-proposal.png", ".jp-NotebookPanel")
    # The record keeps the proposal for readers of the saved notebook: cell, words, diff.
    lab.page.locator("summary", has_text="proposed an edit to a cell").first.click()
    recorded = lab.page.locator('[data-phoenix-cell-diff="failing"]')
    expect(recorded).to_contain_text("+ratio = 10 / count if count else 0.0")
    expect(recorded).to_contain_text(" count = 0")
    call = lab.page.locator('[data-phoenix-tool="edit_cell"]')
    expect(call.locator(".jp-Phoenix-editWhy")).to_have_text(EXPLAIN)
    expect(call.locator(".jp-Phoenix-editWhy button")).to_have_count(0)

    # Accept from the keyboard: command mode, Tab to the button, Enter.
    accept = view.locator('[data-phoenix-edit-action="accept"]')
    _cell(lab, 3).locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Escape")
    for _ in range(60):
        if accept.evaluate("b => document.activeElement === b"):
            break
        lab.page.keyboard.press("Shift+Tab")
    assert accept.evaluate("b => document.activeElement === b"), "Accept is not reachable by Tab"
    lab.page.keyboard.press("Enter")
    expect(view).to_have_count(0, timeout=WAIT_MS)
    # The keyboard goes back to the notebook, not to the page.
    assert lab.page.evaluate("() => !!document.activeElement?.closest('.jp-Notebook')")
    assert _sources(lab)[1] == FIXED
    expect(_cell(lab, 1).locator(".jp-InputPrompt")).to_have_text(failing_prompt)  # not run
    expect(_cell(lab, 1).locator(".jp-OutputArea-output")).to_contain_text("ZeroDivisionError")
    # One Ctrl+Z in the cell restores what the user had.
    _cell(lab, 1).locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Control+z")
    lab.page.wait_for_function(
        "(src) => { const c = document.querySelectorAll('.jp-NotebookPanel .jp-Cell')[1];"
        " return Array.from(c.querySelectorAll('.cm-line')).map(l => l.textContent)"
        ".join('\\n') === src; }",
        arg=FAILING,
        timeout=WAIT_MS,
    )

    # 2. A second proposal, rejected: the cell stays; the agent hears the first outcome.
    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "other", "new_source": "print('changed')",
                                     "explanation": "Say something else."})]),
        Turn([text("Proposed a second edit.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Proposed a second edit.", timeout_ms=WAIT_MS)
    note = _note_of(fake)
    assert "(cell failing (In [" in note and "accepted" in note, note
    second = _cell(lab, 3).locator("[data-phoenix-edit]")
    expect(second).to_be_visible(timeout=WAIT_MS)
    # A pending proposal survives a page reload (the page finds the kernel's comm again).
    lab.save()
    lab.reload()
    expect(second).to_be_visible(timeout=WAIT_MS)
    second.locator('[data-phoenix-edit-action="reject"]').click()
    expect(second).to_have_count(0, timeout=WAIT_MS)
    assert _sources(lab)[3] == OTHER

    # 3. The user edits the cell, then the agent proposes again: a conflict, not an overwrite.
    _cell(lab, 1).locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Control+End")
    lab.page.keyboard.type("\n# my own line")
    mine = _sources(lab)[1]
    assert mine.endswith("# my own line")
    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "failing",
                                     "new_source": "count = 1\nratio = 10 / count",
                                     "explanation": "Use a non-zero count."})]),
        Turn([text("Proposed a third edit.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Proposed a third edit.", timeout_ms=WAIT_MS)
    note = _note_of(fake)
    assert "(cell other (In [" in note and "rejected" in note, note
    third = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(third).to_have_attribute("data-phoenix-edit-conflict", "true", timeout=WAIT_MS)
    expect(third).to_contain_text("This cell changed since the agent read it")
    third.locator('[data-phoenix-edit-action="accept"]').click()
    expect(third.locator("[data-phoenix-edit-three-way]")).to_be_visible(timeout=WAIT_MS)
    expect(third.locator('[data-phoenix-edit-diff="your change since the agent read the cell"]'))\
        .to_contain_text("# my own line")  # fmt: skip
    assert _sources(lab)[1] == mine  # Accept did not overwrite the user's edit
    lab.screenshot("cell-edit-conflict.png", ".jp-NotebookPanel")
    third.locator('[data-phoenix-edit-action="reject"]').click()
    expect(third).to_have_count(0, timeout=WAIT_MS)
    assert _sources(lab)[1] == mine

    # 4. Two proposals in one turn, accepted at once: an edit and a new cell below.
    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "other", "new_source": "print('edited')",
                                     "explanation": "Edit it."}),
              tool_use("insert_cell", {"cell_id": "other", "position": "below",
                                       "source": "print('inserted')",
                                       "explanation": "Add a cell."})]),
        Turn([text("Proposed two changes.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Proposed two changes.", timeout_ms=WAIT_MS)
    note = _note_of(fake)
    assert "(cell failing" in note and "rejected" in note, note  # the conflict's outcome
    pending = _cell(lab, 3).locator("[data-phoenix-edit]")
    expect(pending).to_have_count(2, timeout=WAIT_MS)
    pending.first.locator('[data-phoenix-edit-action="accept-all"]').click()
    expect(lab.page.locator("[data-phoenix-edit]")).to_have_count(0, timeout=WAIT_MS)
    sources = _sources(lab)
    assert sources[3] == "print('edited')" and sources[4] == "print('inserted')", sources
    expect(_cell(lab, 4).locator(".jp-InputPrompt")).to_have_text("[ ]:")  # not run

    # 5. The user deletes the cell; a proposal for it finds it gone. The agent hears
    # the two acceptances with this message.
    all_cells = lab.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    count = all_cells.count()
    _cell(lab, 3).locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Escape")
    lab.page.keyboard.press("d")
    lab.page.keyboard.press("d")
    expect(all_cells).to_have_count(count - 1)
    assert "print('edited')" not in _sources(lab)
    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "other", "new_source": "print('again')",
                                     "explanation": "Once more."})]),
        Turn([text("Proposed for a deleted cell.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Proposed for a deleted cell.", timeout_ms=WAIT_MS)
    note = _note_of(fake)
    assert note.count("accepted") == 2 and "the new cell was inserted as cell " in note, note
    expect(lab.page.locator("[data-phoenix-edit]")).to_have_count(0)

    fake.clear()
    fake.script(Turn([text("Understood.")]))
    _run(lab, 2)
    lab.wait_for_text("Understood.", timeout_ms=WAIT_MS)
    note = _note_of(fake)
    assert "(cell other): the cell no longer exists" in note, note


def test_cell_edit_in_jupyterlab(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    _write(lab.server.root, "edits_lab.ipynb", "cell-edits-lab")
    lab.open_notebook("edits_lab.ipynb", workspace="phoenix-edits")
    lab.wait_for_kernel_idle()
    _edit_flow(lab, fake_llm)


def test_cell_edit_in_notebook7(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    require_notebook7()
    _write(lab.server.root, "edits_nb7.ipynb", "cell-edits-nb7")
    lab.open_in_notebook7("edits_nb7.ipynb")
    _edit_flow(lab, fake_llm)


TOUR = Path(__file__).resolve().parents[2] / "notebooks" / "tour.ipynb"


def test_the_tours_failing_cell_gets_the_demos_fix_in_jupyterlab(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    tour = json.loads(TOUR.read_text(encoding="utf-8"))["cells"]
    heading = next(
        i for i, c in enumerate(tour) if "".join(c["source"]).startswith("## 3. The agent edits")
    )
    failing, agent = (tour[heading + 1], tour[heading + 2])
    assert "".join(failing["source"]).startswith("%%phoenix_fails\n")  # fails on purpose
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}  # fmt: skip
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext phoenix_nb")] + [
        nbformat.v4.new_code_cell("".join(c["source"]), id=c["id"]) for c in (failing, agent)
    ]
    (lab.server.root / "tour_fix.ipynb").write_text(nbformat.writes(notebook), "utf-8")
    lab.open_notebook("tour_fix.ipynb", workspace="phoenix-tour-fix")
    lab.wait_for_kernel_idle()

    _run(lab, 0)
    _run(lab, 1)
    expect(_cell(lab, 1).locator(".jp-OutputArea-output")).to_contain_text(
        "KeyError", timeout=WAIT_MS
    )
    failing_prompt = _cell(lab, 1).locator(".jp-InputPrompt").inner_text()
    fake_llm.clear()
    previous, fake_llm.default = fake_llm.default, DemoScript(pace=0).reply
    try:
        _run(lab, 2)
        lab.wait_for_text("I proposed the change on your cell.", timeout_ms=WAIT_MS)
    finally:
        fake_llm.default = previous

    view = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(view).to_be_visible(timeout=WAIT_MS)
    expect(view.locator('[data-phoenix-edit-line="add"]').first).to_have_text("+ try:")
    view.locator('[data-phoenix-edit-action="accept"]').click()
    expect(view).to_have_count(0, timeout=WAIT_MS)
    source = "".join(failing["source"])
    assert _sources(lab)[1].rstrip("\n") == guarded(source, "KeyError").rstrip("\n")
    expect(_cell(lab, 1).locator(".jp-InputPrompt")).to_have_text(failing_prompt)  # not run
    expect(_cell(lab, 1).locator(".jp-OutputArea-output")).to_contain_text("KeyError")
