"""End to end: a `%%phoenix` cell in real JupyterLab, in real Chromium.

The agent (the fake Messages API, reached by the kernel through the real SDK)
explores a small buggy project read-only, asks for write access, waits until
Approve is clicked in the page, patches the file, checks its fix and answers.
The test then reads the conversation from the rendered DOM, saves, restarts the
kernel, reloads the page and requires the same rendering with nothing run again,
and leaves light and dark screenshots in `test-artifacts/`.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import CONVERSATION_MIME, LabPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

NOTEBOOK = "e2e.ipynb"
BUGGY = "def add(a, b):\n    return a - b\n"
QUESTION = "Why does add(2, 3) give -1? Fix it."
REASON = "I need to edit calc.py to fix add()"
FINAL = "Fixed: add() now returns a + b, and add(2, 3) gives 5."
WAIT_MS = 60_000

# Every element the renderer marks, with its data-phoenix-* attributes, plus the
# record's whole text: what "the same rendering" means after a reload.
RENDERING_JS = """
(root) => ({
  text: root.textContent,
  marks: Array.from(root.querySelectorAll('*'))
    .map(node => Object.entries(node.dataset)
      .filter(([key]) => key.startsWith('phoenix'))
      .map(([key, value]) => key + '=' + value)
      .join(' '))
    .filter(marks => marks.length > 0),
})
"""


def _project(root: Path) -> Path:
    """A small project with one bug, outside the notebook folder (the agent's fixed cwd)."""
    project = root / "project"
    project.mkdir()
    (project / "calc.py").write_text(BUGGY, encoding="utf-8")
    (project / "README.md").write_text("calc: tiny arithmetic helpers.\n", encoding="utf-8")
    return project


def _script(fake: FakeAnthropic) -> None:
    """Explore (keyword_search + bash), ask for write access, patch, check, answer."""
    check = f"{shlex.quote(sys.executable)} -c 'import calc; print(calc.add(2, 3))'"
    fake.script(
        Turn(
            [
                text("Let me look for add()."),
                tool_use("keyword_search", {"query": "the add function", "search_terms": ["add"]}),
                tool_use("bash", {"command": "cat calc.py"}),
            ]
        ),
        Turn(
            [
                text("add() subtracts. I need write access to fix it."),
                tool_use("request_mode_upgrade", {"reason": REASON}),
            ]
        ),
        Turn(
            [
                tool_use(
                    "patch",
                    {
                        "path": "calc.py",
                        "patches": [
                            {
                                "operation": "replace",
                                "oldText": "return a - b",
                                "newText": "return a + b",
                            }
                        ],
                    },
                )
            ]
        ),
        Turn([tool_use("bash", {"command": check})]),
        Turn([text(FINAL)]),
    )


def _record(lab: LabPage) -> Locator:
    return lab.page.locator(".jp-PhoenixConversation [data-phoenix-record]").first


def _rendering(lab: LabPage) -> dict[str, Any]:
    return _record(lab).evaluate(RENDERING_JS)


def _assert_conversation(record: Locator) -> None:
    """The finished conversation as the DOM shows it: groups, diff, decision, answer."""
    expect(record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
    expect(record).to_have_attribute("data-phoenix-mode", "unrestricted")
    user = record.locator("[data-phoenix-step=user]")
    expect(user).to_have_count(1)
    expect(user).to_contain_text(QUESTION)

    read = record.locator("details[data-phoenix-group=read]")
    expect(read).to_have_count(1)
    expect(read).to_have_attribute("data-phoenix-status", "ok")
    expect(
        read.locator("[data-phoenix-tool=keyword_search][data-phoenix-status=ok]")
    ).to_have_count(1)

    bash = record.locator("[data-phoenix-call][data-phoenix-tool=bash]")
    expect(bash).to_have_count(2)
    explore, check = bash.nth(0), bash.nth(1)
    expect(explore.locator("[data-phoenix-bash-command]")).to_have_attribute(
        "data-phoenix-bash-command", "cat calc.py"
    )
    expect(explore.locator("[data-phoenix-exit]")).to_have_attribute("data-phoenix-exit", "0")
    expect(explore.locator("[data-phoenix-output]")).to_contain_text("return a - b")
    expect(check.locator("[data-phoenix-exit]")).to_have_attribute("data-phoenix-exit", "0")
    expect(check.locator("[data-phoenix-output]")).to_have_text("5")

    approval = record.locator("[data-phoenix-step=approval]")
    expect(approval).to_have_count(1)
    expect(approval).to_have_attribute("data-phoenix-decision", "approved")
    expect(approval).to_contain_text(REASON)
    expect(record.locator("[data-phoenix-pending-approval]")).to_have_count(0)

    write = record.locator("details[data-phoenix-group=write]")
    expect(write).to_have_count(1)
    patch = write.locator("[data-phoenix-tool=patch][data-phoenix-status=ok]")
    expect(patch).to_have_count(1)
    diff = patch.locator("[data-phoenix-diff='calc.py']")
    expect(
        diff.locator("[data-phoenix-diff-line=del]").filter(has_text="return a - b")
    ).to_have_count(1)
    expect(
        diff.locator("[data-phoenix-diff-line=add]").filter(has_text="return a + b")
    ).to_have_count(1)

    answers = record.locator("[data-phoenix-ai=assistant]")
    expect(answers.last).to_contain_text(FINAL)
    expect(record.locator("[data-phoenix-stop]").last).to_have_attribute(
        "data-phoenix-stop", "completed"
    )


def _open_groups(lab: LabPage) -> None:
    """Opens the Bash groups, as a reader would, so the outputs show (Write groups, with
    their diffs, are open from the start)."""
    record = _record(lab)
    expect(record.locator("details[data-phoenix-group=write]")).to_have_attribute("open", "")
    closed = record.locator("details[data-phoenix-group=bash]:not([open]) > summary")
    for _ in range(closed.count()):
        closed.first.click()  # the locator shrinks as groups open
    diff = record.locator("[data-phoenix-diff='calc.py'] [data-phoenix-diff-line=add]")
    expect(diff.filter(has_text="return a + b")).to_be_visible()


def _saved_record(path: Path) -> dict[str, Any]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    records = [
        output["data"][CONVERSATION_MIME]
        for output in notebook["cells"][1]["outputs"]
        if CONVERSATION_MIME in output.get("data", {})
    ]
    assert len(records) == 1, notebook["cells"][1]["outputs"]
    return records[0]


def test_phoenix_cell_explores_asks_patches_and_survives_reload(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-011, REQ-BED-015: run, Approve in the page, render, save, reload."""
    fake_llm.clear()
    _script(fake_llm)
    project = _project(tmp_path)
    cell = f"%%phoenix --new --cwd {shlex.quote(str(project))}\n{QUESTION}"
    write_notebook(lab.server.root, NOTEBOOK, [("%load_ext phoenix_nb", []), (cell, [])])

    lab.open_notebook(NOTEBOOK, workspace="phoenix-e2e")
    lab.run_cell(0)
    lab.wait_for_kernel_idle()
    lab.run_cell(1)

    # Read-only exploration, then the cell waits at the upgrade request.
    record = _record(lab)
    expect(record).to_have_attribute(
        "data-phoenix-state", "awaiting_mode_approval", timeout=WAIT_MS
    )
    expect(record).to_have_attribute("data-phoenix-mode", "restricted")
    expect(record.locator("[data-phoenix-pending-approval]")).to_have_count(1)
    expect(record.locator("[data-phoenix-step=approval]")).to_have_attribute(
        "data-phoenix-decision", "pending"
    )
    lab.wait_for_text(REASON)  # the reason, once, above the Approve button
    prompt = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".jp-InputPrompt")
    # The cell has ended: the turn waits for the human without holding the kernel (issue
    # 38), and goes on in this cell after the click.
    expect(prompt).to_have_text("[2]:")
    lab.wait_for_kernel_idle()
    assert (project / "calc.py").read_text(encoding="utf-8") == BUGGY, "nothing written yet"
    assert len(fake_llm.requests) == 2, "the agent waits for the human, not the model"

    lab.click_button("Approve")
    _assert_conversation(record)
    lab.wait_for_kernel_idle()  # the cell ended once the conversation rested
    assert (project / "calc.py").read_text(encoding="utf-8") == BUGGY.replace("a - b", "a + b")
    assert len(fake_llm.requests) == 5
    expect(lab.page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    before = _rendering(lab)
    _open_groups(lab)
    lab.screenshot("e2e-light.png")

    lab.save()
    saved = _saved_record(lab.server.root / NOTEBOOK)
    assert saved["conversation"]["state"]["name"] == "idle"
    lab.restart_kernel()
    lab.reload()

    # The saved output, rendered again by the extension: no kernel work, no model request.
    record = _record(lab)
    _assert_conversation(record)
    assert _rendering(lab) == before
    assert len(fake_llm.requests) == 5, "reloading ran nothing"
    # The Revert button cannot act on a new kernel: it reads as the command to run.
    revert = lab.page.locator(".jp-Phoenix-controlOutput[data-phoenix-control=hint]")
    expect(revert).to_contain_text("%phoenix revert", timeout=WAIT_MS)
    expect(lab.page.get_by_text("Error displaying widget").filter(visible=True)).to_have_count(0)
    # The saved execution count; a cell run again on the restarted kernel would read [1].
    expect(
        lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".jp-InputPrompt")
    ).to_have_text("[2]:")

    lab.set_theme(dark=True)
    try:
        _assert_conversation(_record(lab))
        _open_groups(lab)
        lab.screenshot("e2e-dark.png")
    finally:
        lab.set_theme(dark=False)  # the server is shared: later tests expect the light theme
