"""The request body the provider encodes itself, each history message once.

The provider hands its SDK client a body it encoded (`llm/body.py`); a provider
given an SDK client built elsewhere sends the same parameters through the SDK's
own `messages.create`, which prepares and encodes the whole body. Both go through
the real SDK over loopback to the fake Messages API, which records what arrives.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import httpx2

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.messages import interrupted_text
from phoenix_nb.core.requests import RequestHistory
from phoenix_nb.core.values import ImageData, TextBlock, ToolUseBlock
from phoenix_nb.llm.body import MessagesBody
from phoenix_nb.llm.capabilities import IMAGE_LEFT_OUT
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.testing import FakeAnthropic
from tests.seeds import phoenix_seed

from .helpers import BASH_TOOL, PATCH_TOOL, collect

MODEL = "claude-test"
OFFERED = {"bash", "patch"}
PNG = ImageData("image/png", "iVBORw0KGgo=", "fig.png")
SUMMARY = "Summarise the conversation so far."


def user(text: str, *images: ImageData) -> dict[str, Any]:
    return {"message_type": "user", "content": {"text": text, "images": to_json(images)}}


def agent(*blocks: object, stop: str = "end_turn") -> dict[str, Any]:
    return {"message_type": "agent", "content": {"blocks": to_json(blocks), "stop_reason": stop}}


def result(call: str, text: str, *images: ImageData) -> dict[str, Any]:
    content = {"tool_use_id": call, "content": text, "is_error": False, "images": to_json(images)}
    return {"message_type": "tool", "content": content}


def system(text: str) -> dict[str, Any]:
    return {"message_type": "system", "content": {"text": text}}


class Story:
    """A conversation growing step by step the ways a notebook's does (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0

    def _call(self) -> ToolUseBlock:
        self.calls += 1
        name = self.rng.choice(sorted(OFFERED))
        return ToolUseBlock(f"toolu_{self.calls:05d}", name, {"command": f"step {self.calls}"})

    def step(self, kind: str) -> list[list[dict[str, Any]]]:
        """The stored messages of one step, in the batches a request follows."""
        rng = self.rng
        if kind == "round":  # a response with tool calls, then their results
            calls = [self._call() for _ in range(rng.choice((1, 2, 3, 14)))]
            answer = agent(TextBlock(f"Calling {len(calls)} tools."), *calls, stop="tool_use")
            results = [
                result(c.id, f"output of {c.id} ✓", *((PNG,) if rng.random() < 0.2 else ()))
                for c in calls
            ]
            return [[answer], results]
        if kind == "user":
            images = (PNG,) if rng.random() < 0.3 else ()
            return [[user(f"Question {rng.randrange(10**6)}: what now? é", *images)]]
        if kind == "cancel":  # calls cancelled before they ran: their results are synthetic
            calls = [self._call() for _ in range(2)]
            answer = agent(*calls, stop="tool_use")
            stored = [result(c.id, interrupted_text("cancelled")) for c in calls]
            return [[answer], [*stored, user("Never mind that.")]]
        if kind == "unanswered":  # a request between the calls and their results
            calls = [self._call()]
            return [[agent(*calls, stop="tool_use")], [result(calls[0].id, "late")]]
        if kind == "notice":
            return [[system("The user reverted a change.")]]
        return [[agent(TextBlock("Done."))]]


def reference(fake: FakeAnthropic) -> AnthropicProvider:
    """A provider given an SDK client: it sends through the SDK's `messages.create`.
    The client is built as the provider builds its own (the timeouts show in headers)."""
    timeout = httpx2.Timeout(600.0, connect=10.0, read=60.0)
    client = anthropic.AsyncAnthropic(
        api_key="k", base_url=fake.base_url, max_retries=0, timeout=timeout
    )
    return AnthropicProvider(client=client)


def request(history: RequestHistory, continuation: bool = False) -> LlmRequest:
    return LlmRequest(
        model=MODEL,
        system="You are a test.",
        messages=history.messages(OFFERED, SUMMARY if continuation else None),
        tools=[] if continuation else [BASH_TOOL, PATCH_TOOL],
        max_tokens=1000,
    )


