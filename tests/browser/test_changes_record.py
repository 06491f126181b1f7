"""What an Unrestricted tool call changed, drawn by the labextension in real JupyterLab.

The changes are produced by the real checkpoint executor (real files, real git)
and put on a bash call of the sample record, exactly as the runtime attaches them
to a tool result's display.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from phoenix_nb.checkpoints.recorder import Checkpoints
from phoenix_nb.core.displays import BashDisplay, stored_display
from phoenix_nb.core.values import Mode, ToolResult
from tests.browser.lab import LabPage, load_fixture, record_output, write_notebook

pytestmark = pytest.mark.browser


def real_changes(tmp: Path) -> dict[str, Any]:
    """The display of a real bash call that adds, modifies, deletes and chmods files."""
    project = tmp / "project"
    project.mkdir()
    (project / "app.py").write_text("x = 1\n")
    (project / "old.txt").write_text("old\n")
    (project / "run.sh").write_text("echo\n")
    checkpoints = Checkpoints(tmp / "checkpoints")

    async def go() -> ToolResult:
        await checkpoints.writes_possible("c", str(project), "approval")

        async def run() -> ToolResult:
            subprocess.run(
                "echo 'x = 2' > app.py; echo new > new.txt; rm old.txt; chmod +x run.sh",
                shell=True,
                cwd=project,
                check=True,
                env={"PATH": os.environ["PATH"]},
            )
            return ToolResult("toolu_05", "", display=BashDisplay("edit", 0))

        return await checkpoints.around_tool(
            conversation_id="c",
            cwd=str(project),
            mode=Mode.UNRESTRICTED,
            tool="bash",
            tool_use_id="toolu_05",
            run=run,
        )

    # Playwright's sync API owns this thread's event loop: run ours in another thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = pool.submit(lambda: asyncio.run(go())).result()
    stored = stored_display(result.display, result.changes)
    assert stored is not None
    return stored


def test_changes_show_under_the_call_with_their_diffs(lab: LabPage, tmp_path: Path) -> None:
    display = real_changes(tmp_path)
    record = copy.deepcopy(load_fixture("sample_record.json"))
    for cycle in record["cycles"]:
        for step in cycle["steps"]:
            for group in step.get("tool_groups") or ():
                for call in group["calls"]:
                    if call["id"] == "toolu_05":
                        call["result"]["display"] = display
    write_notebook(
        lab.server.root,
        "changes.ipynb",
        [("%%phoenix\nedit", [record_output(record, "<b>fallback</b>", "record")])],
    )
    lab.open_notebook("changes.ipynb")
    page = lab.page
    page.locator(".jp-PhoenixConversation > *").first.wait_for(timeout=60_000)
    changes = page.locator("[data-phoenix-call='toolu_05'] details[data-phoenix-changes]")
    expect(changes).to_have_attribute("data-phoenix-changes", "4")
    page.locator("[data-phoenix-call='toolu_05']").evaluate(
        "n => { for (let d = n; d; d = d.parentElement) "
        "if (d.tagName === 'DETAILS') d.open = true }"
    )
    expect(changes.locator("summary")).to_have_text("bash changed 4 files")
    changes.locator("summary").click()
    kinds = changes.locator("[data-phoenix-change]")
    expect(kinds).to_have_count(4)
    assert sorted(kinds.nth(i).get_attribute("data-phoenix-change") or "" for i in range(4)) == [
        "added",
        "deleted",
        "mode",
        "modified",
    ]
    expect(changes.locator("[data-phoenix-change='mode']")).to_contain_text("0644 → 0755")
    diff = changes.locator("[data-phoenix-change-diff='app.py']")
    expect(diff.locator("[data-phoenix-diff-line='add']")).to_have_text("+x = 2")
    expect(diff.locator("[data-phoenix-diff-line='del']")).to_have_text("-x = 1")
