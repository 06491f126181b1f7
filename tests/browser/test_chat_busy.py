"""JupyterLab's kernel indicator during a `%%phoenix` turn (real Chromium).

JupyterLab 4.4+ talks to widgets over a kernel subshell, and ipykernel 7 answers each of
those requests with its own busy/idle pair while the cell still awaits; the front end takes
any idle as the kernel's, so the status bar read "Idle" for a whole turn once the cell had
shown its controls. The kernel now says busy again for the running cell
(phoenix_nb/notebook/busy.py): the status bar must read Busy while the answer streams and
the controls are live, and Idle once the cell has ended.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.browser.lab import LabPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

WAIT_MS = 60_000


def test_kernel_reads_busy_while_a_turn_with_live_controls_runs(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    fake_llm.clear()
    fake_llm.script(Turn([text("A story told slowly. " * 600, chunk=10, delay=0.05)]))
    name = "busy-turn.ipynb"
    write_notebook(
        lab.server.root,
        name,
        [("%load_ext phoenix_nb", []), ("%%phoenix --new\ntell me a long story", [])],
    )
    lab.open_notebook(name, workspace="phoenix-busy")
    lab.run_cell(0)
    lab.run_cell(1)
    cell = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1)
    status = lab.page.locator(".jp-StatusBar-Widget")
    # The controls are on the page (their comms and subshell are live) and the answer streams.
    expect(cell.get_by_role("button", name=re.compile("Cancel"))).to_be_visible(timeout=WAIT_MS)
    expect(cell.locator("[data-phoenix-ai=assistant]").last).to_contain_text(
        "A story told slowly.", timeout=WAIT_MS
    )
    expect(cell.locator(".jp-InputPrompt")).to_have_text("[*]:")
    expect(status.get_by_text(re.compile(r"\| Busy$"))).to_be_visible(timeout=WAIT_MS)
    expect(cell.locator(".jp-InputPrompt")).to_have_text("[*]:")  # still the same turn
    cell.get_by_role("button", name=re.compile("Cancel")).click()
    expect(cell.locator(".jp-InputPrompt")).to_have_text("[2]:", timeout=WAIT_MS)
    lab.wait_for_kernel_idle()