async def test_the_encoded_body_is_the_one_the_sdk_would_send(
    fake_anthropic: FakeAnthropic,
) -> None:
    """Every request of a seeded growing conversation, sent by both providers, arrives
    JSON-equal and with equal headers, while cache breakpoints move, images are left
    out (and then caching too), continuation requests rewrite every message, and
    cancelled or unanswered calls carry synthetic results."""
    seed = phoenix_seed()
    story = Story(seed)
    ours = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    sdk = reference(fake_anthropic)
    history = RequestHistory()
    history.extend([user("Start.")])
    kinds = ["round", "round", "user", "cancel", "unanswered", "notice", "end"]
    seen: set[str] = set()
    steps = 60
    try:
        for n in range(steps):
            if n == steps // 2:  # the model refused an image: both leave them out from now on
                for provider in (ours, sdk):
                    provider.capabilities.turn_off(MODEL, "images")
            if n == 3 * steps // 4:
                for provider in (ours, sdk):
                    provider.capabilities.turn_off(MODEL, "caching")
            for batch in story.step(story.rng.choice(kinds) if n > 1 else "round"):
                history.extend(batch)
                continuation = story.rng.random() < 0.08
                req = request(history, continuation)
                for provider in (ours, sdk):
                    _, outcome = await collect(provider, req)
                    assert outcome.failure is None, (seed, n, outcome.failure)
                ours_got, sdk_got = fake_anthropic.requests[-2:]
                sent, expected = ours_got.body, sdk_got.body
                assert sent == expected, f"PHOENIX_SEED={seed}, step {n}"
                # the same headers too, Content-Length included
                assert ours_got.headers == sdk_got.headers, f"PHOENIX_SEED={seed}, step {n}"
                seen |= features(sent, continuation)
    finally:
        await ours.aclose()
        await sdk.aclose()
    assert ours.body.encoded > 0 and sdk.body.encoded == 0, "each took its own path"
    wanted = {"moved breakpoint", "image", "image left out", "no caching", "continuation"}
    wanted |= {"cancelled", "missing"}
    assert wanted <= seen, f"PHOENIX_SEED={seed}: the story never had {wanted - seen}"


def features(body: dict[str, Any], continuation: bool) -> set[str]:
    """What a request body shows of the cases the comparison must cover."""
    found = set()
    if continuation and not body.get("tools"):
        found.add("continuation")
    if "cache_control" not in body:
        found.add("no caching")
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if "cache_control" in block:
                found.add("moved breakpoint")
            if block.get("type") == "image":
                found.add("image")
            text = str(block.get("text") or block.get("content") or "")
            if IMAGE_LEFT_OUT in text:
                found.add("image left out")
            if interrupted_text("cancelled") in text:
                found.add("cancelled")
            if "missing from the history" in text:
                found.add("missing")
    return found


async def each_message_once(
    provider: Any, count: Callable[[], int], kinds: Sequence[str] = ("round", "user", "end")
) -> None:
    """Two conversations on `provider`, taking turns, 40 rounds each after a long start:
    a request adds to `count()` only what its round added (and the few messages a
    request builds afresh: the open last turn, a breakpoint's copy), never the history
    again; the first request of each, all its messages."""
    seed = phoenix_seed()
    stories = [Story(seed + i) for i in range(2)]
    histories = [RequestHistory() for _ in stories]
    for story, history in zip(stories, histories, strict=True):
        history.extend([user("Start.")])
        for _ in range(60):  # a long history before the first request
            for batch in story.step("round"):
                history.extend(batch)
    previous = [0, 0]
    try:
        for n in range(80):
            i = n % 2
            for batch in stories[i].step(stories[i].rng.choice(kinds)):
                histories[i].extend(batch)
            req = request(histories[i])
            before = count()
            _, outcome = await collect(provider, req)
            assert outcome.failure is None, outcome.failure
            done = count() - before
            if previous[i]:
                added = len(req.messages) - previous[i]
                assert done <= max(added, 0) + 3, (
                    f"PHOENIX_SEED={seed}: request {n} of {len(req.messages)} messages "
                    f"({added} new) took {done}"
                )
            else:
                assert done == len(req.messages)
            previous[i] = len(req.messages)
    finally:
        await provider.aclose()


async def test_each_message_is_encoded_once_over_many_rounds(
    fake_anthropic: FakeAnthropic,
) -> None:
    """Each message is encoded once over many rounds of two conversations."""
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    await each_message_once(provider, lambda: provider.body.encoded)


def test_bytes_of_messages_no_longer_sent_are_let_go() -> None:
    """Conversations that ended (or whose messages were all replaced, as a continuation
    does) do not keep their bytes once the cache grows again: a long conversation's
    growth sweeps them out, and what stays is what recent requests sent."""
    body = MessagesBody()
    for conversation in range(30):  # each sent once, then never again
        messages = [{"role": "user", "content": f"{conversation}: {i}"} for i in range(500)]
        assert json.loads(body.messages(messages)) == messages
    live: list[dict[str, Any]] = []
    for turn in range(100):
        live = [*live, *({"role": "user", "content": f"{turn}.{i}"} for i in range(100))]
        assert json.loads(body.messages(live)) == live
    assert body.encoded == 30 * 500 + len(live), "every live message was encoded once"
    assert body.cached == len(live), "only the live conversation's bytes are kept"
