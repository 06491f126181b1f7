"""Real limits: the Models API's figures through the real SDK, cached next to the
store and refreshed rarely; the registry when the API cannot say; REQ-BED-022 for
models neither knows."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.core.models import SMALLEST_KNOWN, model_info
from phoenix_nb.llm.model_limits import CACHE_FILE, MAX_AGE, ModelLimits
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.runtime.harness import MODEL, phoenix_for, project_dir


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_the_models_api_limit_is_used_when_present(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.add_model("claude-sonnet-5-5", max_input_tokens=1_000_000, max_tokens=128_000)
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    clock = Clock()
    limits = ModelLimits(tmp_path, provider, clock=clock)
    info = await limits.resolve("claude-sonnet-5-5")
    assert (info.context_window, info.max_output, info.source) == (1_000_000, 128_000, "models_api")
    assert model_info("claude-sonnet-5-5").context_window == 200_000  # the registry differs
    assert fake_anthropic.model_requests == ["claude-sonnet-5-5"]
    assert (tmp_path / CACHE_FILE).exists()

    # Another kernel (a new ModelLimits on the same store) knows it without asking.
    again = ModelLimits(tmp_path, provider, clock=clock)
    assert (await again.resolve("claude-sonnet-5-5")).context_window == 1_000_000
    assert again.cached("claude-sonnet-5-5").context_window == 1_000_000
    assert len(fake_anthropic.model_requests) == 1

    # Refreshed rarely: only once the cached figures are older than MAX_AGE.
    fake_anthropic.add_model("claude-sonnet-5-5", max_input_tokens=2_000_000, max_tokens=128_000)
    clock.now += MAX_AGE + 1
    assert (await again.resolve("claude-sonnet-5-5")).context_window == 2_000_000
    assert len(fake_anthropic.model_requests) == 2
    await provider.aclose()


async def test_the_registry_is_the_fallback(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """The API does not know the model (404): registry figures, asked once a session."""
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    limits = ModelLimits(tmp_path, provider)
    info = await limits.resolve("claude-opus-4-1")
    assert info == model_info("claude-opus-4-1")
    assert info.source == "registry"
    await limits.resolve("claude-opus-4-1")
    # "Unknown to the API" is an answer: kept, so the next kernel does not ask again.
    await ModelLimits(tmp_path, provider).resolve("claude-opus-4-1")
    assert fake_anthropic.model_requests == ["claude-opus-4-1"]
    await provider.aclose()


async def test_a_fault_is_not_an_answer(tmp_path: Path) -> None:
    """Nothing listening: the registry now, and no cache entry, so the next kernel asks."""
    provider = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", connect_timeout=2)
    info = await ModelLimits(tmp_path, provider).resolve("claude-sonnet-5-5")
    assert info == model_info("claude-sonnet-5-5")
    assert not (tmp_path / CACHE_FILE).exists()
    await provider.aclose()


async def test_unknown_to_both_keeps_the_smallest_window(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-022 unchanged: a model neither the API nor the registry knows."""
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    info = await ModelLimits(tmp_path, provider).resolve("claude-imaginary-9")
    assert info.context_window == SMALLEST_KNOWN.context_window
    assert info.source == "fallback"
    await provider.aclose()


async def test_a_partial_answer_is_completed_by_the_registry(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.add_model("claude-haiku-4-5", max_input_tokens=None, max_tokens=32_000)
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    info = await ModelLimits(tmp_path, provider).resolve("claude-haiku-4-5")
    assert info.context_window == model_info("claude-haiku-4-5").context_window
    assert info.max_output == 32_000
    await provider.aclose()


async def test_no_key_means_no_request(
    fake_anthropic: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's own API without a key is not asked (the client is re-pointed at the
    fake only so that a request, were one made, would be seen)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    fake_anthropic.add_model("claude-sonnet-5-5", max_input_tokens=1_000_000, max_tokens=128_000)
    provider = AnthropicProvider(api_key="")
    provider._sdk_client = (await provider._client()).with_options(base_url=fake_anthropic.base_url)
    info = await ModelLimits(tmp_path, provider).resolve("claude-sonnet-5-5")
    assert info == model_info("claude-sonnet-5-5")
    assert fake_anthropic.model_requests == []
    await provider.aclose()


async def test_a_keyless_local_server_is_asked(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A base URL without a key is a local server: its models endpoint is asked."""
    fake_anthropic.add_model("qwen3-coder", max_input_tokens=65_536, max_tokens=8_192)
    provider = AnthropicProvider(api_key="", base_url=fake_anthropic.base_url)
    info = await ModelLimits(tmp_path, provider, conservative=True).resolve("qwen3-coder")
    assert (info.context_window, info.max_output, info.source) == (65_536, 8_192, "models_api")
    assert fake_anthropic.model_requests == ["qwen3-coder"]
    await provider.aclose()


async def test_a_corrupt_or_unwritable_cache_loses_nothing(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.add_model("claude-sonnet-5-5", max_input_tokens=1_000_000, max_tokens=128_000)
    (tmp_path / CACHE_FILE).write_text("{not json")
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    limits = ModelLimits(tmp_path, provider)
    assert limits.cached("claude-sonnet-5-5") == model_info("claude-sonnet-5-5")
    assert (await limits.resolve("claude-sonnet-5-5")).context_window == 1_000_000
    blocked = tmp_path / "a-file"  # a store root below a file cannot be written, even by root
    blocked.write_text("")
    info = await ModelLimits(blocked / "store", provider).resolve("claude-sonnet-5-5")
    assert info.context_window == 1_000_000
    await provider.aclose()


async def test_a_conversation_uses_the_api_limits_and_falls_back_without_them(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Through the runtime: the window the record shows, the thresholds and max_tokens."""
    fake_anthropic.script(Turn([text("a")]), Turn([text("b")]))
    async with phoenix_for(fake_anthropic, tmp_path / "offline") as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("hi")  # the API does not know the model: the registry's figures
        registry = model_info(MODEL)
        assert conv.payload()["context"]["window"] == registry.context_window
        assert fake_anthropic.requests[-1].body["max_tokens"] == registry.max_output

    fake_anthropic.add_model(MODEL, max_input_tokens=50_000, max_tokens=9_000)
    async with phoenix_for(fake_anthropic, tmp_path / "online") as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("hi")
        assert conv.payload()["context"]["window"] == 50_000
        assert fake_anthropic.requests[-1].body["max_tokens"] == 9_000
        assert (tmp_path / "online" / "store" / CACHE_FILE).exists()
