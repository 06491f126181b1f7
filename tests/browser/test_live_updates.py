"""A record updated in place by the kernel (display id), as it is while the agent streams."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.lab import LabPage, write_notebook

pytestmark = pytest.mark.browser

SHOW = """\
import json, pathlib
from IPython.display import display
MIME = "application/vnd.phoenix.conversation+json"
record = json.loads(pathlib.Path("sample_record.json").read_text())
handle = display({MIME: record, "text/plain": "record"}, raw=True, display_id=True)
"""

UPDATE = """\
record["cycles"][1]["steps"].append(
    {"kind": "ai", "item": {"type": "assistant", "text": "live-update-arrived"}, "tool_groups": []}
)
record["context"].update(used=190000, fraction=0.95, limit_reached=True)
handle.update({MIME: record, "text/plain": "record"}, raw=True)
"""


def test_update_in_place_keeps_open_groups_open(lab: LabPage) -> None:
    fixture = Path(__file__).parent / "fixtures" / "sample_record.json"
    shutil.copy(fixture, lab.server.root / "sample_record.json")
    write_notebook(lab.server.root, "live.ipynb", [(SHOW, []), (UPDATE, [])])
    lab.open_notebook("live.ipynb")
    lab.run_cell(0)
    page = lab.page
    bash_group = page.locator("details[data-phoenix-group='bash']").first
    bash_group.locator("summary").click()
    expect(bash_group.locator("[data-phoenix-output='bash']")).to_be_visible()
    write_group = page.locator("details[data-phoenix-group='write']").first
    assert write_group.evaluate("n => n.open"), "write groups start open"
    write_group.locator("summary").click()  # the reader closes it

    lab.run_cell(1)
    lab.wait_for_text("live-update-arrived")
    expect(page.locator(".jp-PhoenixConversation")).to_have_count(1)  # updated, not appended
    expect(page.locator("[data-phoenix-meter]")).to_have_attribute(
        "data-phoenix-limit-reached", "true"
    )
    assert page.locator("details[data-phoenix-group='bash']").first.evaluate("n => n.open")
    assert not page.locator("details[data-phoenix-group='write']").first.evaluate("n => n.open"), (
        "a group the reader closed stays closed"
    )
