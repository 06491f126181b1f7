"""The Chat Completions body the OpenAI-compatible provider encodes itself, each
journal message converted and encoded once.

The provider hands the openai SDK a body it built (`llm/body.py`
`MessagesBody.chained`); the reference is the SDK's own `chat.completions.create`
given the whole history converted afresh, as the provider sent it before. Both go
through the real SDK over loopback to the fake Chat Completions server, which
records what arrives (and validates it as the API would: every call answered).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import openai
import pytest

from phoenix_nb.core.messages import interrupted_text
from phoenix_nb.core.requests import RequestHistory
from phoenix_nb.llm import openai_chat
from phoenix_nb.llm.capabilities import IMAGE_LEFT_OUT
from phoenix_nb.llm.openai_chat import to_chat_messages, to_chat_tools
from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.seeds import phoenix_seed

from .helpers import collect
from .test_openai_chat import provider as chat_provider
from .test_request_body import MODEL, Story, each_message_once, request, user


async def send_as_the_sdk(client: openai.AsyncOpenAI, req: LlmRequest, images: bool) -> None:
    """The request through the SDK's normal path: the whole history converted, then
    prepared and encoded by `create` (the fields the provider sends to a base URL)."""
    fields: dict[str, Any] = {
        "model": req.model,
        "messages": to_chat_messages(req.system, req.messages, images=images),
        "max_tokens": req.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = to_chat_tools(req.tools)
    if tools:
        fields["tools"] = tools
    stream = await client.chat.completions.create(**fields)
    async for _ in stream:
        pass


def spliced(req: LlmRequest, rng: random.Random) -> LlmRequest:
    """The same message objects after other unanswered calls than in `req`: a call
    nobody answers goes in before a random user message (whose results for the calls
    before it become strays), and another ends the history."""
    messages = list(req.messages)
    at = rng.choice([i for i, m in enumerate(messages) if m["role"] == "user"])
    for where, name in ((at, "dangling"), (len(messages) + 1, "last")):
        call = {"type": "tool_use", "id": f"call_{name}_{at}", "name": "bash", "input": {}}
        messages.insert(where, {"role": "assistant", "content": [call]})
    return dataclasses.replace(req, messages=messages)


def features(body: Mapping[str, Any]) -> set[str]:
    """What a body shows of the cases the comparison must cover."""
    found = set()
    for message in body["messages"]:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        for part in content if isinstance(content, list) else ():
            if part.get("type") == "image_url":
                found.add("image")
            text += str(part.get("text") or "")
        if IMAGE_LEFT_OUT in text:
            found.add("image left out")
        if message["role"] == "tool" and content == "(no result)":
            found.add("unanswered")
        if interrupted_text("cancelled") in text:
            found.add("cancelled")
        if message.get("tool_calls"):
            found.add("calls")
    return found


async def test_the_encoded_body_is_the_one_the_sdk_would_send(fake: FakeOpenAI) -> None:
    """Every request of a seeded growing conversation (tool calls, cancelled and
    unanswered calls, images, then images refused) arrives JSON-equal, with equal
    headers, whether the provider encoded it or the SDK prepared it; also when the
    same message objects are sent after other unanswered calls and back again."""
    seed = phoenix_seed()
    story = Story(seed)
    provider = chat_provider(fake)
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url=fake.base_url, max_retries=0, timeout=600.0
    )
    history = RequestHistory()
    history.extend([user("Start.")])
    kinds = ["round", "round", "user", "cancel", "unanswered", "notice", "end"]
    seen: set[str] = set()
    steps = 60
    images = True
    try:
        for n in range(steps):
            if n == steps // 2:  # the model refused an image: left out from now on
                provider.capabilities.turn_off(MODEL, "images")
                images = False
            for batch in story.step(story.rng.choice(kinds) if n > 1 else "round"):
                history.extend(batch)
                req = request(history, continuation=story.rng.random() < 0.08)
                # every few steps the same messages follow other unanswered calls
                variants = [req, spliced(req, story.rng), req] if n % 4 == 3 else [req]
                for sent in variants:
                    _, outcome = await collect(provider, sent)
                    assert outcome.failure is None, (seed, n, outcome.failure)
                    await send_as_the_sdk(client, sent, images)
                    ours_got, sdk_got = fake.requests[-2:]
                    assert ours_got.body == sdk_got.body, f"PHOENIX_SEED={seed}, step {n}"
                    assert ours_got.headers == sdk_got.headers, f"PHOENIX_SEED={seed}, {n}"
                    seen |= features(ours_got.body)
    finally:
        await provider.aclose()
        await client.close()
    assert provider.body.encoded > 0, "the provider encoded its own bodies"
    wanted = {"image", "image left out", "unanswered", "cancelled", "calls"}
    assert wanted <= seen, f"PHOENIX_SEED={seed}: the story never had {wanted - seen}"


async def test_each_message_is_converted_once_over_many_rounds(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two conversations on one provider, taking turns: a request converts only what
    its round added (and a message again only when the calls left unanswered before
    it changed), never the history again."""
    converted = 0
    convert = openai_chat.convert_message

    def counting(*args: Any) -> Any:
        nonlocal converted
        converted += 1
        return convert(*args)

    monkeypatch.setattr(openai_chat, "convert_message", counting)
    chat = chat_provider(fake)
    await each_message_once(chat, lambda: converted, ("round", "user", "unanswered", "end"))
    assert chat.body.encoded == converted
