"""propose_cell in real JupyterLab — the proposal appears as a new cell below the
`%%phoenix` cell, with the code, not run.

The agent (fake Messages API through the real SDK) first reads the DataFrame with
inspect_variables, then proposes a cell; when the turn ends the kernel's
execute reply carries the `set_next_input` payload and JupyterLab inserts the
cell. A second turn with two proposals shows they arrive in order in one cell,
separated by `# %%` lines (JupyterLab reads only the first payload of a reply).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

NOTEBOOK = "propose.ipynb"
SETUP = "%load_ext phoenix_nb\nimport pandas as pd\ndf = pd.DataFrame({'x': [1.0, None, 3.0]})"
PROPOSED = "df = df.dropna()\ndf"
WAIT_MS = 60_000


def _cells(lab: LabPage) -> list[str]:
    """Each cell's source as the editor holds it."""
    return lab.page.evaluate(
        """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Cell'))
               .map(cell => Array.from(cell.querySelectorAll('.cm-line'))
                               .map(line => line.textContent).join('\\n'))"""
    )


def test_proposed_cell_appears_below_unexecuted(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    fake_llm.clear()
    look = tool_use("inspect_variables", {"names": ["df"]})
    propose = tool_use(
        "propose_cell", {"code": PROPOSED, "explanation": "Drop the row with a missing x."}
    )
    fake_llm.script(
        Turn([text("Let me look at df."), look]),
        Turn([propose]),
        Turn([text("I proposed a cell below that drops the missing row.")]),
    )
    write_notebook(
        lab.server.root,
        NOTEBOOK,
        [(SETUP, []), ("%%phoenix --new\nClean up df.", []), ("print('last cell')", [])],
    )
    lab.open_notebook(NOTEBOOK, workspace="phoenix-propose")
    lab.run_cell(0)
    lab.wait_for_kernel_idle()
    lab.run_cell(1)
    lab.wait_for_text("I proposed a cell below", timeout_ms=WAIT_MS)
    lab.wait_for_kernel_idle()

    cells = lab.page.locator(".jp-NotebookPanel .jp-Cell")
    expect(cells).to_have_count(4, timeout=WAIT_MS)
    sources = _cells(lab)
    # Right below the %%phoenix cell, its explanation leading the code as a comment.
    assert sources[2] == "# Drop the row with a missing x.\n" + PROPOSED, sources
    assert sources[3] == "print('last cell')"
    new_cell = cells.nth(2)
    expect(new_cell.locator(".jp-InputPrompt")).to_have_text("[ ]:")  # never run
    expect(new_cell.locator(".jp-OutputArea-output")).to_have_count(0)
    tool_results = fake_llm.requests[1].tool_results
    assert "3 rows × 1 columns" in str(tool_results[0]["content"])
    # The record says what inspect_variables' display holds, in the fallbacks' words.
    status = lab.page.locator('[data-phoenix-tool="inspect_variables"] [data-phoenix-call-status]')
    expect(status).to_have_text("df", timeout=WAIT_MS)
    lab.page.locator("summary", has_text="looked at variables").click()
    expect(status).to_be_visible()
    lab.screenshot("inspect-variables-call.png", '[data-phoenix-tool="inspect_variables"]')
    lab.screenshot("propose-cell.png", ".jp-NotebookPanel")

    # Two proposals in one turn: one cell, in order.
    fake_llm.clear()
    fake_llm.script(
        Turn([tool_use("propose_cell", {"code": "a = 1", "explanation": "First step."})]),
        Turn([tool_use("propose_cell", {"code": "b = a + 1", "explanation": "Second step."})]),
        Turn([text("Two steps proposed.")]),
    )
    lab.run_cell(1)
    lab.wait_for_text("Two steps proposed.", timeout_ms=WAIT_MS)
    lab.wait_for_kernel_idle()
    expect(cells).to_have_count(5, timeout=WAIT_MS)
    both = _cells(lab)[2]
    assert both.index("# %% Proposal 1 of 2: First step.") < both.index("a = 1")
    assert both.index("a = 1") < both.index("# %% Proposal 2 of 2: Second step.")
    assert both.index("Second step.") < both.index("b = a + 1")
    assert _cells(lab)[3] == "# Drop the row with a missing x.\n" + PROPOSED
