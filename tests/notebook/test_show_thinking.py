"""`c.Phoenix.show_thinking = False` keeps the model's reasoning out of the record."""

from __future__ import annotations

import json
from pathlib import Path

from phoenix_nb.notebook.cell import _without_reasoning

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


def _steps(cycles: list[dict]) -> list[dict]:
    return [step for cycle in cycles for step in cycle["steps"]]


def test_reasoning_is_dropped_and_tool_calls_are_kept() -> None:
    cycles = json.loads(FIXTURE.read_text())["cycles"]
    before = _steps(cycles)
    assert any((s.get("item") or {}).get("type") == "reasoning" for s in before)
    after = _steps(_without_reasoning(cycles))
    assert not any((s.get("item") or {}).get("type") == "reasoning" for s in after)
    calls = [c["id"] for s in before for g in s.get("tool_groups", []) for c in g["calls"]]
    kept = [c["id"] for s in after for g in s.get("tool_groups", []) for c in g["calls"]]
    assert kept == calls
    assert [s for s in after if s["kind"] != "ai"] == [s for s in before if s["kind"] != "ai"]
