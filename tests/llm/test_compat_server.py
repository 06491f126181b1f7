"""An Anthropic-compatible server that is not Anthropic's (Ollama, llama.cpp, vLLM, a
LiteLLM proxy), through the real SDK: unknown model names work; a refused feature
costs one line and is not sent again; no models endpoint means the stated default;
no price means tokens only."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from phoenix_nb.core import prices as core_prices
from phoenix_nb.core.cycles import spending
from phoenix_nb.core.models import CONSERVATIVE, SMALLEST_KNOWN, model_info
from phoenix_nb.core.values import TextBlock, ToolUseBlock, Usage
from phoenix_nb.llm import capabilities
from phoenix_nb.llm.model_limits import ModelLimits
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.llm.stream import ProviderNotice
from phoenix_nb.runtime.settings import Settings, SettingsError
from phoenix_nb.testing import Turn, text, thinking, tool_use
from phoenix_nb.testing.compat_server import CompatServer

from .helpers import collect, request

LOCAL = "qwen3-coder:30b"  # a name no registry knows


@pytest.fixture
def compat() -> Iterator[CompatServer]:
    with CompatServer() as server:
        yield server


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


async def test_refused_caching_is_dropped_once_with_one_line(compat: CompatServer) -> None:
    compat.script(Turn([text("first")]), Turn([text("second")]))
    provider = AnthropicProvider(api_key="", base_url=compat.base_url)
    updates, outcome = await collect(provider, request(model=LOCAL))
    assert outcome.response is not None and outcome.response.content == (TextBlock("first"),)
    notices = [u.text for u in updates if isinstance(u, ProviderNotice)]
    assert notices == [capabilities.NOTICE["caching"]]
    assert compat.refused == ["caching"]
    # The next request goes without cache_control at once: no second refusal, no line.
    updates, outcome = await collect(provider, request("again", model=LOCAL))
    assert outcome.response is not None
    assert not [u for u in updates if isinstance(u, ProviderNotice)]
    assert compat.refused == ["caching"]
    assert all("cache_control" not in str(r.body) for r in compat.requests)
    assert provider.lacks(LOCAL) == ("caching",)
    await provider.aclose()


async def test_caching_taken_but_never_reported_is_judged_ignored_once() -> None:
    """A server that accepts cache_control and never reports a cache write or read (a
    LiteLLM proxy in front of vLLM): after two large prompts, one line, then no more
    cache_control, and `lacks` says so. Small prompts and a caching server are never
    judged."""
    big, small = Usage(input_tokens=9_000), Usage(input_tokens=900)
    with CompatServer(caching=True) as quiet:
        quiet.script(
            *(Turn([text(f"r{i}")], usage=u) for i, u in enumerate([small, big, big, big]))
        )
        provider = AnthropicProvider(api_key="", base_url=quiet.base_url)
        lines = []
        for _ in range(4):
            updates, outcome = await collect(provider, request(model=LOCAL))
            assert outcome.response is not None, outcome.failure
            lines.append([u.text for u in updates if isinstance(u, ProviderNotice)])
        assert lines == [[], [], [capabilities.IGNORED_NOTICE], []]
        sent = ["cache_control" in str(r.body) for r in quiet.requests]
        assert sent == [True, True, True, False]
        assert provider.lacks(LOCAL) == ("caching",)
        await provider.aclose()
    cached = Usage(input_tokens=9_000, cache_read_input_tokens=20_000)
    with CompatServer(caching=True) as caching:
        caching.script(*(Turn([text("ok")], usage=u) for u in [cached, big, big, big]))
        provider = AnthropicProvider(api_key="", base_url=caching.base_url)
        for _ in range(4):
            updates, _ = await collect(provider, request(model=LOCAL))
            assert not [u for u in updates if isinstance(u, ProviderNotice)]
        assert provider.lacks(LOCAL) == ()
        await provider.aclose()


async def test_refused_thinking_and_images_are_dropped(compat: CompatServer) -> None:
    with CompatServer(images=False) as server:
        server.script(Turn([text("I read your words.")]))
        provider = AnthropicProvider(api_key="", base_url=server.base_url)
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": _png()},
        }
        req = request(
            model=LOCAL,
            messages=[{"role": "user", "content": [{"type": "text", "text": "see"}, image]}],
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
        updates, outcome = await collect(provider, req)
        assert outcome.response is not None, outcome.failure
        assert sorted(server.refused) == ["caching", "images", "thinking"]
        notices = [u.text for u in updates if isinstance(u, ProviderNotice)]
        assert len(notices) == 3
        [sent] = server.requests
        assert sent.body.get("thinking") is None
        assert capabilities.IMAGE_LEFT_OUT in str(sent.body["messages"])
        assert '"image"' not in str(sent.body["messages"]).replace("'", '"')
        assert set(provider.lacks(LOCAL)) == {"caching", "thinking", "images"}
        await provider.aclose()


async def test_an_ordinary_400_naming_cache_control_turns_nothing_off(
    fake_anthropic,
) -> None:
    """Anthropic's own 'at most 4 breakpoints' names cache_control but refuses no
    feature: it is shown, and caching stays on."""
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    five = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": five} for i in range(5)]
    updates, outcome = await collect(
        provider, request(messages=[{"role": "user", "content": blocks}])
    )
    assert outcome.failure is not None and "maximum of 4" in outcome.failure.message
    assert not [u for u in updates if isinstance(u, ProviderNotice)]
    assert provider.lacks("claude-test") == ()
    await provider.aclose()


async def test_a_model_described_without_caching_is_never_sent_it(compat: CompatServer) -> None:
    tables = Settings(
        provider="anthropic",
        base_url=compat.base_url,
        models={LOCAL: {"supports": {"caching": False, "thinking": False}}},
    ).model_tables()
    compat.script(Turn([text("ok")]))
    provider = AnthropicProvider(api_key="", base_url=compat.base_url, specs=tables.specs)
    updates, outcome = await collect(
        provider, request(model=LOCAL, thinking={"type": "enabled", "budget_tokens": 1024})
    )
    assert outcome.response is not None
    assert compat.refused == [] and not [u for u in updates if isinstance(u, ProviderNotice)]
    await provider.aclose()


async def test_tool_calls_stream_from_an_unknown_model(compat: CompatServer) -> None:
    compat.script(Turn([text("Looking."), tool_use("bash", {"command": "ls"}, id="toolu_1")]))
    provider = AnthropicProvider(api_key="", base_url=compat.base_url)
    _, outcome = await collect(provider, request(model=LOCAL))
    assert outcome.response is not None
    assert outcome.response.content[1] == ToolUseBlock("toolu_1", "bash", {"command": "ls"})
    assert outcome.response.usage.cache_read_input_tokens == 0
    await provider.aclose()


async def test_no_models_endpoint_gives_the_stated_default(
    compat: CompatServer, tmp_path: Path
) -> None:
    provider = AnthropicProvider(api_key="", base_url=compat.base_url)
    info = await ModelLimits(tmp_path, provider, conservative=True).resolve(LOCAL)
    assert (info.context_window, info.max_output, info.source) == (
        CONSERVATIVE.context_window,
        CONSERVATIVE.max_output,
        "default",
    )
    # On Anthropic's own API an unknown id keeps REQ-BED-022's smallest window.
    assert model_info(LOCAL).context_window == SMALLEST_KNOWN.context_window
    await provider.aclose()


async def test_an_openai_style_model_list_gives_the_window(tmp_path: Path) -> None:
    with CompatServer(models={LOCAL: 65_536}) as server:
        provider = AnthropicProvider(api_key="", base_url=server.base_url)
        info = await ModelLimits(tmp_path, provider, conservative=True).resolve(LOCAL)
        assert (info.context_window, info.source) == (65_536, "models_api")
        await provider.aclose()


async def test_configured_limits_win(compat: CompatServer, tmp_path: Path) -> None:
    tables = Settings(
        models={LOCAL: {"context_window": 131_072, "max_output": 16_384}}
    ).model_tables()
    provider = AnthropicProvider(api_key="", base_url=compat.base_url)
    limits = ModelLimits(tmp_path, provider, conservative=True, specs=tables.specs)
    info = await limits.resolve(LOCAL)
    assert (info.context_window, info.max_output, info.source) == (131_072, 16_384, "configured")
    await provider.aclose()


def test_no_price_is_tokens_only_and_a_configured_price_is_used() -> None:
    from phoenix_nb.core.values import Usage

    history = [
        {"message_type": "user", "created_at": "1", "content": {"text": "hi"}},
        {
            "message_type": "agent",
            "created_at": "2",
            "content": {"blocks": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn"},
            "usage_data": {"input_tokens": 1_000_000, "output_tokens": 1_000_000},
        },
    ]
    unpriced = spending(history, LOCAL)
    assert unpriced["priced"] is False and unpriced["total"]["cost_usd"] is None
    prices = Settings(models={LOCAL: {"prices": {"input": 0.5, "output": 1.5}}}).model_tables()
    priced = spending(history, LOCAL, prices=prices.prices)
    assert priced["priced"] is True and priced["total"]["cost_usd"] == pytest.approx(2.0)
    cost = core_prices.cost(Usage(input_tokens=2_000_000), LOCAL, prices.prices)
    assert cost == pytest.approx(1.0)
    assert core_prices.cost(Usage(input_tokens=2_000_000), LOCAL) is None, "a value, not state"


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"context_window": "big"}, "whole number"),
        ({"context_window": -1}, "positive"),
        ({"prices": {"output": 1}}, "'input'"),
        ({"supports": {"vision": True}}, "supports"),
        ({"window": 1}, "unknown field"),
    ],
)
def test_bad_model_entries_name_the_problem(entry: dict, words: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings(models={LOCAL: entry}).model_tables()
    assert LOCAL in str(caught.value) and words in str(caught.value)


def test_provider_is_checked() -> None:
    with pytest.raises(SettingsError, match="provider must be one of"):
        Settings(provider="azure")


def test_bedrock_and_vertex_ids_find_claude_limits_and_prices() -> None:
    for name in (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5@20250929",
    ):
        assert model_info(name).context_window == 200_000
        assert core_prices.price_for(name) is core_prices.PRICES["claude-sonnet-4-5"]


async def test_thinking_blocks_still_stream_where_supported() -> None:
    with CompatServer(thinking=True, caching=True) as server:
        server.script(Turn([thinking("hmm"), text("done")]))
        provider = AnthropicProvider(api_key="", base_url=server.base_url)
        _, outcome = await collect(
            provider, request(model=LOCAL, thinking={"type": "enabled", "budget_tokens": 1024})
        )
        assert outcome.response is not None and server.refused == []
        await provider.aclose()


async def test_the_same_name_on_two_servers_keeps_two_windows(tmp_path: Path) -> None:
    with CompatServer(models={LOCAL: 65_536}) as a, CompatServer(models={LOCAL: 8_192}) as b:
        for server, window in ((a, 65_536), (b, 8_192)):
            provider = AnthropicProvider(api_key="", base_url=server.base_url)
            limits = ModelLimits(tmp_path, provider, conservative=True, scope=server.base_url)
            assert (await limits.resolve(LOCAL)).context_window == window
            assert limits.cached(LOCAL).context_window == window
            await provider.aclose()
