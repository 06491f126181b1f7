"""In real JupyterLab and Chromium: what a new user sees and does.

One approval block (the reason quoted as text, the buttons, then one line with the
answer); after a click on Approve the keyboard is still in the notebook, so
Shift+Enter runs the next cell; tool groups say what they did and the diff is
open without a click; the chat panel draws the same record with the cell's
renderer, says its state in words, shows only the buttons that can act, and fits
its column in light and dark themes (checked by element bounds, screenshots kept
in test-artifacts/).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

WAIT_MS = 60_000
REASON = "I need to edit `calc.py` so that **add()** adds"
NEXT_CELL = "the next cell ran"


def _project(root: Path, name: str) -> Path:
    project = root / name
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    return project


def _fix_script(fake: FakeAnthropic) -> None:
    fake.script(
        Turn(
            [
                text("Let me look."),
                tool_use("keyword_search", {"query": "add", "search_terms": ["def add"]}),
                tool_use("bash", {"command": "cat calc.py"}),
            ]
        ),
        Turn([text("It subtracts."), tool_use("request_mode_upgrade", {"reason": REASON})]),
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
        Turn([text("Fixed.")]),
    )


def _cell(lab: LabPage, index: int) -> Locator:
    return lab.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def test_one_approval_block_focus_returns_and_groups_say_what_they_did(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    fake_llm.clear()
    _fix_script(fake_llm)
    project = _project(tmp_path, "focus-project")
    write_notebook(
        lab.server.root,
        "first-hour.ipynb",
        [
            ("%load_ext phoenix_nb", []),
            (f"%%phoenix --new --cwd {shlex.quote(str(project))}\nadd() is wrong; fix it", []),
            (f"print({NEXT_CELL!r})", []),
        ],
    )
    lab.open_notebook("first-hour.ipynb", workspace="phoenix-first-hour")
    lab.run_cell(0)
    lab.run_cell(1)  # Shift+Enter: the next cell becomes the active one

    output = _cell(lab, 1).locator(".jp-OutputArea")
    record = output.locator("[data-phoenix-record]").first
    expect(record).to_have_attribute(
        "data-phoenix-state", "awaiting_mode_approval", timeout=WAIT_MS
    )
    # One block: phoenix's sentence on what approving does, the reason once, quoted as
    # the agent's words (plain text: a reason cannot format itself), the buttons under it.
    block = record.locator("[data-phoenix-pending-approval]")
    expect(block).to_have_count(1)
    expect(block.locator("blockquote[data-phoenix-reason]")).to_have_text(REASON)
    expect(block.locator(".jp-Phoenix-approveMeans")).to_contain_text("Unrestricted mode")
    expect(output.get_by_text("so that", exact=False)).to_have_count(1)
    expect(record.locator("[data-phoenix-tool=request_mode_upgrade]")).to_have_count(0)
    expect(record.locator(".jp-Phoenix-state")).to_have_text("waiting for your approval")
    expect(record.locator("[data-phoenix-meter]")).to_have_count(1)
    expect(output.get_by_text("context", exact=False)).to_have_count(0)  # no second meter
    approve = output.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_visible()
    block_box, button_box = block.bounding_box(), approve.bounding_box()
    assert block_box is not None and button_box is not None
    assert button_box["y"] >= block_box["y"] + block_box["height"], "buttons under the reason"

    approve.click()
    lab.page.keyboard.press("Shift+Enter")  # nothing clicked in between
    expect(_cell(lab, 2).locator(".jp-OutputArea")).to_contain_text(NEXT_CELL, timeout=WAIT_MS)
    expect(_cell(lab, 1).locator(".jp-InputPrompt")).to_have_text("[2]:")

    # The answer is one line; the groups say what they did; the diff shows unclicked.
    expect(record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
    answer = record.locator("[data-phoenix-step=approval]")
    expect(answer).to_have_count(1)
    expect(answer).to_have_attribute("data-phoenix-decision", "approved")
    assert answer.inner_text().count("\n") == 0
    expect(answer).to_have_text(f"✓ write access approved: the agent asked “{REASON}”")
    labels = record.locator("[data-phoenix-group-label]")
    expect(labels).to_have_text(
        ["searched for 'def add'", "ran cat calc.py", "edited calc.py +1 −1"]
    )
    write = record.locator("details[data-phoenix-group=write]")
    expect(write).to_have_attribute("open", "")
    expect(write.locator("[data-phoenix-diff-line=add]")).to_be_visible()
    expect(record.locator("details[data-phoenix-group=read]")).not_to_have_attribute("open", "")
    for gone in ("Approve", "Deny", "Cancel", "Restrict"):  # the controls are gone at rest
        expect(output.get_by_role("button", name=gone, exact=True)).to_have_count(0)
    lab.screenshot("first-hour-approved.png", ".jp-NotebookPanel .jp-Cell >> nth=1")


CLIPPED_JS = """
(panel) => {
  const edge = panel.getBoundingClientRect();
  const out = [];
  for (const node of panel.querySelectorAll('*')) {
    const box = node.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > edge.right + 0.5 || box.left < edge.left - 0.5) {
      out.push(`${node.tagName}.${node.className} ${box.left}-${box.right}`);
    }
  }
  if (panel.scrollWidth > panel.clientWidth + 1) out.push('the panel scrolls sideways');
  return out;
}
"""


def _check_chat(lab: LabPage, theme: str) -> None:
    panel = lab.page.locator(".jp-Phoenix-chat").first
    # The transcript is the chat cell's ordinary output above the panel's controls.
    cell = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1)
    record = cell.locator(".jp-PhoenixConversation [data-phoenix-record]")
    expect(record).to_have_count(1)  # the cell's renderer, not an HTML copy
    expect(record.locator("[data-phoenix-ai=assistant]").last).to_contain_text("Hello from chat")
    status = panel.locator(".jp-Phoenix-chatStatus")
    expect(status).to_contain_text("idle")
    assert "_" not in status.inner_text(), "no raw state names"
    for name in ("Approve", "Deny", "Cancel"):
        expect(panel.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(panel.get_by_role("button", name="Send", exact=True)).to_be_visible()
    output = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".jp-Cell-outputArea")
    assert output.evaluate(CLIPPED_JS) == [], theme
    assert panel.evaluate(CLIPPED_JS) == [], theme
    lab.screenshot(f"chat-{theme}.png", ".jp-Phoenix-chat")
    lab.screenshot(f"chat-record-{theme}.png", ".jp-PhoenixConversation")


def test_chat_panel_uses_the_cells_renderer_in_light_and_dark(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    fake_llm.clear()
    fake_llm.script(Turn([text("Hello from chat. " * 40)]))
    write_notebook(
        lab.server.root,
        "chat-panel.ipynb",
        [("%load_ext phoenix_nb", []), ("%phoenix chat", [])],
    )
    lab.page.set_viewport_size({"width": 900, "height": 1000})
    lab.open_notebook("chat-panel.ipynb", workspace="phoenix-chat")
    lab.run_cell(0)
    lab.run_cell(1)
    panel = lab.page.locator(".jp-Phoenix-chat").first
    panel.locator("textarea").fill("hello")
    panel.get_by_role("button", name="Send", exact=True).click()
    cell = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(1)
    expect(cell.locator("[data-phoenix-ai=assistant]").last).to_contain_text(
        "Hello from chat", timeout=WAIT_MS
    )
    expect(cell.locator("[data-phoenix-record]")).to_have_attribute(
        "data-phoenix-state", "idle", timeout=WAIT_MS
    )
    expect(cell.locator("[data-phoenix-ai=assistant]").last).to_contain_text(
        "Hello from chat", timeout=WAIT_MS
    )
    _check_chat(lab, "light")
    lab.set_theme(dark=True)
    try:
        _check_chat(lab, "dark")
    finally:
        lab.set_theme(dark=False)
