"""The text/markdown fallback: whole conversation, safe fences, readable on its own.

Structure is checked by rendering the Markdown with a CommonMark parser and
reading the resulting tree, the way GitHub or JupyterLab would see it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from phoenix_nb.notebook._render.markdown_html import markdown_to_html
from phoenix_nb.notebook.render import render_markdown

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def parsed(md: str) -> BeautifulSoup:
    return BeautifulSoup(markdown_to_html(md), "html.parser")


def words(s: str) -> str:
    """Text with Markdown backslash escapes removed and whitespace collapsed."""
    return " ".join(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", s).split())


def test_every_text_of_the_conversation_is_in_the_markdown(record: dict[str, Any]) -> None:
    md = words(render_markdown(record))
    expected: list[str] = [record["summary"]]
    for cycle in record["cycles"]:
        for step in cycle["steps"]:
            kind = step["kind"]
            if kind in ("user", "system"):
                expected.append(step["text"])
            elif kind == "ai" and step["item"]:
                expected.append(step["item"]["text"])
            elif kind == "approval":
                expected.append(step["reason"])
            elif kind == "error":
                expected.append(step["text"])
            elif kind == "sub_agents":
                for agent in step["agents"]:
                    expected += [agent["task"], agent["result"]]
            elif kind == "continuation":
                expected.append("Continuation summary")
    for text in expected:
        for line in text.split("\n"):
            assert words(line) in md, line


def test_headings_per_cycle_and_header_line(record: dict[str, Any]) -> None:
    soup = parsed(render_markdown(record))
    assert [h.get_text() for h in soup.find_all("h3")] == [
        "Request 1",
        "Request 2",
        "Request 3",
        "Request 4",
    ]
    first = soup.find("p").get_text()
    for part in ("brave-otter", "claude-sonnet-4-5", "Unrestricted", "~/project"):
        assert part in first


def test_user_text_is_quoted_and_ai_text_kept_as_markdown(record: dict[str, Any]) -> None:
    soup = parsed(render_markdown(record))
    quotes = [q.get_text() for q in soup.find_all("blockquote")]
    assert any("Why does add fail?" in q and "failure.png" in q for q in quotes)
    assert any("Also add a test please." in q for q in quotes)
    assert any(s.get_text() == "add" for s in soup.find_all("strong"))
    assert soup.find("code", class_="language-python").get_text() == "return a - b\n"


def test_tool_calls_are_list_items_with_code(record: dict[str, Any]) -> None:
    soup = parsed(render_markdown(record))
    items = [li for li in soup.find_all("li") if li.find("strong")]
    bash = [li for li in items if li.strong.get_text() == "bash"]
    assert bash[0].find("code").get_text() == "python -m pytest -q tests/test_calc.py"
    assert "exit 1" in bash[0].get_text()
    assert bash[0].find("pre") is not None, "the output belongs to its list item"


def test_diff_is_a_diff_fence(record: dict[str, Any]) -> None:
    soup = parsed(render_markdown(record))
    diff = soup.find("code", class_="language-diff")
    expected = record["cycles"][0]["steps"][6]["tool_groups"][0]["calls"][0]["result"]["display"][
        "diff"
    ]
    assert diff is not None
    # CommonMark drops the spaces of a whitespace-only line inside a list item; nothing else.
    assert [ln.rstrip() for ln in diff.get_text().split("\n")] == [
        ln.rstrip() for ln in expected.split("\n")
    ]


def test_long_output_is_cut_to_40_lines_with_a_note(record: dict[str, Any]) -> None:
    md = render_markdown(record)
    soup = parsed(md)
    out = next(p for p in soup.find_all("pre") if "test session starts" in p.get_text())
    assert len(out.get_text().rstrip("\n").split("\n")) == 40
    assert "… 23 more lines not shown" in md


def test_fences_survive_backticks_in_content(record: dict[str, Any]) -> None:
    nasty = "before\n```\n# not a heading\n````\nafter"
    call = record["cycles"][0]["steps"][2]["tool_groups"][1]["calls"][1]
    call["result"]["content"] = nasty
    call["result"]["display"]["command"] = "echo `date` ``x``"
    soup = parsed(render_markdown(record))
    assert soup.find("h1") is None
    assert any(p.get_text().rstrip("\n") == nasty for p in soup.find_all("pre"))
    assert any(c.get_text() == "echo `date` ``x``" for c in soup.find_all("code"))
    assert len(soup.find_all("h3")) == 4


def test_unclosed_fence_in_ai_text_does_not_swallow_the_rest(record: dict[str, Any]) -> None:
    record["cycles"][0]["steps"][-1]["item"]["text"] = "Here:\n```python\nprint(1)"
    soup = parsed(render_markdown(record))
    assert [h.get_text() for h in soup.find_all("h3")][1:] == [
        "Request 2",
        "Request 3",
        "Request 4",
    ]


def test_errors_approvals_and_mode_changes_are_bold_lines(record: dict[str, Any]) -> None:
    soup = parsed(render_markdown(record))
    bold = [s.get_text() for s in soup.find_all("strong")]
    assert "Mode changed to Unrestricted: the user approved write access." in bold
    assert "⏸ The agent asks for write access (Unrestricted mode):" in bold
    assert any(b.startswith("✓ write access approved") for b in bold)
    assert "⚠ Error — rate limited (rate_limit):" in bold
    assert "↻ retrying 2/3 in 4 s: rate limited" in bold
    md = render_markdown(record)
    assert "`%phoenix approve`" in md and "`%phoenix deny`" in md


def test_meter_line_and_warning(record: dict[str, Any]) -> None:
    md = render_markdown(record)
    assert "Context 182,000 / 200,000 tokens (91%)" in md
    assert "%phoenix continue" in md
    record["context"] = {"used": 1000, "window": 200000, "fraction": 0.005}
    record["conversation"]["state"] = {"name": "idle"}
    md = render_markdown(record)
    assert "Context 1,000 / 200,000 tokens (0%)" in md and "%phoenix continue" not in md


def test_sandbox_unavailable_in_header(record: dict[str, Any]) -> None:
    record["conversation"]["sandbox_available"] = False
    assert "sandbox unavailable" in render_markdown(record).split("\n")[0]


def test_tool_and_error_text_cannot_inject_html_or_markdown(record: dict[str, Any]) -> None:
    record["cycles"][1]["steps"][3]["text"] = "<b>x</b> **y** [z](http://e)"
    soup = parsed(render_markdown(record))
    card = next(p for p in soup.find_all("p") if "rate limited (rate_limit)" in p.get_text())
    assert "<b>x</b> **y** [z](http://e)" in card.get_text()
    assert card.find("a") is None
