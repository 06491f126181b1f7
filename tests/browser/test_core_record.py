"""A record made by the real producer (`core.cycles.project` over a history that
`transition` built) renders completely: every step and group the core emitted is
drawn, and nothing falls into the "cannot read" box. Guards the record contract
from the consumer's side.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from phoenix_nb.core.cycles import RecordHeader, project
from phoenix_nb.core.displays import BashDisplay, PatchDisplay
from phoenix_nb.core.events import LlmResponse, ToolComplete, UserApproveUpgrade, UserMessage
from phoenix_nb.core.values import TextBlock, ThinkingBlock, ToolResult, ToolUseBlock, Usage
from phoenix_nb.tools.registry import tool_traits, tools_for
from tests.browser.lab import LabPage, record_output, write_notebook
from tests.core.helpers import Driver

pytestmark = pytest.mark.browser

# The groups and summaries our tools declare, as the runtime gives them to the core.
TOOLS = tool_traits(tools_for(is_sub_agent=False))
HEADER = RecordHeader("c-core", "core-otter", "demo", "/work", True, 200_000, tools=TOOLS)


def _core_record() -> dict[str, object]:
    bash = ToolUseBlock("t1", "bash", {"command": "pytest -q"})
    upgrade = ToolUseBlock("t2", "request_mode_upgrade", {"reason": "fix the bug"})
    patch = ToolUseBlock("t3", "patch", {"path": "a.py"})
    d = Driver()
    d.send(UserMessage("why does it fail?"))
    d.send(
        LlmResponse(
            (ThinkingBlock("think", "sig"), TextBlock("look"), bash, upgrade),
            "tool_use",
            Usage(1000),
        )
    )
    d.send(ToolComplete(ToolResult("t1", "1 failed", display=BashDisplay("pytest -q", 1))))
    d.send(UserApproveUpgrade())
    d.send(LlmResponse((patch,), "tool_use", Usage(2000)))
    d.send(
        ToolComplete(
            ToolResult("t3", "patched", display=PatchDisplay("a.py", "@@ -1 +1 @@\n-a\n+b"))
        )
    )
    d.send(LlmResponse((TextBlock("core-final-answer"),), "end_turn", Usage(3000)))
    # Through JSON, exactly as the kernel sends it to the browser.
    return json.loads(json.dumps(project(d.history, d.state, HEADER)))


def test_record_from_core_projection_renders_every_step(lab: LabPage) -> None:
    record = _core_record()
    steps = [step for cycle in record["cycles"] for step in cycle["steps"]]  # type: ignore[index, union-attr]
    groups = [
        g
        for step in steps
        if step["kind"] == "ai"
        for g in step["tool_groups"]
        if any(c["name"] != "request_mode_upgrade" for c in g["calls"])
    ]
    write_notebook(
        lab.server.root,
        "core.ipynb",
        [("%%phoenix\nwhy", [record_output(record, "<b>x</b>", "x")])],
    )
    lab.open_notebook("core.ipynb")
    page = lab.page
    lab.wait_for_text("core-final-answer")
    expect(page.locator("[data-phoenix-problem]")).to_have_count(0)
    expect(page.locator("[data-phoenix-step]")).to_have_count(len(steps))
    expect(page.locator(".jp-Phoenix-raw")).to_have_count(0)  # no step kind left unknown
    expect(page.locator("details[data-phoenix-group]")).to_have_count(len(groups))
    expect(page.locator("[data-phoenix-exit]").first).to_have_text("exit 1")
    expect(page.locator("[data-phoenix-diff-line='add']")).to_have_text("+b")
    expect(page.locator("[data-phoenix-step='approval']")).to_have_attribute(
        "data-phoenix-decision", "approved"
    )
