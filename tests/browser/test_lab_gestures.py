"""The gestures the end-to-end `%%phoenix` test is built from, checked against a real kernel:
run a cell, click a widget button by its label, wait for text, save, restart, reload.

If one of these breaks, the end-to-end test would fail for a reason unrelated to
phoenix_nb; here the failure names the gesture.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.lab import LabPage, write_notebook

pytestmark = pytest.mark.browser

WIDGET_CELL = """\
import ipywidgets as widgets
button = widgets.Button(description="Approve")
def _clicked(_):
    button.description = "Approved-by-click"
button.on_click(_clicked)
print("gesture-" + "ready")
button
"""


def test_run_cell_click_button_save_restart_reload(lab: LabPage) -> None:
    write_notebook(lab.server.root, "gestures.ipynb", [(WIDGET_CELL, [])])
    lab.open_notebook("gestures.ipynb")
    lab.wait_for_kernel_idle()
    lab.run_cell(0)
    lab.wait_for_text("gesture-ready")
    lab.click_button("Approve")  # reaches the kernel callback, which relabels the button
    expect(lab.page.get_by_role("button", name="Approved-by-click")).to_be_visible(timeout=30_000)
    lab.save()
    saved = json.loads((lab.server.root / "gestures.ipynb").read_text(encoding="utf-8"))
    texts = ["".join(o.get("text", "")) for o in saved["cells"][0]["outputs"]]
    assert any("gesture-ready" in text for text in texts), saved["cells"][0]["outputs"]
    lab.restart_kernel()
    lab.reload()
    lab.wait_for_text("gesture-ready")  # the saved output, shown without running anything
