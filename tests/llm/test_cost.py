"""Cost you can see: the price table applied to real usage, shown by every renderer;
a model without a known price shows tokens only; citations become footnote links."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.core.prices import PRICES, cost, format_usd, price_for, spend
from phoenix_nb.core.values import Usage
from phoenix_nb.notebook.render import render_html, render_markdown, render_plain
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use
from tests.runtime.harness import phoenix_for, project_dir

pytestmark = pytest.mark.timeout(60)

# One response of a known shape: 2,000 fresh input, 500 output, 10,000 written to a
# 1-hour cache (4,000 of them at the 5-minute rate), 90,000 read from the cache.
USAGE = Usage(
    input_tokens=2_000,
    output_tokens=500,
    cache_creation_input_tokens=10_000,
    cache_read_input_tokens=90_000,
    cache_creation_1h_input_tokens=6_000,
)


def test_cost_arithmetic_for_a_known_usage() -> None:
    # claude-sonnet-5-5: $2 in, $10 out, $2.50 5m write, $4 1h write, $0.20 read per MTok.
    expected = (2_000 * 2 + 500 * 10 + 4_000 * 2.50 + 6_000 * 4 + 90_000 * 0.20) / 1e6
    assert cost(USAGE, "claude-sonnet-5-5") == pytest.approx(expected)
    assert cost(USAGE, "claude-sonnet-5-5-20260601") == pytest.approx(expected)  # dated id
    total = spend([USAGE, USAGE], "claude-sonnet-5-5")
    assert total.cost_usd == pytest.approx(2 * expected)
    assert total.cache_hit_share == pytest.approx(90_000 / 102_000)


def test_long_prompts_switch_the_whole_request_to_the_long_rate() -> None:
    short = Usage(input_tokens=50_000, output_tokens=1_000)
    long = Usage(input_tokens=50_000, output_tokens=1_000, cache_read_input_tokens=60_000)
    assert cost(short, "claude-haiku-5-5") == pytest.approx((50_000 * 0.10 + 1_000 * 0.50) / 1e6)
    assert cost(long, "claude-haiku-5-5") == pytest.approx(
        (50_000 * 0.50 + 1_000 * 2.50 + 60_000 * 0.05) / 1e6
    )


def test_every_priced_model_has_consistent_cache_rates() -> None:
    """A typo in the table shows: writes cost more than input, reads less."""
    for name, price in PRICES.items():
        for rates in filter(None, (price.base, price.long)):
            assert rates.cache_write_5m >= rates.input, name
            assert rates.cache_write_1h >= rates.cache_write_5m, name
            assert 0 < rates.cache_read < rates.input, name
            assert rates.output > rates.input, name


def test_unknown_models_have_no_price() -> None:
    assert price_for("claude-imaginary-9") is None
    assert cost(USAGE, "claude-imaginary-9") is None
    assert spend([USAGE], "claude-imaginary-9").cost_usd is None
    assert format_usd(None) == ""


async def test_the_record_and_every_renderer_show_turn_and_total_cost(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(Turn([text("one")], usage=USAGE), Turn([text("two")], usage=USAGE))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("first")
        await conv.run("second")
        record = conv.payload()
    one = cost(USAGE, "claude-sonnet-5-5")
    assert one is not None
    usage = record["usage"]
    assert usage["priced"] is True
    assert usage["turn"]["cost_usd"] == pytest.approx(one)
    assert usage["total"]["cost_usd"] == pytest.approx(2 * one)
    assert usage["total"]["cache_hit_share"] == pytest.approx(90_000 / 102_000, abs=1e-4)
    line = f"this turn {format_usd(one)} · conversation {format_usd(2 * one)} · 88% cache hits"
    assert line in render_plain(record)
    assert line in render_html(record)
    assert line[1:] in render_markdown(record)  # capitalised there
    assert "data-phoenix-cost" in render_html(record)


async def test_an_unknown_model_shows_tokens_never_a_price(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(Turn([text("hello")], usage=USAGE))
    async with phoenix_for(fake_anthropic, tmp_path, model="claude-imaginary-9") as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("hi")
        record = conv.payload()
    assert record["usage"]["priced"] is False
    assert record["usage"]["total"]["cost_usd"] is None
    for rendered in (render_plain(record), render_markdown(record), render_html(record)):
        assert "102.0k in / 500 out tokens" in rendered
        assert "price unknown" in rendered
        line = next(ln for ln in rendered.splitlines() if "price unknown" in ln)
        assert "$" not in line


async def test_citations_are_footnote_links_in_every_renderer(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    cite = {
        "type": "web_search_result_location",
        "url": "https://example.org/a b<script>",
        "title": "Example <b>source</b>",
        "cited_text": "quoted words",
    }
    hostile = {**cite, "url": "javascript:alert(1)", "title": "bad"}
    fake_anthropic.script(Turn([text("Claimed fact.", citations=[cite, hostile])]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("cite it")
        record = conv.payload()
    html = render_html(record)
    assert 'href="https://example.org/a%20b%3Cscript%3E"' in html
    assert "Example &lt;b&gt;source&lt;/b&gt;" in html
    assert "javascript:" not in html
    assert '<li value="2">bad</li>' in html
    md = render_markdown(record)
    assert r"[1] [Example \<b\>source\</b\>](<https://example.org/a%20b%3Cscript%3E>)" in md
    assert "javascript:" not in md
    plain = render_plain(record)
    assert "[1] Example <b>source</b> <https://example.org/a%20b%3Cscript%3E>" in plain
    assert "[2] bad" in plain


async def test_sub_agents_spend_counts_in_the_conversation(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    def is_parent(req: FakeRequest) -> bool:
        return "spawn_agents" in {t["name"] for t in req.body.get("tools", [])}

    small = Usage(input_tokens=1_000, output_tokens=100)
    child = Turn([tool_use("submit_result", {"result": "done", "success": True})], usage=USAGE)
    fake_anthropic.add_rule(lambda r: not is_parent(r), child)
    spawn = Turn([tool_use("spawn_agents", {"tasks": [{"task": "look"}]})], usage=small)
    fake_anthropic.script(spawn)
    fake_anthropic.add_rule(is_parent, Turn([text("The helper is done.")], usage=small))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("delegate")
        record = conv.payload()
    both = cost(small, "claude-sonnet-5-5")
    mine = cost(USAGE, "claude-sonnet-5-5")
    assert both is not None and mine is not None
    assert record["usage"]["total"]["responses"] == 3
    assert record["usage"]["total"]["cost_usd"] == pytest.approx(2 * both + mine)
    assert record["usage"]["turn"]["cost_usd"] == pytest.approx(2 * both + mine)
