"""`c.Phoenix.show_thinking = False` keeps the model's reasoning out of the record.

Through the notebook's public `decorate` (what every cell shows is decorated by it)
with the setting on and off: only the reasoning differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from phoenix_nb.notebook.cell import decorate
from phoenix_nb.notebook.render import render_plain
from phoenix_nb.notebook.session import PhoenixConfig, Session

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


def _steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for cycle in record["cycles"] for step in cycle["steps"]]


def _reasoning(step: dict[str, Any]) -> bool:
    return (step.get("item") or {}).get("type") == "reasoning"


def test_reasoning_is_dropped_and_tool_calls_are_kept(tmp_path: Path) -> None:
    record = json.loads(FIXTURE.read_text())
    shown = decorate(record, Session(PhoenixConfig(show_thinking=True), cwd=tmp_path))
    hidden = decorate(record, Session(PhoenixConfig(show_thinking=False), cwd=tmp_path))
    before, after = _steps(shown), _steps(hidden)
    thoughts = [s["item"]["text"] for s in before if _reasoning(s)]
    assert thoughts
    assert not any(_reasoning(s) for s in after)
    calls = [c["id"] for s in before for g in s.get("tool_groups", []) for c in g["calls"]]
    kept = [c["id"] for s in after for g in s.get("tool_groups", []) for c in g["calls"]]
    assert kept == calls
    assert [s for s in after if s["kind"] != "ai"] == [s for s in before if s["kind"] != "ai"]
    assert thoughts[0].strip() in render_plain(shown)
    assert thoughts[0].strip() not in render_plain(hidden)
