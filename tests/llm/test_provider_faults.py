"""Every failure maps to exactly one LlmFailure with the right kind and retryability.

REQ-BED-006: the state machine retries what is retryable, so the provider's
classification decides whether a user waits or sees an error at once.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from phoenix_nb.core.values import ErrorKind
from phoenix_nb.llm.errors import STATUS_TABLE
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.llm.stream import TextDelta
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text

from .helpers import collect, request

KEY = "sk-ant-secret-abcdef"


@pytest.fixture
def provider(fake_anthropic: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=fake_anthropic.base_url, stall_timeout=3.0)


STATUS_CASES = [
    (400, ErrorKind.INVALID_REQUEST, False),
    (401, ErrorKind.AUTH, False),
    (403, ErrorKind.AUTH, False),
    (404, ErrorKind.INVALID_REQUEST, False),
    (413, ErrorKind.INVALID_REQUEST, False),
    (429, ErrorKind.RATE_LIMIT, True),
    (500, ErrorKind.SERVER_ERROR, True),
    (502, ErrorKind.SERVER_ERROR, True),
    (503, ErrorKind.SERVER_ERROR, True),
    (504, ErrorKind.SERVER_ERROR, True),
    (529, ErrorKind.SERVER_ERROR, True),
]


@pytest.mark.parametrize(("status", "kind", "retryable"), STATUS_CASES)
async def test_http_status_maps_to_kind(fake_anthropic, provider, status, kind, retryable) -> None:
    fake_anthropic.script(Fault.status(status, message="details from the API"))
    updates, outcome = await collect(provider)
    assert updates == []
    failure = outcome.failure
    assert failure is not None
    assert (failure.kind, failure.retryable, failure.status) == (kind, retryable, status)
    assert STATUS_TABLE[status] == (kind, retryable)
    assert KEY not in failure.message


async def test_messages_tell_the_user_what_to_do(fake_anthropic, provider) -> None:
    fake_anthropic.script(
        Fault.status(401),
        Fault.status(400, message="messages.0.content: Field required"),
        Fault.status(413),
        Fault.status(404),
    )
    messages = [(await collect(provider))[1].failure.message for _ in range(4)]
    assert messages[0] == "Authentication failed (401): check ANTHROPIC_API_KEY."
    assert "messages.0.content: Field required" in messages[1]
    assert "too large" in messages[2]
    assert "claude-test" in messages[3]


async def test_unknown_5xx_retryable_and_unknown_4xx_not(fake_anthropic, provider) -> None:
    fake_anthropic.script(Fault.status(599), Fault.status(418))
    first = (await collect(provider))[1].failure
    second = (await collect(provider))[1].failure
    assert (first.kind, first.retryable) == (ErrorKind.SERVER_ERROR, True)
    assert (second.kind, second.retryable) == (ErrorKind.INVALID_REQUEST, False)


async def test_retry_after_seconds_and_ms(fake_anthropic, provider) -> None:
    fake_anthropic.script(
        Fault.status(429, retry_after=7),
        Fault.status(529, retry_after_ms=1500),
        Fault.status(429, retry_after=7, retry_after_ms=250),
        Fault.status(429),
    )
    delays = [(await collect(provider))[1].failure.retry_after for _ in range(4)]
    assert delays == [7.0, 1.5, 0.25, None]


async def test_prompt_too_long_is_context_exhausted(fake_anthropic, provider) -> None:
    fake_anthropic.script(Fault.status(400, message="prompt is too long: 210000 tokens > 200000"))
    failure = (await collect(provider))[1].failure
    assert (failure.kind, failure.retryable) == (ErrorKind.CONTEXT_EXHAUSTED, False)


async def test_key_echoed_by_server_is_redacted(fake_anthropic, provider) -> None:
    fake_anthropic.script(Fault.status(400, message=f"bad key {KEY} given"))
    failure = (await collect(provider))[1].failure
    assert KEY not in failure.message and "[redacted]" in failure.message


async def test_refused_connection_is_retryable_network() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        provider = AnthropicProvider(api_key=KEY, base_url=f"http://127.0.0.1:{port}")
        updates, outcome = await collect(provider)
    assert updates == []
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)
    assert "connect" in outcome.failure.message.lower()


async def test_header_timeout_is_retryable_network(fake_anthropic, provider) -> None:
    fake_anthropic.script(Fault.slow_headers(10))
    _, outcome = await collect(provider)
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)


async def test_mid_stream_drop_is_retryable_network(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([text("abcdefghij" * 5, chunk=5)], fault=Fault.drop_after(5)))
    updates, outcome = await collect(provider)
    assert any(isinstance(u, TextDelta) for u in updates), "text arrived before the drop"
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)
    assert "dropped" in outcome.failure.message
    assert fake_anthropic.events[-1].kind == "dropped"


async def test_stall_is_retryable_network(fake_anthropic, provider) -> None:
    fake_anthropic.script(
        Turn([text("abcdefghij" * 5, chunk=5)], fault=Fault.stall(10, after_events=4))
    )
    updates, outcome = await collect(provider)
    assert any(isinstance(u, TextDelta) for u in updates)
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)
    assert "stopped sending" in outcome.failure.message


@pytest.mark.parametrize(
    ("error_type", "kind", "retryable"),
    [
        ("overloaded_error", ErrorKind.SERVER_ERROR, True),
        ("api_error", ErrorKind.SERVER_ERROR, True),
        ("rate_limit_error", ErrorKind.RATE_LIMIT, True),
        ("invalid_request_error", ErrorKind.INVALID_REQUEST, False),
    ],
)
async def test_in_stream_error_event_by_type(
    fake_anthropic, provider, error_type, kind, retryable
) -> None:
    fake_anthropic.script(
        Turn([text("partial " * 10, chunk=8)], fault=Fault.in_stream_error(error_type))
    )
    _, outcome = await collect(provider)
    assert (outcome.failure.kind, outcome.failure.retryable) == (kind, retryable)
    assert outcome.failure.status == 200


async def test_eof_without_message_stop_is_retryable_network(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([text("half an answer")], fault=Fault.eof_without_stop()))
    updates, outcome = await collect(provider)
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "half an answer"
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.NETWORK, True)
    assert "ended early" in outcome.failure.message


async def test_malformed_event_json_is_a_retryable_failure(fake_anthropic, provider) -> None:
    fake_anthropic.script(Turn([text("abc " * 10, chunk=4)], fault=Fault.malformed_json()))
    _, outcome = await collect(provider)
    assert outcome.failure is not None and outcome.failure.retryable


async def test_cancel_mid_stream_closes_the_connection(fake_anthropic, provider) -> None:
    """Cancelling the task iterating the stream propagates and the server sees the disconnect."""
    fake_anthropic.script(Turn([text("x" * 400, chunk=4, delay=0.05)]))
    first_delta = asyncio.Event()
    seen: list[object] = []

    async def consume() -> None:
        async for update in provider.stream(request()):
            seen.append(update)
            first_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake_anthropic.wait_for_async(
        lambda f: any(e.kind == "disconnected" for e in f.events), timeout=5
    ), fake_anthropic.events
    assert len(seen) < 100, "the stream did not run to its end"


async def test_missing_key_is_auth_failure(fake_anthropic, monkeypatch, tmp_path) -> None:
    """Anthropic's API without a key fails before any request, saying what to set."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    _, outcome = await collect(AnthropicProvider())
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.AUTH, False)
    assert "ANTHROPIC_API_KEY" in outcome.failure.message


async def test_a_server_wanting_a_key_it_was_not_given_is_auth_failure(monkeypatch) -> None:
    """A base URL without a key is tried as a keyless local server; one that checks
    keys answers 401, shown as an authentication failure naming the variable."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with FakeAnthropic(api_key="the-real-key") as server:
        _, outcome = await collect(AnthropicProvider(base_url=server.base_url))
    assert (outcome.failure.kind, outcome.failure.retryable) == (ErrorKind.AUTH, False)
    assert "ANTHROPIC_API_KEY" in outcome.failure.message
