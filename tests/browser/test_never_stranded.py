"""Issue 38 in real Chromium, JupyterLab and Notebook 7: a turn waiting for approval can
always be answered.

A `%%phoenix` cell that asks for write access ends (the kernel goes idle) and its view
goes on detached (notebook/cell.py), so:
- a reload restores the controls (the widgets come back from an idle kernel) and
  Approve completes the turn in the same cell;
- a second tab on the same notebook sees the same pending request and buttons;
- after a forced websocket drop (Playwright closes the page's kernel socket) the
  front end reconnects and Approve still completes the turn;
- `%phoenix approve` in another cell completes a waiting turn in the cell that asked.

Each fails on the code before the issue: the waiting cell held the shell, so a reloaded
page showed "Loading widget..." and `%phoenix approve` queued behind the waiting cell.
The approval block's text fits its box (element bounds) in light and dark themes at a
normal and a narrow width.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, WebSocketRoute, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

WAIT_MS = 90_000
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = BUGGY.replace("a - b", "a + b")
REASON = "I need to edit calc.py so that add() adds"


def _patch(old: str, new: str) -> dict[str, object]:
    return {
        "path": "calc.py",
        "patches": [{"operation": "replace", "oldText": old, "newText": new}],
    }


def _script(fake: FakeAnthropic) -> None:
    """Two turns that each ask for write access, then patch and answer."""
    ask = "request_mode_upgrade"
    fake.script(
        Turn([text("It subtracts."), tool_use(ask, {"reason": REASON})]),
        Turn([tool_use("patch", _patch("a - b", "a + b"))]),
        Turn([text("Fixed add().")]),
        Turn([text("Once more."), tool_use(ask, {"reason": "a second edit"})]),
        Turn([tool_use("patch", _patch("a + b", "b + a"))]),
        Turn([text("Swapped the operands.")]),
    )


def _notebook(lab: LabPage, tmp_path: Path, name: str) -> Path:
    project = tmp_path / f"{name}-project"
    project.mkdir()
    (project / "calc.py").write_text(BUGGY, encoding="utf-8")
    cwd = shlex.quote(str(project))
    write_notebook(
        lab.server.root,
        f"{name}.ipynb",
        [
            ("%load_ext phoenix_nb", []),
            (f"%%phoenix --name {name} --cwd {cwd}\nadd() is wrong; fix it", []),
            ("%phoenix approve", []),
            (f"%%phoenix --name {name}-2 --cwd {cwd}\nand swap the operands", []),
            ("%phoenix approve", []),
        ],
    )
    return project


def _open(lab: LabPage, name: str, ui: str) -> None:
    if ui == "lab":
        lab.open_notebook(f"{name}.ipynb", workspace=f"phoenix-{name}")
    else:
        require_notebook7()
        lab.open_in_notebook7(f"{name}.ipynb")


def _cell(page: Page, index: int) -> Locator:
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def _run(lab: LabPage, index: int) -> None:
    """Shift+Enter on a cell until it runs: a run sent before the kernel is connected is
    dropped by the front end (Notebook 7 has no status bar to wait on), so it is re-sent."""
    prompt = _cell(lab.page, index).locator(".jp-InputPrompt")
    for _attempt in range(12):
        lab.answer_kernel_dialog()
        try:  # the dialog can open between the check and the click: answer it next time
            _cell(lab.page, index).locator(".jp-InputArea-editor").click(timeout=10_000)
        except PlaywrightTimeout:
            continue
        lab.page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\[ \]:$"), timeout=5_000)
            break
        except AssertionError:
            continue
    expect(prompt).to_have_text(re.compile(r"^\[\d+\]:$"), timeout=WAIT_MS)


def _record(page: Page, index: int) -> Locator:
    return _cell(page, index).locator("[data-phoenix-record]").first


def _approve_button(page: Page, index: int) -> Locator:
    return _cell(page, index).get_by_role("button", name="Approve", exact=True)


def _wait_asking(page: Page, index: int) -> None:
    """The turn asks, its cell has ended (an execution count, not `[*]`), buttons shown."""
    expect(_record(page, index)).to_have_attribute(
        "data-phoenix-state", "awaiting_mode_approval", timeout=WAIT_MS
    )
    expect(_cell(page, index).locator(".jp-InputPrompt")).to_have_text(
        re.compile(r"^\[\d+\]:$"), timeout=WAIT_MS
    )
    expect(_approve_button(page, index)).to_be_visible(timeout=WAIT_MS)


def _wait_done(page: Page, index: int, words: str) -> None:
    record = _record(page, index)
    expect(record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
    expect(record).to_contain_text(words)
    for gone in ("Approve", "Deny", "Cancel"):  # the controls' output went with the wait
        expect(_cell(page, index).get_by_role("button", name=gone, exact=True)).to_have_count(0)


def _no_dead_widgets(page: Page) -> None:
    for dead in ("Loading widget", "Error displaying widget", "Model not found"):
        expect(page.get_by_text(dead).filter(visible=True)).to_have_count(0)


def _save(lab: LabPage, path: Path, showing: str) -> None:
    """Ctrl+S from the notebook (not a widget); polls the file itself (Notebook 7 marks
    unsaved changes differently from JupyterLab)."""
    _cell(lab.page, 0).locator(".jp-InputPrompt").click()
    lab.page.keyboard.press("Control+s")
    deadline = time.monotonic() + WAIT_MS / 1000
    while showing not in path.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, f"{path.name} was not saved with {showing!r}"
        time.sleep(0.1)  # polling the saved file, bounded by the deadline


@pytest.fixture(params=["lab", "notebook7"])
def ui(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_reload_and_a_second_tab_then_approve_completes_the_turn_in_the_same_cell(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path, ui: str
) -> None:
    fake_llm.clear()
    _script(fake_llm)
    name = f"stranded-reload-{ui}"
    project = _notebook(lab, tmp_path, name)
    _open(lab, name, ui)
    _run(lab, 0)
    _run(lab, 1)
    _wait_asking(lab.page, 1)
    _save(lab, lab.server.root / f"{name}.ipynb", "awaiting_mode_approval")

    # A second tab on the same notebook sees the same pending request, with buttons.
    second = LabPage(lab.page.context.new_page(), lab.server)
    _open(second, name, ui)
    expect(_record(second.page, 1).locator("[data-phoenix-pending-approval]")).to_have_count(
        1, timeout=WAIT_MS
    )
    expect(_approve_button(second.page, 1)).to_be_visible(timeout=WAIT_MS)
    _no_dead_widgets(second.page)

    lab.reload()  # the controls come back from the (idle) kernel
    _wait_asking(lab.page, 1)
    _no_dead_widgets(lab.page)
    _approve_button(lab.page, 1).click()
    _wait_done(lab.page, 1, "Fixed add().")
    assert (project / "calc.py").read_text(encoding="utf-8") == FIXED
    _wait_done(second.page, 1, "Fixed add().")  # the other tab follows the same turn
    second.page.close()


def test_websocket_drop_then_approve_and_percent_approve_from_another_cell(
    lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path, ui: str
) -> None:
    fake_llm.clear()
    _script(fake_llm)
    name = f"stranded-drop-{ui}"
    project = _notebook(lab, tmp_path, name)
    sockets: list[WebSocketRoute] = []

    def through(route: WebSocketRoute) -> None:
        route.connect_to_server()
        sockets.append(route)

    lab.page.route_web_socket(re.compile(r"/api/kernels/[^/]+/channels"), through)
    _open(lab, name, ui)
    _run(lab, 0)
    _run(lab, 1)
    _wait_asking(lab.page, 1)

    # A forced drop: every kernel socket of the page closes; the front end reconnects.
    dropped = list(sockets)
    assert dropped, "the page's kernel socket went through the route"
    for route in dropped:
        route.close(code=1006, reason="test: forced drop")
    deadline = time.monotonic() + WAIT_MS / 1000
    while len(sockets) == len(dropped):
        assert time.monotonic() < deadline, "the front end never reconnected"
        lab.page.wait_for_timeout(100)  # polling the route's count, bounded by the deadline
    _wait_asking(lab.page, 1)
    _approve_button(lab.page, 1).click()
    _wait_done(lab.page, 1, "Fixed add().")
    assert (project / "calc.py").read_text(encoding="utf-8") == FIXED

    # `%phoenix approve` from another cell answers a turn that waits in the cell above.
    _run(lab, 3)
    _wait_asking(lab.page, 3)
    _run(lab, 4)
    expect(_cell(lab.page, 4).locator(".jp-OutputArea")).to_contain_text(
        "goes on in the cell that asked", timeout=WAIT_MS
    )
    _wait_done(lab.page, 3, "Swapped the operands.")
    assert "b + a" in (project / "calc.py").read_text(encoding="utf-8")


OVERFLOW_JS = """
(block) => {
  const box = block.getBoundingClientRect();
  const out = [];
  for (const el of block.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > box.right + 0.5 || r.left < box.left - 0.5) {
      out.push(`${el.className}: ${r.left}-${r.right} outside ${box.left}-${box.right}`);
    }
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible') {
      out.push(`${el.className}: clipped (${el.scrollWidth} > ${el.clientWidth})`);
    }
  }
  return out;
}
"""


@pytest.fixture
def asking_lab(lab: LabPage, fake_llm: FakeAnthropic, tmp_path: Path) -> Iterator[LabPage]:
    fake_llm.clear()
    _script(fake_llm)
    name = "stranded-layout"
    _notebook(lab, tmp_path, name)
    _open(lab, name, "lab")
    _run(lab, 0)
    _run(lab, 1)
    _wait_asking(lab.page, 1)
    yield lab


def test_the_approval_blocks_text_stays_in_its_box(asking_lab: LabPage) -> None:
    lab = asking_lab
    block = _record(lab.page, 1).locator("[data-phoenix-pending-approval]")
    means = block.locator(".jp-Phoenix-approveMeans")
    expect(means).to_have_count(1)
    # The sentence once in the cell: no second copy as a label beside the buttons.
    sentence = means.inner_text().strip()
    expect(_cell(lab.page, 1).get_by_text(sentence, exact=True)).to_have_count(1)
    for dark in (False, True):
        lab.set_theme(dark)
        for width in (1280, 560):
            lab.page.set_viewport_size({"width": width, "height": 1000})
            expect(block).to_be_visible(timeout=WAIT_MS)
            block.scroll_into_view_if_needed()
            assert block.evaluate(OVERFLOW_JS) == [], (dark, width)
            cell_box = _cell(lab.page, 1).bounding_box()
            means_box = means.bounding_box()
            assert cell_box is not None and means_box is not None
            assert means_box["x"] + means_box["width"] <= cell_box["x"] + cell_box["width"] + 0.5
            lab.screenshot(
                f"approval-block-{'dark' if dark else 'light'}-{width}.png",
                ".jp-NotebookPanel .jp-Cell >> nth=1",
            )
    lab.set_theme(False)


def test_the_demos_kernel_scene_plays_to_the_end_with_cell_ids_in_jupyterlab(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    """JupyterLab sends cell ids, so kernel_history writes `In [n] (cell <id>):`; the
    demo's kernel scene used to stop at "My script only knows …" on exactly the tour's
    decimal-comma price (it looked for `In [n]:`). The same scene without cell ids runs
    under nbclient in tests/notebook/test_demo_kernel.py."""
    from phoenix_nb.demo.screenplay import DemoScript
    from tests.notebook.test_demo_kernel import ASK, FAILING, ORDERS

    write_notebook(
        lab.server.root,
        "kernel-scene.ipynb",
        [
            ("%load_ext phoenix_nb", []),
            (ORDERS.strip(), []),
            (FAILING, []),
            (f"%%phoenix --name kernel-scene-lab\n{ASK}", []),
        ],
    )
    lab.open_notebook("kernel-scene.ipynb", workspace="phoenix-kernel-scene")
    for index in (0, 1, 2):
        _run(lab, index)
    expect(_cell(lab.page, 2).locator(".jp-OutputArea-output")).to_contain_text(
        "ValueError", timeout=WAIT_MS
    )
    fake_llm.clear()
    previous, fake_llm.default = fake_llm.default, DemoScript(pace=0).reply
    try:
        _run(lab, 3)
        record = _record(lab.page, 3)
        expect(record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
    finally:
        fake_llm.default = previous
    expect(record).to_contain_text("Found it", timeout=WAIT_MS)
    expect(record).not_to_contain_text("so I stop here")
    expect(record).to_contain_text("What was wrong")
    sent = json.dumps([r.body for r in fake_llm.requests])
    assert re.search(r"In \[\d+\] \(cell ", sent), "JupyterLab sent cell ids"
