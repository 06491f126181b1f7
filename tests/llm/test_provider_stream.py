"""The provider over the real SDK against the fake server: successful responses."""

from __future__ import annotations

import json

import pytest

from phoenix_nb.core.values import TextBlock, ThinkingBlock, ToolUseBlock, Usage
from phoenix_nb.llm.errors import LlmCallError
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.llm.stream import TextDelta, ThinkingDelta, ToolInputDelta, ToolUseStart
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text, thinking, tool_use

from .helpers import collect, request

KEY = "sk-ant-test-0123456789"


@pytest.fixture
def provider(fake_anthropic: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=fake_anthropic.base_url, stall_timeout=5)


async def test_streamed_text_arrives_in_chunks_and_is_assembled(fake_anthropic, provider) -> None:
    body = "The quick brown fox jumps over the lazy dog. " * 4
    fake_anthropic.script(Turn([text(body, chunk=10)]))
    updates, outcome = await collect(provider)
    deltas = [u for u in updates if isinstance(u, TextDelta)]
    assert len(deltas) == -(-len(body) // 10)
    assert "".join(d.text for d in deltas) == body
    assert outcome.response is not None
    assert outcome.response.content == (TextBlock(body),)
    assert outcome.response.stop_reason == "end_turn"


async def test_text_then_two_tool_uses(fake_anthropic, provider) -> None:
    fake_anthropic.script(
        Turn(
            [
                text("Let me look."),
                tool_use("bash", {"command": "ls -la"}, id="toolu_a"),
                tool_use(
                    "patch", {"path": "x.py", "edits": [{"old": "a", "new": "b"}]}, id="toolu_b"
                ),
            ]
        )
    )
    updates, outcome = await collect(provider)
    starts = [u for u in updates if isinstance(u, ToolUseStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (1, "toolu_a", "bash"),
        (2, "toolu_b", "patch"),
    ]
    fragments = [u.partial_json for u in updates if isinstance(u, ToolInputDelta) and u.index == 2]
    assert len(fragments) > 1, "input arrives as partial JSON"
    assert json.loads("".join(fragments))["path"] == "x.py"
    assert outcome.response is not None
    assert outcome.response.stop_reason == "tool_use"
    assert outcome.response.content == (
        TextBlock("Let me look."),
        ToolUseBlock("toolu_a", "bash", {"command": "ls -la"}),
        ToolUseBlock("toolu_b", "patch", {"path": "x.py", "edits": [{"old": "a", "new": "b"}]}),
    )


async def test_thinking_streams_and_keeps_signature(fake_anthropic, provider) -> None:
    fake_anthropic.script(
        Turn(
            [thinking("First, consider the files.", signature="sig-123", chunk=5), text("Answer.")]
        )
    )
    updates, outcome = await collect(
        provider, request(thinking={"type": "enabled", "budget_tokens": 1024})
    )
    assert (
        "".join(u.text for u in updates if isinstance(u, ThinkingDelta))
        == "First, consider the files."
    )
    assert outcome.response is not None
    assert outcome.response.content == (
        ThinkingBlock("First, consider the files.", "sig-123"),
        TextBlock("Answer."),
    )
    assert fake_anthropic.requests[-1].body["thinking"] == {
        "type": "enabled",
        "budget_tokens": 1024,
    }


async def test_usage_accounting_includes_cache_tokens_and_cumulative_delta(
    fake_anthropic, provider
) -> None:
    """REQ-BED-012: message_start usage plus the cumulative message_delta usage."""
    usage = Usage(
        input_tokens=120,
        output_tokens=345,
        cache_creation_input_tokens=1000,
        cache_read_input_tokens=5000,
    )
    fake_anthropic.script(Turn([text("ok")], usage=usage))
    _, outcome = await collect(provider)
    assert outcome.response is not None
    assert outcome.response.usage == usage
    assert outcome.response.usage.context_tokens == 120 + 345 + 1000 + 5000


async def test_request_carries_system_tools_max_tokens_and_messages(
    fake_anthropic, provider
) -> None:
    fake_anthropic.script(Turn([text("ok")]))
    req = request("hello there", max_tokens=777)
    await collect(provider, req)
    body = fake_anthropic.requests[-1].body
    assert body["system"] == "You are a test."
    assert [t["name"] for t in body["tools"]] == ["bash", "patch"]
    assert body["max_tokens"] == 777
    assert body["messages"] == req.messages
    assert body["stream"] is True


@pytest.mark.parametrize(
    ("raw", "stop_reason", "needle"),
    [
        ('{"command": "ls', "max_tokens", "max_tokens"),
        ('{"command": ls}', "tool_use", "not valid JSON"),
        ("[1, 2]", "tool_use", "not a JSON object"),
    ],
)
async def test_unusable_tool_input_becomes_input_error_not_failure(
    fake_anthropic, provider, raw, stop_reason, needle
) -> None:
    fake_anthropic.script(
        Turn(
            [text("Running."), tool_use("bash", id="toolu_x", raw_json=raw)],
            stop_reason=stop_reason,
        )
    )
    _, outcome = await collect(provider)
    assert outcome.response is not None
    block = outcome.response.content[1]
    assert isinstance(block, ToolUseBlock)
    assert block.input == {}
    assert block.input_error is not None and needle in block.input_error
    assert outcome.response.content[0] == TextBlock("Running.")


async def test_tool_without_input_gets_empty_object(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([tool_use("bash", {}, id="toolu_e")]))
    _, outcome = await collect(provider)
    assert outcome.response is not None
    assert outcome.response.content == (ToolUseBlock("toolu_e", "bash", {}),)


async def test_empty_end_turn_is_a_response_not_an_error(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([]))
    _, outcome = await collect(provider)
    assert outcome.response is not None
    assert outcome.response.content == ()
    assert outcome.response.stop_reason == "end_turn"


async def test_key_and_base_url_from_environment(fake_anthropic, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    fake_anthropic.api_key = KEY  # the fake now rejects any other key
    fake_anthropic.script(Turn([text("from env")]))
    _, outcome = await collect(AnthropicProvider())
    assert outcome.response is not None and outcome.response.content == (TextBlock("from env"),)


async def test_key_never_shown_in_repr_or_recorded_headers(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([text("ok")]))
    await collect(provider)
    assert KEY not in repr(provider)
    assert "api_key=set" in repr(provider)
    headers = fake_anthropic.requests[-1].headers
    assert headers["authorization"] == "[redacted]"
    assert KEY not in json.dumps(headers)


async def test_sdk_retries_are_off(fake_anthropic, provider) -> None:
    """REQ-BED-006: retries belong to the state machine, so one failure = one request."""
    fake_anthropic.script(Fault.status(500), Turn([text("second")]))
    _, outcome = await collect(provider)
    assert outcome.failure is not None
    assert len(fake_anthropic.requests) == 1


async def test_complete_text_returns_text_and_raises_clear_error(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([text("ranked: a, b")]), Fault.status(401))
    assert await provider.complete_text(request()) == "ranked: a, b"
    assert fake_anthropic.requests[0].body.get("stream") in (None, False)
    with pytest.raises(LlmCallError) as info:
        await provider.complete_text(request())
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert info.value.failure.retryable is False
