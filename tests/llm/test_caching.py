"""Prompt caching: markers on every request, and a fake that caches as the API does.

The fake's behaviour is the documented one (prefix match up to a breakpoint,
20-block lookback, minimum cacheable length, TTL, at most four breakpoints);
the provider's markers are judged by what the fake then bills.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.testing import FakeAnthropic, Turn, text

from .helpers import BASH_TOOL, collect, request

BIG_SYSTEM = "You are a careful agent. " * 400  # ~2,500 tokens: above every minimum


def provider_for(fake: FakeAnthropic, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(api_key="k", base_url=fake.base_url, **kwargs)


def history(rounds: int) -> list[dict[str, Any]]:
    """A tool-using conversation of `rounds` rounds (2 blocks each way per round)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {i}"},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"n": i}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}],
            }
        )
    return messages


def markers(body: dict[str, Any]) -> list[tuple[int, int, Any]]:
    return [
        (m, b, block["cache_control"])
        for m, message in enumerate(body["messages"])
        if isinstance(message["content"], list)
        for b, block in enumerate(message["content"])
        if "cache_control" in block
    ]


async def test_every_request_carries_a_cache_marker(fake_anthropic: FakeAnthropic) -> None:
    """Streamed and helper (non-streamed) requests alike; the default lifetime is 1h."""
    fake_anthropic.script(Turn([text("a")]), Turn([text("b")]))
    provider = provider_for(fake_anthropic)
    await collect(provider)
    await provider.complete_text(request("rank these"))
    for req in fake_anthropic.requests:
        assert req.body["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    await provider.aclose()


@pytest.mark.parametrize(
    ("ttl", "marker"), [("5m", {"type": "ephemeral"}), ("1h", {"type": "ephemeral", "ttl": "1h"})]
)
async def test_cache_ttl_setting(fake_anthropic: FakeAnthropic, ttl: str, marker: Any) -> None:
    fake_anthropic.script(Turn([text("a")]))
    provider = provider_for(fake_anthropic, cache_ttl=ttl)
    await collect(provider)
    assert fake_anthropic.requests[-1].body["cache_control"] == marker
    await provider.aclose()


def test_a_bad_cache_ttl_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="5m, 1h"):
        AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", cache_ttl="10m")


async def test_growing_history_is_written_once_then_read(fake_anthropic: FakeAnthropic) -> None:
    provider = provider_for(fake_anthropic)
    usages = []
    for rounds in range(1, 5):
        fake_anthropic.script(Turn([text("ok")]))
        _, outcome = await collect(provider, request(system=BIG_SYSTEM, messages=history(rounds)))
        assert outcome.response is not None
        usages.append(outcome.response.usage)
    first = usages[0]
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_input_tokens > 2000  # system + tools + history written
    assert first.cache_creation_1h_input_tokens == first.cache_creation_input_tokens
    for before, after in itertools.pairwise(usages):
        prompt = before.input_tokens + before.cache_creation_input_tokens
        prompt += before.cache_read_input_tokens
        assert after.cache_read_input_tokens == prompt  # the whole previous prompt is a hit
        assert after.cache_creation_input_tokens < 100  # only the new round is written
    await provider.aclose()


async def test_a_round_adding_more_than_20_blocks_gets_a_second_breakpoint(
    fake_anthropic: FakeAnthropic,
) -> None:
    provider = provider_for(fake_anthropic)
    fake_anthropic.script(Turn([text("ok")]), Turn([text("ok")]))
    await collect(provider, request(system=BIG_SYSTEM, messages=history(2)))
    await collect(provider, request(system=BIG_SYSTEM, messages=history(14)))  # +48 blocks
    first, second = fake_anthropic.requests
    assert markers(first.body) == []  # the automatic breakpoint suffices
    # The explicit breakpoint sits on the block where the previous request ended.
    assert markers(second.body) == [(4, 0, {"type": "ephemeral", "ttl": "1h"})]
    billed = fake_anthropic.billing(1)
    previous = fake_anthropic.billing(0)
    assert billed is not None and previous is not None
    assert billed.cache_read_input_tokens == previous.total
    # Without the second breakpoint the 20-block lookback misses: everything is written again.
    fake_anthropic.cache.clear()
    fake_anthropic.script(Turn([text("ok")]), Turn([text("ok")]))
    await collect(provider_for(fake_anthropic), request(system=BIG_SYSTEM, messages=history(2)))
    forgetful = provider_for(fake_anthropic)  # never saw the request above: automatic only
    await collect(forgetful, request(system=BIG_SYSTEM, messages=history(14)))
    assert markers(fake_anthropic.requests[-1].body) == []
    missed = fake_anthropic.billing(len(fake_anthropic.requests) - 1)
    assert missed is not None and missed.cache_read_input_tokens == 0
    await provider.aclose()
    await forgetful.aclose()


