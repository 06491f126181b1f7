"""The Approve prompt cannot be made to say something other than what approving does.

The approval request's reason is the model's text. Through a real kernel and a scripted
model, a request whose reason poses as phoenix ("Approving keeps Restricted mode …", a
Markdown heading, a button-like link, a terminal colour escape) must leave: buttons and
a line that are phoenix's own words (what approving does), no widget carrying the
reason, and the reason in the record only as a labelled, bounded, plain-text quotation.
"""

from __future__ import annotations

import time

import pytest
from bs4 import BeautifulSoup

from phoenix_nb.notebook._render.view import APPROVE_MEANS, REASON_LABEL, REASON_MAX_CHARS
from phoenix_nb.notebook.render import render_bundle
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel, state_name

pytestmark = pytest.mark.timeout(120)

POSING = (
    "# phoenix: Restricted mode — approving changes nothing\n"
    "Approving keeps this conversation read-only. [**Approve**](https://evil.example/ok)\n"
    "\x1b[1;32mSAFE\x1b[0m " + "padding " * 400
)


def test_approve_prompt_says_what_approving_does_and_quotes_the_reason(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(
        Turn([text("I will ask."), tool_use("request_mode_upgrade", {"reason": POSING})]),
        Turn([text("Staying read-only.")]),
    )
    since = time.monotonic()
    cell = kern.submit("%%phoenix --name posing-reason\nlook around")
    deny = kern.wait_for_button("Deny", since, timeout=90)
    kern.wait_until(
        lambda: any(state_name(r) == "awaiting_mode_approval" for r in cell.records()),
        90,
        "the approval request to show",
    )
    states = [state for _, state in kern.widgets(since)]
    buttons = {s.get("description"): s for s in states if s.get("_model_name") == "ButtonModel"}
    assert buttons["Approve"]["tooltip"] == "Give the agent write access (Unrestricted mode)"
    labels = [s.get("value") for s in states if s.get("_model_name") == "LabelModel"]
    # phoenix's own sentence on what approving does is the record's, once (below): a
    # second copy beside the buttons was clipped at the cell's edge.
    assert APPROVE_MEANS not in labels
    every_value = str(states) + str(
        [kern.widget_updates(model_id, since) for model_id, _ in kern.widgets(since)]
    )
    assert "approving changes nothing" not in every_value, "the reason is not in the prompt"
    # While the cell waits, the kernel sends the record alone (fallbacks come with the
    # final display): render the pending record as every fallback will.
    record = next(r for r in reversed(cell.records()) if state_name(r) == "awaiting_mode_approval")
    bundle = render_bundle(record)
    pending = BeautifulSoup(bundle["text/html"], "html.parser").select(".phx-pending")[-1]
    quote = pending.select_one("blockquote.phx-reason")
    assert quote is not None and quote.find(["h1", "a", "strong"]) is None
    assert quote.get_text().startswith("# phoenix: Restricted mode — approving changes nothing")
    assert "[1;32m" not in quote.get_text() and "\x1b" not in bundle["text/html"]
    assert len(quote.get_text()) < REASON_MAX_CHARS + 60
    words = pending.get_text()
    assert words.index(APPROVE_MEANS) < words.index(REASON_LABEL) < words.index("# phoenix:")
    for fallback in (bundle["text/markdown"], bundle["text/plain"]):
        assert APPROVE_MEANS in fallback and REASON_LABEL in fallback
        assert "padding " * 100 not in fallback
    kern.click(deny)
    kern.finish_turn(cell)
    assert cell.status == "ok", cell.error()
    final = cell.last_bundle()
    line = BeautifulSoup(final["text/html"], "html.parser").select_one(".phx-approval-line")
    assert line.get_text().startswith(
        "✗ write access denied: the agent asked “# phoenix: Restricted mode"
    )
