"""Cost and citations as the labextension draws them, in real JupyterLab and Chromium.

The record's `usage` shows under the meter in the Python renderers' wording
(dollars when priced, tokens only otherwise), and text citations are numbered
footnote links where only http(s) targets become links.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.lab import LabPage, load_fixture, record_output, write_notebook

pytestmark = pytest.mark.browser


def _usage(priced: bool) -> dict[str, Any]:
    part = {
        "input_tokens": 2000,
        "output_tokens": 500,
        "cache_write_tokens": 10000,
        "cache_read_tokens": 90000,
        "cache_hit_share": 0.8824,
        "cost_usd": 0.061 if priced else None,
        "responses": 1,
    }
    total = {**part, "cost_usd": 0.122 if priced else None, "responses": 2}
    return {"priced": priced, "turn": part, "total": total}


def _record(priced: bool) -> dict[str, Any]:
    record = copy.deepcopy(load_fixture("sample_record.json"))
    record["usage"] = _usage(priced)
    record["cycles"][0]["steps"].append(
        {
            "kind": "ai",
            "item": {
                "type": "assistant",
                "text": "Paris is the capital.",
                "citations": [
                    {"url": "https://example.org/paris", "title": "Paris", "cited_text": "x"},
                    {"url": "javascript:alert(1)", "title": "bad link", "cited_text": "y"},
                ],
            },
            "tool_groups": [],
        }
    )
    return record


def _open(lab: LabPage, name: str, record: dict[str, Any]) -> None:
    write_notebook(lab.server.root, name, [("%%phoenix\nq", [record_output(record, "", "r")])])
    lab.open_notebook(name)
    lab.page.locator(".jp-PhoenixConversation > *").first.wait_for(timeout=60_000)


def test_cost_line_and_footnote_links(lab: LabPage) -> None:
    _open(lab, "cost.ipynb", _record(priced=True))
    page = lab.page
    cost = page.locator("[data-phoenix-cost]")
    expect(cost).to_have_text("this turn $0.06 · conversation $0.12 · 88% cache hits")
    notes = page.locator("[data-phoenix-citations] li")
    expect(notes).to_have_count(2)
    link = notes.nth(0).locator("a")
    expect(link).to_have_attribute("href", "https://example.org/paris")
    expect(link).to_have_text("Paris")
    expect(notes.nth(1).locator("a")).to_have_count(0)  # javascript: is not a link
    expect(notes.nth(1)).to_have_text("bad link")


def test_unknown_model_shows_tokens_not_a_price(lab: LabPage) -> None:
    _open(lab, "cost-unknown.ipynb", _record(priced=False))
    cost = lab.page.locator("[data-phoenix-cost]")
    expect(cost).to_contain_text("102.0k in / 500 out tokens")
    expect(cost).to_contain_text("price unknown")
    expect(cost).not_to_contain_text("$")


def test_a_model_served_elsewhere_says_by_whom_and_what_it_goes_without(lab: LabPage) -> None:
    record = _record(priced=False)
    record["conversation"].update(provider="openai", lacks=["thinking", "images"])
    _open(lab, "cost-served.ipynb", record)
    facts = lab.page.locator(".jp-Phoenix-facts")
    expect(facts).to_contain_text("via openai · without thinking, images")
