"""A proposed cell edit cannot hide what it changes, in real JupyterLab and Notebook 7.

The scripted model proposes one edit whose new source uses every hiding trick of the
review's families at once: a statement pushed far right on a long line, statements
after a carriage return, a line separator (U+2028), a form feed and a vertical tab
(each a line break to Python and IPython), bidirectional overrides and isolates
(U+202E, U+2066, U+2067, U+2069), zero-width characters (U+200B, U+2060, U+FEFF) and
a tag character (U+E0041).

Measured on the rendered DOM, not on text: each hidden statement's own text (a DOM
Range over it) lies inside the diff box's visible bounds, the box has no horizontal
overflow, each statement after a line break starts its own row, the rows show every
hiding character as `<U+…>`, and one warning line above the diff names them. Accept
writes exactly the proposed source: checked in the notebook file on disk after a save.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Locator, expect

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7
from tests.browser.test_cell_edits import WAIT_MS, _cell, _run

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

TARGET = "x = 1"
STATEMENTS = {  # marker -> the row it must start (after "+ ")
    "PWNED_CR": "import os; open('PWNED_CR', 'w')",
    "PWNED_LS": "open('PWNED_LS', 'w')",
    "PWNED_FF": "open('PWNED_FF', 'w')",
    "PWNED_VT": "open('PWNED_VT', 'w')",
}
NEW_SOURCE = (
    "x = 2  # tidy up the comment\r" + STATEMENTS["PWNED_CR"] + "\n"
    "y = 3" + " " * 400 + "; open('PWNED_LONG', 'w')\n"
    "z = 4\u2028" + STATEMENTS["PWNED_LS"] + "\n"
    "w = 5\x0c" + STATEMENTS["PWNED_FF"] + "\n"
    "v = 6\x0b" + STATEMENTS["PWNED_VT"] + "\n"
    "s = 'ok'  # \u202e ;)'PWNED_BIDI'(nepo \u2066x\u2067y\u2069\n"
    "ok\u200b = 1; t\u2060 = 2; u = '\ufeff\U000e0041'\n"
)
MARKS = ["<U+202E>", "<U+2066>", "<U+2067>", "<U+2069>", "<U+200B>", "<U+2060>", "<U+FEFF>",
         "<U+E0041>"]  # fmt: skip
CELLS = [
    ("setup", "%load_ext phoenix_nb"),
    ("target", TARGET),
    ("agent", "%%phoenix --name {slug}\nTidy the cell."),
]

# For each marker: the client rects of the text that names it, and the rect the diff box
# shows (the box clipped by every scrolling ancestor), and whether the box overflows.
MEASURE = """([markers]) => {
  const view = document.querySelector('[data-phoenix-edit]');
  const pre = view.querySelector('[data-phoenix-edit-diff]');
  let shown = pre.getBoundingClientRect();
  for (let node = pre; node; node = node.parentElement) {
    const style = getComputedStyle(node);
    if (node === pre || /(auto|scroll|hidden|clip)/.test(style.overflowX)) {
      const r = node.getBoundingClientRect();
      shown = {left: Math.max(shown.left, r.left), right: Math.min(shown.right, r.right),
               top: Math.max(shown.top, r.top), bottom: Math.min(shown.bottom, r.bottom)};
    }
  }
  const out = {overflow: pre.scrollWidth - pre.clientWidth, shown, found: {}};
  for (const marker of markers) {
    for (const row of pre.querySelectorAll('[data-phoenix-edit-line]')) {
      const node = row.firstChild;
      const at = node ? node.textContent.indexOf(marker) : -1;
      if (at < 0) continue;
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + marker.length);
      out.found[marker] = Array.from(range.getClientRects()).map(
        r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width}));
    }
  }
  const warning = view.querySelector('[data-phoenix-edit-warning]');
  const first = pre.querySelector('[data-phoenix-edit-line]');
  out.warning = warning ? warning.textContent : null;
  out.warningAbove = !!warning && warning.getBoundingClientRect().bottom
    <= first.getBoundingClientRect().top + 0.5;
  return out;
}"""


def _write(root: Path, name: str, slug: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}  # fmt: skip
    notebook.cells = [
        nbformat.v4.new_code_cell(source.replace("{slug}", slug), id=cell_id)
        for cell_id, source in CELLS
    ]
    (root / name).write_text(nbformat.writes(notebook), encoding="utf-8")


def _target_source(path: Path) -> str:
    try:
        saved = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return TARGET  # being written
    return next((c.source for c in saved.cells if c.get("id") == "target"), TARGET)


def _wait_for_saved(path: Path, done: Callable[[str], bool], timeout: float = 60.0) -> None:
    """Poll the file on disk until the save landed (an event outside the page)."""
    end = time.monotonic() + timeout
    while not done(_target_source(path)):
        assert time.monotonic() < end, "the notebook was not saved"
        time.sleep(0.2)


def _rows(view: Locator) -> list[str]:
    return view.locator("[data-phoenix-edit-line]").all_text_contents()


def _hiding_flow(lab: LabPage, fake: FakeAnthropic, path: Path) -> None:
    _run(lab, 0)
    _run(lab, 1)  # the kernel learns the cell's id
    fake.clear()
    fake.script(
        Turn([tool_use("edit_cell", {"cell_id": "target", "new_source": NEW_SOURCE,
                                     "explanation": "Tidy up the comment."})]),
        Turn([text("Proposed a tidier cell.")]),
    )  # fmt: skip
    _run(lab, 2)
    lab.wait_for_text("Proposed a tidier cell.", timeout_ms=WAIT_MS)
    view = _cell(lab, 1).locator("[data-phoenix-edit]")
    expect(view).to_be_visible(timeout=WAIT_MS)

    markers = ["PWNED_LONG", "PWNED_BIDI", *STATEMENTS]
    seen = lab.page.evaluate(MEASURE, [markers])
    print(json.dumps(seen)[:3000])
    assert seen["overflow"] <= 1, "the diff box scrolls: part of a line is out of sight"
    shown = seen["shown"]
    for marker in markers:
        rects = [r for r in seen["found"].get(marker, []) if r["width"] > 0]
        assert rects, f"{marker} is not drawn in the diff"
        for r in rects:
            assert r["left"] >= shown["left"] - 1 and r["right"] <= shown["right"] + 1, (
                marker,
                r,
                shown,
            )
    rows = _rows(view)
    for statement in STATEMENTS.values():
        assert f"+ {statement}" in rows, (statement, rows)
    joined = "\n".join(rows)
    for code in MARKS:
        assert code in joined, (code, rows)
    assert not re.search("[\u200b\u202e\u2066-\u2069\u2060\ufeff\r\u2028\x0b\x0c]", joined)
    assert seen["warning"] is not None and seen["warningAbove"], seen["warning"]
    for code in ("U+000D", "U+2028", "U+000C", "U+000B", "U+202E", "U+200B", "U+E0041"):
        assert code in seen["warning"], (code, seen["warning"])
    assert "U+000B ×" not in seen["warning"], "each character is counted once"

    # Accept writes exactly the proposed source (the file on disk after a save).
    view.locator('[data-phoenix-edit-action="accept"]').click()
    expect(view).to_have_count(0, timeout=WAIT_MS)
    _cell(lab, 1).locator(".jp-InputPrompt").click()  # the notebook has the keyboard
    lab.page.keyboard.press("Control+s")
    _wait_for_saved(path, lambda source: source != TARGET)
    saved = nbformat.read(path, as_version=4)
    [cell] = [c for c in saved.cells if c.get("id") == "target"]
    assert cell.source == NEW_SOURCE, (cell.source, NEW_SOURCE)


def test_cell_edit_hides_nothing_in_jupyterlab(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    _write(lab.server.root, "hiding_lab.ipynb", "hiding-lab")
    lab.open_notebook("hiding_lab.ipynb", workspace="phoenix-hiding")
    lab.wait_for_kernel_idle()
    _hiding_flow(lab, fake_llm, lab.server.root / "hiding_lab.ipynb")


def test_cell_edit_hides_nothing_in_notebook7(lab: LabPage, fake_llm: FakeAnthropic) -> None:
    require_notebook7()
    _write(lab.server.root, "hiding_nb7.ipynb", "hiding-nb7")
    lab.open_in_notebook7("hiding_nb7.ipynb")
    _hiding_flow(lab, fake_llm, lab.server.root / "hiding_nb7.ipynb")
