"""The side panel's list of what waits, its attachments, and 200% zoom, in real JupyterLab and
Notebook 7 (Chromium), against the fake Messages API.

- A mode upgrade is listed with the agent's reason as quoted text (its markup is not drawn) and
  answered from the list: the file on disk is patched.
- A request of a kind the panel does not know (a fake source added from a cell, as MCP approvals
  are added) is listed with its markup as text and answered by id.
- A cell edit proposed by a panel turn is listed with "Show", which scrolls to its cell and
  selects it; Accept there removes it from the list.
- "Attach output" attaches the active cell's text and image output; an image pasted and one
  dropped into the message box go as chips; a corrupt pasted image is the kernel's notice and
  the message and its chips stay; once it is removed, what the fake model RECEIVED is the
  images byte for byte as image blocks and the output text.
- At 200% zoom (the window's CSS width halved, as the browser's zoom does) every control of the
  panel is reachable and nothing in it overflows sideways.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import Locator, expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7
from tests.browser.test_cell_edits import _cell, _run, _sources
from tests.browser.test_panel import WAIT_MS, Panel, _load_from_the_prompt, _open_panel, _write
from tests.notebook.test_kernel_panel import FAKE_SOURCE

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

BUGGY = "def add(a, b):\n    return a - b\n"
REASON = "I need <b>write</b> access to fix "


def _png(colour: tuple[int, int, int]) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (12, 8), colour).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


PLOT = _png((0, 0, 255))
PASTED = _png((255, 0, 0))
DROPPED = _png((0, 160, 0))
BROKEN = base64.b64encode(b"\x89PNG\r\n\x1a\n but not really").decode("ascii")
FILLER = [(f"filler{n}", f"# filler {n}") for n in range(40)]
CELLS = [
    ("data", "x = 1"),
    (
        "plot",
        "import base64\nfrom IPython.display import Image, display\nprint('rows: 42')\n"
        f"display(Image(data=base64.b64decode('{PLOT}')))",
    ),
    ("servers", FAKE_SOURCE),
    ("answers", "print('answers:', whole_kernel.answers, elsewhere.answers)"),
    *FILLER,
]


def _files(panel: Panel, event: str, files: list[tuple[str, str]]) -> None:
    """A paste (or a drop) of image files into the message box, as the browser makes it."""
    panel.input.evaluate(
        """(box, [event, files]) => {
            const dt = new DataTransfer();
            for (const [name, b64] of files) {
                const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
                dt.items.add(new File([bytes], name, { type: 'image/png' }));
            }
            const init = { bubbles: true, cancelable: true };
            box.dispatchEvent(event === 'paste'
                ? new ClipboardEvent('paste', { ...init, clipboardData: dt })
                : new DragEvent('drop', { ...init, dataTransfer: dt }));
        }""",
        [event, [list(f) for f in files]],
    )


def _item(panel: Panel, kind: str) -> Locator:
    return panel.node.locator(f"[data-phoenix-pending-kind={kind}]")


def _last_user_content(fake: FakeAnthropic) -> list[dict[str, Any]]:
    content = fake.requests[-1].body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _waiting(lab: LabPage, fake: FakeAnthropic, panel: Panel, notebook: Path, shot: str) -> None:
    target = notebook.parent / f"{notebook.stem}_calc.py"
    target.write_text(BUGGY)
    _run(lab, 1)  # x = 1: the kernel learns the cell's id
    _run(lab, 2)  # the "plot": text and an image
    expect(_cell(lab, 2).locator(".jp-OutputArea img")).to_be_visible(timeout=WAIT_MS)

    # 1. A mode upgrade in the list: the reason quoted as text, answered from the list.
    fake.clear()
    ask = tool_use("request_mode_upgrade", {"reason": REASON + target.name})
    patch = tool_use(
        "patch",
        {"path": target.name,
         "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}]},
    )  # fmt: skip
    fake.script(Turn([ask]), Turn([patch]), Turn([text("Fixed add().")]))
    panel.send("please fix add")
    item = _item(panel, "mode_approval")
    expect(item).to_have_count(1, timeout=WAIT_MS)
    expect(item).to_have_attribute("data-phoenix-pending", ask.id)
    expect(item.locator("[data-phoenix-pending-reason]")).to_have_text(REASON + target.name)
    expect(item.locator("b")).to_have_count(0)  # the agent's markup is not drawn
    item.get_by_role("button", name="Approve the upgrade to Unrestricted mode").click()
    panel.wait_rest("Fixed add().")
    expect(item).to_have_count(0, timeout=WAIT_MS)
    assert target.read_text() == BUGGY.replace("a - b", "a + b")

    # 2. A proposed cell edit: listed with Show, which brings its cell; Accept there ends it.
    fake.clear()
    edit = tool_use(
        "edit_cell", {"cell_id": "data", "new_source": "x = 2", "explanation": "Two, not one."}
    )
    fake.script(Turn([edit]), Turn([text("I proposed an edit to your cell.")]))
    panel.send("make x two")
    panel.wait_rest("I proposed an edit to your cell.")
    item = _item(panel, "cell_edit")
    expect(item).to_have_count(1, timeout=WAIT_MS)
    expect(item).to_contain_text("Two, not one.")
    lab.screenshot(shot)  # test-artifacts/; docs/panel-waiting.png is Lab's
    lab.page.locator(".jp-NotebookPanel .jp-Cell").last.scroll_into_view_if_needed()
    expect(_cell(lab, 1)).not_to_be_in_viewport(timeout=WAIT_MS)
    item.get_by_role("button", name=re.compile(r"^Show the cell of cell edit edit-")).click()
    expect(_cell(lab, 1)).to_be_in_viewport(timeout=WAIT_MS)
    expect(_cell(lab, 1)).to_have_class(re.compile(r"\bjp-mod-active\b"), timeout=WAIT_MS)
    accept = _cell(lab, 1).locator('[data-phoenix-edit-action="accept"]')
    expect(accept).to_be_focused(timeout=WAIT_MS)  # the keyboard is where the decision is
    accept.click()
    expect(item).to_have_count(0, timeout=WAIT_MS)
    assert _sources(lab)[1] == "x = 2"

    # 3. A kind the panel has never heard of (as MCP approvals are to it), from a cell.
    _run(lab, 3)
    item = _item(panel, "mcp_server")
    expect(item).to_have_count(1, timeout=WAIT_MS)  # the whole kernel's; not someone else's
    expect(item).to_contain_text("server: <img src=x onerror=y()>")
    expect(item.locator("[data-phoenix-pending-reason]")).to_have_text(
        "<b>run</b> me <script>x()</script>"
    )
    expect(item.locator("img, b, script")).to_have_count(0)
    item.get_by_role("button", name="Approve mcp server <img src=x onerror=y()>").click()
    expect(item).to_have_count(0, timeout=WAIT_MS)
    _run(lab, 4)
    expect(_cell(lab, 4).locator(".jp-OutputArea")).to_contain_text(
        "answers: [['srv-all', 'approve']] []", timeout=WAIT_MS
    )

    # 4. Attach the plot cell's output; paste one image, drop another, paste a corrupt one.
    _cell(lab, 2).locator(".jp-InputPrompt").click()  # the active cell
    panel.button("Attach the active cell's output to the next message").click()
    chips = panel.node.locator("[data-phoenix-attachment]")
    expect(chips).to_have_count(1, timeout=WAIT_MS)
    expect(chips.first).to_contain_text(re.compile(r"output of cell \[\d+\] \(text, 1 image\)"))
    # One at a time: each is read asynchronously, and the order is what the model gets.
    for count, (event, name, data) in enumerate(
        [("paste", "pasted.png", PASTED), ("drop", "dropped.png", DROPPED),
         ("paste", "broken.png", BROKEN)],
        start=2,
    ):  # fmt: skip
        _files(panel, event, [(name, data)])
        expect(chips).to_have_count(count, timeout=WAIT_MS)
        expect(chips.last).to_have_attribute("data-phoenix-attachment", name)
    fake.clear()
    fake.script(Turn([text("I see three pictures and 42 rows.")]))
    panel.send("what do you see?")
    notice = panel.node.locator(".jp-PhoenixPanel-notice")
    expect(notice).to_contain_text("'broken.png'", timeout=WAIT_MS)
    expect(notice).to_contain_text("cannot be sent")
    expect(panel.input).to_have_value("what do you see?")  # nothing lost
    expect(chips).to_have_count(4)
    assert fake.requests == [], "nothing went to the model"
    panel.button("Remove broken.png").click()
    expect(chips).to_have_count(3)
    panel.button("Send the message").click()
    panel.wait_rest("I see three pictures and 42 rows.")
    expect(panel.input).to_have_value("")
    expect(chips).to_have_count(0)
    content = _last_user_content(fake)
    images = [b["source"] for b in content if b.get("type") == "image"]
    assert [(i["media_type"], i["data"]) for i in images] == [
        ("image/png", PLOT),
        ("image/png", PASTED),
        ("image/png", DROPPED),
    ]
    words = "\n".join(b["text"] for b in content if b.get("type") == "text")
    assert "what do you see?" in words
    assert re.search(
        r"Output of cell \[\d+\] \(attached from the notebook\):\n```\nrows: 42", words
    )
    assert "broken" not in json.dumps(content)


def _zoomed(lab: LabPage, panel: Panel) -> None:
    """200% zoom: the page's CSS width halved (what the browser's zoom does to layout)."""
    lab.page.set_viewport_size({"width": 640, "height": 500})
    # Lumino lays the shell out again on the next frames: wait until the panel is inside the
    # narrower window, then for two more frames (the panel's own redraw is one).
    lab.page.wait_for_function(
        """() => { const r = document.querySelector('#phoenix-panel').getBoundingClientRect();
                   return r.width > 0 && r.right <= window.innerWidth + 1; }""",
        timeout=WAIT_MS,
    )
    lab.page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )
    panel.expect_state("ready")
    expect(panel.node).to_be_visible(timeout=WAIT_MS)
    expect(panel.input).to_be_visible()
    wide = panel.node.evaluate(
        """n => [n, ...n.querySelectorAll('*')]
                .filter(e => e.offsetParent !== null || e === n)
                .filter(e => getComputedStyle(e).overflowX === 'visible' || e === n
                             || e.matches('.jp-PhoenixPanel-record'))
                .filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)
                .map(e => `${e.className} ${e.scrollWidth}>${e.clientWidth}`)"""
    )
    assert wide == [], f"sideways overflow in the panel: {wide}"
    box = panel.node.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 641, box
    controls = panel.node.locator("button:visible, textarea:visible, select:visible")
    assert controls.count() >= 5
    for index in range(controls.count()):
        control = controls.nth(index)
        control.scroll_into_view_if_needed()
        expect(control).to_be_in_viewport()
        own = control.bounding_box()
        assert own is not None
        assert (
            own["x"] >= box["x"] - 1 and own["x"] + own["width"] <= box["x"] + box["width"] + 1
        ), (
            control.get_attribute("aria-label"),
            own,
            box,
        )
    lab.screenshot("panel-zoom-200.png", "#phoenix-panel")
    panel.input.focus()
    lab.page.keyboard.press("Tab")
    assert lab.page.evaluate("() => document.activeElement?.getAttribute('aria-label')") == (
        "Send the message"
    )


def test_panel_waiting_and_attachments_in_jupyterlab(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    name = "panel-waiting-lab.ipynb"
    path = _write(lab.server.root, name, CELLS)
    lab.open_notebook(name, workspace="phoenix-panel-waiting")
    lab.wait_for_kernel_idle()
    panel = _open_panel(lab)
    _load_from_the_prompt(lab, panel)
    _waiting(lab, fake_llm, panel, path, "panel-waiting.png")
    _zoomed(lab, panel)


def test_panel_waiting_and_attachments_in_notebook7(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    require_notebook7()
    name = "panel-waiting-nb7.ipynb"
    path = _write(lab.server.root, name, CELLS)
    lab.open_in_notebook7(name)
    lab.answer_kernel_dialog()
    panel = _open_panel(lab)
    _load_from_the_prompt(lab, panel)
    _waiting(lab, fake_llm, panel, path, "panel-waiting-nb7.png")
    _zoomed(lab, panel)
