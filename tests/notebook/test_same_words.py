"""One wording everywhere: what a tool group did and what the agent is doing
read the same in the record the labextension draws, the HTML, the Markdown and the
plain text, because all of them take the words from `notebook/_render/view.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from phoenix_nb.notebook._render import view as v
from phoenix_nb.notebook.cell import decorate
from phoenix_nb.notebook.render import render_html, render_markdown, render_plain
from phoenix_nb.notebook.session import PhoenixConfig, Session

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def _groups(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        g
        for c in record["cycles"]
        for s in c["steps"]
        for g in s.get("tool_groups", [])
        if v.visible_calls(g)
    ]


def test_group_labels_and_state_words_are_the_same_in_every_rendering(
    record: dict[str, Any], tmp_path: Path
) -> None:
    decorated = decorate(record, Session(PhoenixConfig(), cwd=tmp_path))
    labels = [g["label"] for g in _groups(decorated)]
    assert labels == [v.group_title(g) for g in _groups(record)]
    assert "ran 3 commands" in labels and "edited src/calc.py +2 −1" in labels
    html_labels = [
        s.get_text() for s in BeautifulSoup(render_html(record), "html.parser").select(".phx-gname")
    ]
    plain = render_plain(record)
    markdown = render_markdown(record)
    for label in labels:
        flat = label.replace("`", "")
        assert flat in html_labels, label
        assert f"▸ {label}" in plain, label
        assert f"**{label}**" in markdown, label
    words = decorated["conversation"]["state"]["label"]
    assert words == "context full — run `%phoenix continue`"
    assert words in plain and words.replace("`", "\\`") in markdown
    assert [g.get("open") for g in _groups(decorated)] == [
        g["group"] == "write" for g in _groups(record)
    ]


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ({"name": "llm_requesting", "busy": True}, "thinking"),
        ({"name": "awaiting_mode_approval", "busy": True}, "waiting for your approval"),
        (
            {"name": "awaiting_mode_approval", "paused": True},
            "paused — run `%phoenix approve` or `%phoenix deny`",
        ),
        ({"name": "idle"}, "idle"),
    ],
)
def test_state_words(state: dict[str, Any], words: str) -> None:
    assert v.state_line(state) == words


def test_running_tool_is_named() -> None:
    record = {
        "cycles": [
            {
                "steps": [
                    {
                        "kind": "ai",
                        "tool_groups": [
                            {"group": "bash", "calls": [{"name": "bash", "result": None}]}
                        ],
                    }
                ]
            }
        ]
    }
    assert v.state_line({"name": "tool_executing"}, record) == "running bash"
