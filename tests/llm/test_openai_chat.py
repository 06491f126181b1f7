"""Chat Completions through the real `openai` SDK against a fake of that wire format:
streamed text and tool-call arguments, parallel calls, images, usage with cached
tokens, errors in the same kinds as the Messages API, a cancel, and histories that
are valid for the API whatever the journal holds."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import random

import pytest
from PIL import Image

from phoenix_nb.core.values import ErrorKind, TextBlock, ToolUseBlock, Usage
from phoenix_nb.llm.openai_chat import OpenAIChatProvider, to_chat_messages
from phoenix_nb.llm.stream import ProviderNotice, TextDelta, ToolInputDelta, ToolUseStart
from phoenix_nb.testing import Fault, Turn, text, tool_use
from phoenix_nb.testing.fake_openai import FakeOpenAI, validate_chat_request
from tests.seeds import phoenix_seed

from .helpers import collect, request

MODEL = "gpt-test-unknown"


def provider(fake: FakeOpenAI) -> OpenAIChatProvider:
    return OpenAIChatProvider(base_url=fake.base_url, api_key="sk-test", stall_timeout=5)


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "blue").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


async def test_text_and_parallel_tool_calls_stream(fake: FakeOpenAI) -> None:
    fake.script(
        Turn(
            [
                text("Two at once.", chunk=4),
                tool_use("bash", {"command": "ls -la"}, id="call_a", chunk=5),
                tool_use("bash", {"command": "pwd"}, id="call_b", chunk=3),
            ],
            usage=Usage(input_tokens=100, output_tokens=20, cache_read_input_tokens=400),
        )
    )
    p = provider(fake)
    updates, outcome = await collect(p, request(model=MODEL))
    assert outcome.response is not None, outcome.failure
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "Two at once."
    starts = [u for u in updates if isinstance(u, ToolUseStart)]
    assert [(s.id, s.name) for s in starts] == [("call_a", "bash"), ("call_b", "bash")]
    pieces = [u for u in updates if isinstance(u, ToolInputDelta)]
    assert len(pieces) > 2, "arguments arrive in fragments"
    assert outcome.response.content == (
        TextBlock("Two at once."),
        ToolUseBlock("call_a", "bash", {"command": "ls -la"}),
        ToolUseBlock("call_b", "bash", {"command": "pwd"}),
    )
    assert outcome.response.stop_reason == "tool_use"
    usage = outcome.response.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (
        100,
        400,
        20,
    )
    [sent] = fake.requests
    assert sent.body["stream"] is True and sent.body["tools"][0]["function"]["name"] == "bash"
    await p.aclose()


async def test_a_whole_tool_round_goes_back_valid(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("Done.")]))
    p = provider(fake)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": _png()},
    }
    history = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "secret", "signature": "s"},
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "call_2", "name": "bash", "input": {"command": "id"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_2", "content": "uid=0"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [{"type": "text", "text": "a b"}, image],
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    _, outcome = await collect(p, request(model=MODEL, messages=history))
    assert outcome.response is not None, outcome.failure
    sent = fake.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "secret" not in json.dumps(sent)
    assert sent[3] == {"role": "tool", "tool_call_id": "call_2", "content": "uid=0"}
    assert sent[4]["content"].startswith("Error: a b")
    assert any(p.get("type") == "image_url" for p in sent[5]["content"])
    await p.aclose()


@pytest.mark.parametrize(
    ("fault", "kind", "retryable"),
    [
        (Fault.status(429, retry_after=3), ErrorKind.RATE_LIMIT, True),
        (Fault.status(500), ErrorKind.SERVER_ERROR, True),
        (Fault.status(400, message="bad"), ErrorKind.INVALID_REQUEST, False),
        (Fault.status(401), ErrorKind.AUTH, False),
        (
            Fault.status(400, message="This model's maximum context length is 8192 tokens"),
            ErrorKind.CONTEXT_EXHAUSTED,
            False,
        ),
        (Fault.drop_after(3), ErrorKind.NETWORK, True),
        (Fault.in_stream_error("server_error", after_events=2), ErrorKind.SERVER_ERROR, True),
        (Fault.eof_without_stop(), ErrorKind.NETWORK, True),
    ],
)
async def test_errors_map_to_the_same_kinds(
    fake: FakeOpenAI, fault: Fault, kind: ErrorKind, retryable: bool
) -> None:
    fake.script(fault)
    p = provider(fake)
    _, outcome = await collect(p, request(model=MODEL))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (kind, retryable)
    assert "sk-test" not in outcome.failure.message
    if fault.retry_after:
        assert outcome.failure.retry_after == 3
    await p.aclose()


async def test_a_stall_is_a_retryable_network_failure(fake: FakeOpenAI) -> None:
    fake.script(Fault.stall(30, after_events=2))
    p = OpenAIChatProvider(
        base_url=fake.base_url, api_key="sk-test", stall_timeout=0.5, timeout=_stall_timeout(0.5)
    )
    _, outcome = await collect(p, request(model=MODEL))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)
    await p.aclose()


def _stall_timeout(seconds: float):
    import httpx

    return httpx.Timeout(60, connect=5, read=seconds)


async def test_cancel_mid_stream_closes_the_connection(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("word " * 200, chunk=5, delay=0.05)]))
    p = provider(fake)
    seen = asyncio.Event()

    async def consume() -> None:
        async for update in p.stream(request(model=MODEL)):
            if isinstance(update, TextDelta):
                seen.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(seen.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake.wait_for_async(lambda f: any(e.kind == "disconnected" for e in f.events), 30)
    await p.aclose()


async def test_refused_images_become_a_line_of_text(fake: FakeOpenAI) -> None:
    fake.add_rule(
        lambda r: "image_url" in json.dumps(r.body),
        Fault.status(400, message="image input is not supported by this model"),
    )
    fake.add_rule(lambda r: True, Turn([text("ok")]))
    p = provider(fake)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": _png()},
    }
    req = request(model=MODEL, messages=[{"role": "user", "content": [image]}])
    updates, outcome = await collect(p, req)
    assert outcome.response is not None, outcome.failure
    assert [u for u in updates if isinstance(u, ProviderNotice)]
    assert "image_url" not in json.dumps(fake.requests[-1].body)
    assert p.lacks(MODEL) == ("thinking", "images")
    await p.aclose()


async def test_thinking_is_announced_once_and_not_sent(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("a")]), Turn([text("b")]))
    p = provider(fake)
    thinking = {"type": "enabled", "budget_tokens": 1024}
    first, _ = await collect(p, request(model=MODEL, thinking=thinking))
    second, _ = await collect(p, request(model=MODEL, thinking=thinking))
    assert len([u for u in first if isinstance(u, ProviderNotice)]) == 1
    assert not [u for u in second if isinstance(u, ProviderNotice)]
    assert all("thinking" not in r.body for r in fake.requests)
    await p.aclose()


async def test_complete_text(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("ranked: a, b")]))
    p = provider(fake)
    assert await p.complete_text(request(model=MODEL)) == "ranked: a, b"
    await p.aclose()


def test_every_translated_history_is_valid() -> None:
    """Random journals (calls answered in any order, some not at all, stray results,
    images, thinking) always translate into a history the API accepts."""
    seed = phoenix_seed()
    rng = random.Random(seed)
    print(f"PHOENIX_SEED={seed}")
    for _ in range(300):
        history: list[dict] = [{"role": "user", "content": "start"}]
        for _turn in range(rng.randint(1, 5)):
            ids = [f"call_{rng.randrange(10_000)}" for _ in range(rng.randint(0, 3))]
            blocks: list[dict] = [{"type": "text", "text": "t"}] if rng.random() < 0.7 else []
            if rng.random() < 0.3:
                blocks.insert(0, {"type": "thinking", "thinking": "x", "signature": "s"})
            blocks += [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids]
            history.append({"role": "assistant", "content": blocks})
            answered = [i for i in ids if rng.random() < 0.8]
            rng.shuffle(answered)
            results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in answered]
            if rng.random() < 0.2:
                results.append({"type": "tool_result", "tool_use_id": "stray", "content": "?"})
            if rng.random() < 0.5:
                results.append({"type": "text", "text": "more"})
            if results:
                history.append({"role": "user", "content": results})
        validate_chat_request({"model": MODEL, "messages": to_chat_messages("sys", history)})


async def test_no_key_for_openai_itself_is_an_auth_failure_sent_nowhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = OpenAIChatProvider()
    _, outcome = await collect(p, request(model=MODEL))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.AUTH, False)
    assert "OPENAI_API_KEY" in outcome.failure.message
    await p.aclose()
