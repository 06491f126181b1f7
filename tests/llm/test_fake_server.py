"""The fake Messages API itself: validation like the real API, rules, recording, lifecycle."""

from __future__ import annotations

import anthropic
import httpx2
import pytest

from phoenix_nb.core.values import ErrorKind, TextBlock
from phoenix_nb.llm.images import image_block, prepare_image
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text

from .helpers import collect, request

KEY = "sk-ant-fake-key-42"


@pytest.fixture
def provider(fake_anthropic: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=fake_anthropic.base_url)


def _tool_history(results: list[dict]) -> list[dict]:
    return [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "pwd"}},
            ],
        },
        {"role": "user", "content": results},
    ]


def _result(tid: str) -> dict:
    return {"type": "tool_result", "tool_use_id": tid, "content": "ok"}


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        (_tool_history([_result("toolu_1")]), "without `tool_result`"),
        (
            _tool_history([_result("toolu_1"), _result("toolu_2"), _result("toolu_2")]),
            "more than one",
        ),
        (_tool_history([_result("toolu_1"), _result("toolu_9")]), "unexpected `tool_use_id`"),
        (
            _tool_history([{"type": "text", "text": "hi"}, _result("toolu_1"), _result("toolu_2")]),
            "must come first",
        ),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "alternate"),
        ([{"role": "assistant", "content": "a"}], "first message"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "@@@"},
                        }
                    ],
                }
            ],
            "invalid base64",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/bmp", "data": "AAAA"},
                        }
                    ],
                }
            ],
            "media_type",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "rm", "input": {}}],
                },
                {"role": "user", "content": [_result("t")]},
            ],
            "unknown tool",
        ),
    ],
)
async def test_invalid_history_gets_400_like_the_api(
    fake_anthropic, provider, messages, needle
) -> None:
    fake_anthropic.script(Turn([text("should not be served")]))
    _, outcome = await collect(provider, request(messages=messages))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.status) == (ErrorKind.INVALID_REQUEST, 400)
    assert needle in outcome.failure.message
    assert fake_anthropic.pending_replies == 1, "the scripted reply was not consumed"


async def test_valid_tool_history_and_image_are_accepted(
    fake_anthropic, provider, tmp_path
) -> None:
    from PIL import Image

    Image.new("RGB", (8, 8), "red").save(tmp_path / "dot.png")
    image = image_block(prepare_image(tmp_path / "dot.png"))
    messages = _tool_history(
        [_result("toolu_1"), _result("toolu_2"), image, {"type": "text", "text": "see"}]
    )
    fake_anthropic.script(Turn([text("fine")]))
    _, outcome = await collect(provider, request(messages=messages))
    assert outcome.response is not None and outcome.response.content == (TextBlock("fine"),)
    assert fake_anthropic.requests[-1].last_user_text == "see"


async def test_rules_answer_by_last_user_text_and_script_wins(fake_anthropic, provider) -> None:
    fake_anthropic.reply_to("weather", Turn([text("Sunny.")]))
    fake_anthropic.add_rule(
        lambda r: "count" in r.last_user_text, lambda r: Turn([text(str(r.index))])
    )
    fake_anthropic.add_rule(lambda r: True, Fault.status(503), times=1)

    async def answer(prompt: str):
        _, outcome = await collect(provider, request(prompt))
        return outcome

    assert (await answer("what's the WEATHER?")).response.content == (TextBlock("Sunny."),)
    assert (await answer("count please")).response.content == (TextBlock("1"),)
    fake_anthropic.script(Turn([text("scripted")]))
    assert (await answer("weather again")).response.content == (TextBlock("scripted"),)
    assert (await answer("anything")).failure.status == 503  # the times=1 rule, used once
    default = (await answer("anything")).response.content[0].text
    assert "no reply was scripted" in default


def test_sync_use_with_the_sync_sdk_and_wrong_key() -> None:
    with FakeAnthropic(api_key=KEY) as fake:
        fake.script(Turn([text("sync hello")]))
        client = anthropic.Anthropic(api_key=KEY, base_url=fake.base_url, max_retries=0)
        message = client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
        assert message.content[0].text == "sync hello"
        bad = anthropic.Anthropic(api_key="wrong", base_url=fake.base_url, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        url = fake.base_url
    with pytest.raises(httpx2.ConnectError):
        httpx2.post(f"{url}/v1/messages", json={})


async def test_async_context_and_x_api_key_header_redacted() -> None:
    async with FakeAnthropic(api_key=KEY) as fake:
        async with httpx2.AsyncClient() as client:
            response = await client.post(
                f"{fake.base_url}/v1/messages",
                headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
                json={
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )
        assert response.status_code == 200
        assert response.json()["content"][0]["type"] == "text"
        recorded = fake.requests[-1]
        assert recorded.headers["x-api-key"] == "[redacted]"
        assert recorded.body["messages"][0]["content"] == "hi"


async def test_missing_credentials_get_401(fake_anthropic) -> None:
    async with httpx2.AsyncClient() as client:
        response = await client.post(f"{fake_anthropic.base_url}/v1/messages", json={"model": "m"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
