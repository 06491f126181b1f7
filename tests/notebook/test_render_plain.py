"""The text/plain fallback: a compact transcript that still holds every message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.notebook.render import render_plain

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_every_user_and_ai_text_is_in_the_transcript(record: dict[str, Any]) -> None:
    out = render_plain(record)
    flat = " ".join(out.split())
    for cycle in record["cycles"]:
        for step in cycle["steps"]:
            texts = []
            if step["kind"] in ("user", "system", "error"):
                texts.append(step["text"])
            elif step["kind"] == "ai" and step["item"]:
                texts.append(step["item"]["text"])
            elif step["kind"] == "approval":
                texts.append(step["reason"])
            elif step["kind"] == "sub_agents":
                texts += [a["task"] for a in step["agents"]]
            for text in texts:
                assert " ".join(text.split()) in flat, text
    assert " ".join(record["summary"].split()) in flat


def test_transcript_is_compact(record: dict[str, Any]) -> None:
    out = render_plain(record)
    lines = out.splitlines()
    assert lines[0] == (
        "phoenix · brave-otter · claude-sonnet-4-5 · Unrestricted · "
        "context full — run `%phoenix continue`"
    )
    assert [ln for ln in lines if ln.startswith("── request")] == [
        f"── request {n} ──" for n in (1, 2, 3, 4)
    ]
    assert "  $ python -m pytest -q tests/test_calc.py  [exit 1]" in lines
    assert "    │ … 55 more lines" in lines
    assert "▸ edited src/calc.py +2 −1" in lines  # what the group did
    assert "    +    return a + b" in lines  # and the patch itself
    assert "  $ ls -la  [running]" in lines
    assert len(lines) < 110


def test_status_lines(record: dict[str, Any]) -> None:
    out = render_plain(record)
    assert "↻ retrying 2/3 in 4 s: rate limited (429 Too Many Requests)" in out
    assert "⏸ The agent asks for write access (Unrestricted mode):\n  Approving switches" in out
    assert "  The agent's reason, in its own words:\n  | Write NOTES.md in the project root" in out
    assert "%phoenix approve" in out and "%phoenix deny" in out
    assert "context 182,000 / 200,000 tokens (91%) ⚠" in out
    assert "[completed]" in out and "[interrupted]" in out and "[stopped by an error]" in out
