"""The turn budget in a notebook: `%config` sets it, a cell's record says which limit
stopped a runaway model and how to go on, `%phoenix status` shows it.

A real kernel, the real SDK over loopback to the fake Messages API (fixtures in
conftest.py). The model never stops calling a tool it was not given.
"""

from __future__ import annotations

import re

from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel, state_name


def _runaway(_request: FakeRequest) -> Turn:
    return Turn([text("Once more."), tool_use("frobnicate", {"again": True})])


def test_a_runaway_cell_stops_at_the_configured_rounds_and_says_so(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    kern.ok("%config Phoenix.max_turn_rounds = 3")
    try:
        fake.add_rule(lambda request: True, _runaway)
        cell = kern.run("%%phoenix --new\nFrobnicate everything.", timeout=120)
        assert cell.status == "ok", (cell.error(), cell.text())
        assert len(fake.requests) == 3

        record = cell.records()[-1]
        assert state_name(record) == "idle"
        cycle = record["cycles"][-1]
        notes = [s for s in cycle["steps"] if s["kind"] == "system" and s.get("limit")]
        assert [n["limit"] for n in notes] == ["max_turn_rounds"]
        assert "after 3 model responses" in notes[0]["text"]
        assert cycle["stop"]["limit"] == "max_turn_rounds"
        # the shared fallbacks say it too (what a reader of the saved notebook sees)
        bundle = cell.last_bundle()
        # The Markdown fallback escapes every significant character of a note's text.
        shown = {
            "text/markdown": re.sub(r"\\(.)", r"\1", bundle["text/markdown"]),
            "text/plain": bundle["text/plain"],
        }
        for mime, text_ in shown.items():
            assert "c.Phoenix.max_turn_rounds" in text_, mime

        status = kern.ok("%phoenix status").text()
        assert "3 model responses a turn" in status, status
    finally:
        kern.ok("%config Phoenix.max_turn_rounds = 100")
