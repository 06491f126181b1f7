"""`%phoenix edits` and the record's Markdown / plain / HTML fallbacks show what a hiding
edit changes — in a real kernel, as a reader of a saved notebook or a terminal sees it.

The scripted model proposes an edit whose new source hides statements behind a
carriage return, a line separator and a form feed, and reorders a line with bidi
overrides and zero-width characters. Checked in what the kernel sent out (the
listing's stream text, the record's three fallbacks): each hidden statement begins a
line of its own, every hiding character is shown as `<U+…>` and none is left raw, and
one warning line names them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_cell_edits import run_cell

TARGET_ID = "c0ffee00-0000-4000-8000-00000000cafe"
NEW_SOURCE = (
    "x = 2  # tidy\rimport os; open('PWNED_CR', 'w')\n"
    "z = 4\u2028open('PWNED_LS', 'w')\n"
    "w = 5\x0copen('PWNED_FF', 'w')\n"
    "s = 'ok'  # \u202e ;)'PWNED_BIDI'(nepo \u2066\n"
    "ok\u200b = 1\n"
)
RAW = re.compile("[\r\u2028\x0c\u202e\u2066\u200b]")
MARKS = ("<U+202E>", "<U+2066>", "<U+200B>")
HIDDEN = ("import os; open('PWNED_CR', 'w')", "open('PWNED_LS', 'w')", "open('PWNED_FF', 'w')")


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    def setup(k: Kernel) -> None:
        assert run_cell(k, "x = 1", TARGET_ID).status == "ok"

    return setup


def _check(shown: str, where: str) -> None:
    assert not RAW.search(shown), (where, shown)
    for mark in MARKS:
        assert mark in shown, (where, mark, shown)
    lines = shown.splitlines()
    for statement in HIDDEN:
        assert any(line.lstrip(" +>.`|").startswith(statement) for line in lines), (
            where,
            statement,
            shown,
        )
    assert "invisible or change how it reads" in shown, (where, shown)


def test_the_listing_and_the_fallbacks_show_every_hidden_statement(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    call = tool_use(
        "edit_cell",
        {"cell_id": TARGET_ID, "new_source": NEW_SOURCE, "explanation": "Tidy the comment."},
    )
    fake.script(Turn([call]), Turn([text("Proposed.")]))
    cell = kern.run("%%phoenix --new\nTidy the cell.", timeout=120)
    assert cell.status == "ok", cell.error()
    listing = kern.ok("%phoenix edits").text()
    _check(listing, "%phoenix edits")
    bundle = cell.last_bundle()
    markdown = re.sub(r"\\(.)", r"\1", bundle["text/markdown"])
    _check(markdown, "text/markdown")
    _check(bundle["text/plain"], "text/plain")
    html = bundle["text/html"]
    raw = [(m.group(0), html[max(0, m.start() - 80) : m.end() + 40]) for m in RAW.finditer(html)]
    assert not raw, raw
    assert not RAW.search(html) and all(m.replace("<", "&lt;").replace(">", "&gt;") in html
                                        for m in MARKS), html  # fmt: skip
