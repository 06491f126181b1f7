"""LazyProvider builds the real provider (`make_provider`, the real openai SDK against
the Chat Completions fake) on a worker thread at its first request: the loop keeps
running while the build is held, concurrent first requests share one build, a
cancelled waiter does not cancel it, and a provider that cannot be built (its SDK
missing) is the request's non-retryable failure saying what to install, tried again
at the next request."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import pytest

from phoenix_nb.llm.errors import LlmCallError
from phoenix_nb.llm.lazy import LazyProvider
from phoenix_nb.llm.providers import make_provider
from phoenix_nb.llm.stream import LlmOutcome
from phoenix_nb.testing import Turn, text
from phoenix_nb.testing.fake_openai import FakeOpenAI

from .helpers import collect, request

MODEL = "gpt-test-unknown"
WAIT = 60.0  # generous: only a broken build would reach it


class HeldBuild:
    """`make_provider` for the fake, held on a threading.Event the test sets; records
    the threads it ran on."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        self.release = threading.Event()
        self.started = threading.Event()
        self.threads: list[int] = []

    def __call__(self) -> Any:
        self.threads.append(threading.get_ident())
        self.started.set()
        if not self.release.wait(WAIT):
            raise AssertionError("the build was never released")
        return make_provider("openai", base_url=self.fake.base_url, stall_timeout=5)


@pytest.fixture(autouse=True)
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


async def _ticks_until(event: threading.Event) -> int:
    """Turns of the loop until `event` is set (each only runs if the loop is free)."""
    ticks = 0
    while not event.is_set():
        await asyncio.sleep(0)
        ticks += 1
    return ticks


async def test_concurrent_first_requests_share_one_build_off_the_loop(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("one")]), Turn([text("two")]))
    build = HeldBuild(fake)
    lazy = LazyProvider(build, name="openai")
    assert lazy.built is None
    first = asyncio.ensure_future(collect(lazy, request(model=MODEL)))
    second = asyncio.ensure_future(collect(lazy, request(model=MODEL)))
    await asyncio.wait_for(_ticks_until(build.started), WAIT)
    # The loop runs while the build is held: this task ticks and then releases it.
    for _ in range(20):
        await asyncio.sleep(0)
    assert not first.done() and not second.done()
    build.release.set()
    results = await asyncio.wait_for(asyncio.gather(first, second), WAIT)
    texts = sorted(u.text for updates, _ in results for u in updates if hasattr(u, "text"))
    assert texts == ["one", "two"]
    assert all(outcome.response is not None for _, outcome in results)
    assert len(build.threads) == 1, "one build for both first requests"
    assert build.threads[0] != threading.get_ident(), "built on a worker thread"
    assert lazy.built is not None
    assert len(fake.requests) == 2
    await lazy.aclose()


async def test_a_cancelled_first_request_does_not_cancel_the_build(fake: FakeOpenAI) -> None:
    fake.script(Turn([text("still built")]))
    build = HeldBuild(fake)
    lazy = LazyProvider(build, name="openai")
    cancelled = asyncio.ensure_future(collect(lazy, request(model=MODEL)))
    waiting = asyncio.ensure_future(collect(lazy, request(model=MODEL)))
    await asyncio.wait_for(_ticks_until(build.started), WAIT)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    build.release.set()
    updates, outcome = await asyncio.wait_for(waiting, WAIT)
    assert outcome.response is not None
    assert [u.text for u in updates if hasattr(u, "text")] == ["still built"]
    assert len(build.threads) == 1
    await lazy.aclose()


async def test_a_missing_sdk_is_the_requests_failure_and_is_tried_again(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def build() -> Any:
        calls.append(1)
        return make_provider("openai", base_url=fake.base_url, stall_timeout=5)

    lazy = LazyProvider(build, name="openai")
    with monkeypatch.context() as patch:
        # As if the extra were not installed: importing the adapter fails.
        patch.setitem(sys.modules, "phoenix_nb.llm.openai_chat", None)
        updates, outcome = await collect(lazy, request(model=MODEL))
        assert updates == []
        assert isinstance(outcome, LlmOutcome) and outcome.failure is not None
        assert not outcome.failure.retryable
        assert "pip install 'phoenix_nb[openai]'" in outcome.failure.message
        with pytest.raises(LlmCallError) as caught:
            await lazy.complete_text(request(model=MODEL))
        assert "pip install 'phoenix_nb[openai]'" in str(caught.value)
        assert await lazy.model_limits(MODEL) is None
    assert lazy.built is None
    assert fake.requests == []

    # The extra installed: the next request builds the provider and is sent.
    fake.script(Turn([text("now it works")]))
    updates, outcome = await collect(lazy, request(model=MODEL))
    assert outcome.response is not None
    assert len(calls) == 4
    assert len(fake.requests) == 1
    await lazy.aclose()


async def test_a_refused_key_is_framed_remembered_and_forgotten_after_an_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A conversation's own server (not the current setting's): its refused credential is
    one framed line and `unusable` says why, until a request is answered again."""
    with FakeOpenAI(api_key="sk-right") as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")

        def build() -> Any:
            return make_provider("openai", base_url=fake.base_url, stall_timeout=5)

        lazy = LazyProvider(build, name="openai", explain=lambda why: f"ITS SERVER: {why}")
        _, outcome = await collect(lazy, request(model=MODEL))
        assert outcome.failure is not None and not outcome.failure.retryable
        assert outcome.failure.message.startswith("ITS SERVER: Authentication failed (401)")
        assert lazy.unusable is not None and "401" in lazy.unusable
        assert len(fake.requests) == 1, "sent, and refused by the server"

        lazy.built._client.api_key = "sk-right"  # the key is back
        fake.script(Turn([text("answered")]))
        _, outcome = await collect(lazy, request(model=MODEL))
        assert outcome.response is not None, outcome.failure
        assert lazy.unusable is None
        await lazy.aclose()
