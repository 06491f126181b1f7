"""The MCP approval prompt in real Chromium, in JupyterLab and Notebook 7.

A cloned folder's `.mcp.json` (next to the notebook, the kernel's working folder)
names three servers: two stdio ones (a hostile test server with a long argument
list and env names) and an HTTP one. The `%%phoenix` cell shows every command,
argument, env name and URL with Approve / Deny, inside the cell's box (element
bounds), and waits. Approve starts that server (checked in /proc, from outside)
and the turn's scripted model is offered its tools; Deny starts nothing (no
process with its token) and offers none. Fails on the code before: the cell ran
its turn without waiting, so the model had no MCP tools at all.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.browser.lab import LabPage, require_notebook7, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

WAIT_MS = 90_000
HOSTILE = Path(__file__).resolve().parents[1] / "notebook" / "fixtures" / "hostile_mcp.py"


def _processes_with(token: str) -> list[int]:
    """Pids whose command line holds `token` (read from /proc, outside any namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _cell(page: Page, index: int) -> Locator:
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def _run(lab: LabPage, index: int) -> None:
    """Shift+Enter until the cell starts ([*]): a run sent before the kernel is connected
    is dropped by the front end (Notebook 7 has no status bar to wait on), so it is re-sent."""
    prompt = _cell(lab.page, index).locator(".jp-InputPrompt")
    for _attempt in range(12):
        lab.answer_kernel_dialog()
        try:
            _cell(lab.page, index).locator(".jp-InputArea-editor").click(timeout=10_000)
        except PlaywrightTimeout:
            continue
        lab.page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\[ \]:$"), timeout=5_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"cell {index} never started")


def _done(lab: LabPage, index: int) -> None:
    expect(_cell(lab.page, index).locator(".jp-InputPrompt")).to_have_text(
        re.compile(r"^\[\d+\]:$"), timeout=WAIT_MS
    )


@pytest.mark.parametrize("ui", ["lab", "notebook7"])
def test_the_mcp_approval_prompt_shows_what_runs_and_approve_gives_the_turn_its_tools(
    lab: LabPage, fake_llm: FakeAnthropic, ui: str
) -> None:
    if ui == "notebook7":
        require_notebook7()
    run = uuid.uuid4().hex[:10]
    folder = lab.server.root / f"cloned-{ui}-{run}"
    folder.mkdir()
    yes, no = f"phoenix-mcp-yes-{run}", f"phoenix-mcp-no-{run}"
    args_yes = [str(HOSTILE), yes, "--region", "eu-west-1", "--verbose"]
    servers = {
        "proj": {
            "command": sys.executable,
            "args": args_yes,
            "env": {"TEAM_DB_URL": "postgres://db/x", "TEAM_TOKEN": "not-shown"},
        },
        "nope": {"command": sys.executable, "args": [str(HOSTILE), no]},
        "docs": {
            "type": "http",
            "url": f"http://127.0.0.1:9/mcp-{run}",
            "headers": {"X-Team-Key": "not-shown"},
        },
    }
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    write_notebook(
        folder,
        "analysis.ipynb",
        [("%load_ext phoenix_nb", []), ("%%phoenix --new\nWhich tools do you have?", [])],
    )
    fake_llm.clear()
    fake_llm.script(Turn([text("I see the approved server's tools.")]))
    name = f"{folder.name}/analysis.ipynb"
    if ui == "lab":
        lab.open_notebook(name, workspace=f"phoenix-mcp-{run}")
    else:
        lab.open_in_notebook7(name)
    _run(lab, 0)
    _done(lab, 0)
    _run(lab, 1)

    cell = _cell(lab.page, 1)
    approve = cell.get_by_role("button", name="Approve proj", exact=True)
    expect(approve).to_be_visible(timeout=WAIT_MS)
    for server in ("nope", "docs"):
        expect(cell.get_by_role("button", name=f"Deny {server}", exact=True)).to_be_visible()
    prompts = cell.locator(".phx-mcp-runs")
    expect(prompts).to_have_count(3)
    shown = "\n".join(prompts.all_inner_texts())
    for word in [
        sys.executable,
        *args_yes,
        "TEAM_DB_URL",
        "TEAM_TOKEN",
        str(HOSTILE),
        no,
        servers["docs"]["url"],
        "X-Team-Key",
    ]:
        assert word in shown, (word, shown)
    assert "postgres://db/x" not in shown and "not-shown" not in shown  # names, not values
    cell.scroll_into_view_if_needed()
    cell_box = cell.bounding_box()
    assert cell_box is not None
    for i in range(3):
        box = prompts.nth(i).bounding_box()
        assert box is not None and box["width"] > 0
        assert box["x"] >= cell_box["x"] - 0.5, (i, box, cell_box)
        assert box["x"] + box["width"] <= cell_box["x"] + cell_box["width"] + 0.5, (i, box)
    lab.screenshot(f"mcp-approval-{ui}.png", ".jp-NotebookPanel .jp-Cell >> nth=1")

    # Nothing runs and the model is not asked before the answers.
    assert _processes_with(yes) == [] and _processes_with(no) == []
    assert fake_llm.requests == []
    approve.click()
    cell.get_by_role("button", name="Deny nope", exact=True).click()
    cell.get_by_role("button", name="Deny docs", exact=True).click()
    _done(lab, 1)
    expect(cell.get_by_text("I see the approved server's tools.").first).to_be_visible(
        timeout=WAIT_MS
    )
    assert _processes_with(yes), "the approved server runs"
    assert _processes_with(no) == [], "the denied server never started"
    offered = [t["name"] for t in fake_llm.requests[0].body.get("tools", [])]
    assert "mcp__proj__connect" in offered, offered
    assert not [n for n in offered if n.startswith(("mcp__nope__", "mcp__docs__"))], offered