async def test_system_and_tools_changes_miss_the_cache(fake_anthropic: FakeAnthropic) -> None:
    """The prefix is tools, then system, then messages: a changed tool misses it all."""
    provider = provider_for(fake_anthropic)
    for _ in range(3):
        fake_anthropic.script(Turn([text("ok")]))
    await collect(provider, request(system=BIG_SYSTEM, messages=history(1)))
    await collect(provider, request(system=BIG_SYSTEM, messages=history(1)))
    changed = {**BASH_TOOL, "description": "run a command (now Unrestricted)"}
    await collect(provider, request(system=BIG_SYSTEM, messages=history(1), tools=[changed]))
    same, different = fake_anthropic.billing(1), fake_anthropic.billing(2)
    assert same is not None and same.cache_read_input_tokens == same.total
    assert different is not None and different.cache_read_input_tokens == 0
    await provider.aclose()


async def test_short_prompts_are_not_cached(fake_anthropic: FakeAnthropic) -> None:
    """Below the minimum cacheable length nothing is written (and nothing is charged extra)."""
    provider = provider_for(fake_anthropic)
    fake_anthropic.script(Turn([text("ok")]), Turn([text("ok")]))
    _, a = await collect(provider, request(tools=[]))
    _, b = await collect(provider, request(tools=[]))
    for outcome in (a, b):
        assert outcome.response is not None
        usage = outcome.response.usage
        assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0
    await provider.aclose()


@pytest.mark.parametrize(("ttl", "idle", "hit"), [("5m", 301, False), ("1h", 301, True)])
async def test_entries_expire_after_their_ttl(
    fake_anthropic: FakeAnthropic, ttl: str, idle: float, hit: bool
) -> None:
    """A person reading between two cells for five minutes loses a 5m cache, not a 1h one."""
    provider = provider_for(fake_anthropic, cache_ttl=ttl)
    fake_anthropic.script(Turn([text("ok")]), Turn([text("ok")]))
    await collect(provider, request(system=BIG_SYSTEM, messages=history(1)))
    fake_anthropic.cache.advance(idle)
    _, outcome = await collect(provider, request(system=BIG_SYSTEM, messages=history(1)))
    assert outcome.response is not None
    assert (outcome.response.usage.cache_read_input_tokens > 0) is hit
    await provider.aclose()


async def test_a_hit_refreshes_the_entry(fake_anthropic: FakeAnthropic) -> None:
    provider = provider_for(fake_anthropic, cache_ttl="5m")
    for _ in range(3):
        fake_anthropic.script(Turn([text("ok")]))
    await collect(provider, request(system=BIG_SYSTEM))
    fake_anthropic.cache.advance(200)
    await collect(provider, request(system=BIG_SYSTEM))
    fake_anthropic.cache.advance(200)  # 400 s after the write, 200 s after the read
    _, outcome = await collect(provider, request(system=BIG_SYSTEM))
    assert outcome.response is not None and outcome.response.usage.cache_read_input_tokens > 0
    await provider.aclose()


async def test_the_fake_refuses_markers_the_api_refuses(fake_anthropic: FakeAnthropic) -> None:
    provider = provider_for(fake_anthropic, cache_ttl=None)
    five = {"type": "ephemeral"}
    hour = {"type": "ephemeral", "ttl": "1h"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": five} for i in range(5)]
    _, outcome = await collect(provider, request(messages=[{"role": "user", "content": blocks}]))
    assert outcome.failure is not None and "maximum of 4" in outcome.failure.message
    order = [
        {"type": "text", "text": "a", "cache_control": five},
        {"type": "text", "text": "b", "cache_control": hour},
    ]
    _, outcome = await collect(provider, request(messages=[{"role": "user", "content": order}]))
    assert outcome.failure is not None and "ttl='1h'" in outcome.failure.message
    await provider.aclose()
