"""The gateway against a fake upstream that checks the admin's key, driven by the real
Anthropic SDK (phoenix's provider) with the user's Hub token as its credential.

What the other side received is asserted: the upstream's recorded headers (the
admin's key, never the user's token), the audit file's lines, the bytes the
client got (the upstream's stream, unchanged)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import ClientSession, TCPConnector, web

from phoenix_nb.core.values import Usage
from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import LlmOutcome
from phoenix_nb.policy import parse_policy
from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.hub import GatewayServer, TokenTable

ADMIN_KEY = "sk-ant-admin-0123456789abcdef"
TOKENS = {"tok-a-0123456789": "phx-a", "tok-b-0123456789": "phx-b", "tok-c-0123456789": "phx-c"}
TOKEN = {user: token for token, user in TOKENS.items()}
MODEL = "claude-sonnet-4-5"
POLICY = """\
[gateway]
url = "http://127.0.0.1:8765"

[models]
allowed = ["claude-sonnet-4-5*"]

[budgets]
conversation = 10.0
user_daily = 0.05
"""
# 10,000 input + 1,000 output tokens of Sonnet 4.5: $0.03 + $0.015 = $0.045 a request
USAGE = Usage(input_tokens=10_000, output_tokens=1_000)


@pytest.fixture
def upstream() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(
        api_key=ADMIN_KEY, default=Turn([text("hello from upstream")], usage=USAGE)
    ) as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeAnthropic, tmp_path: Path) -> Iterator[GatewayServer]:
    policy = parse_policy(POLICY, "/etc/phoenix/policy.toml")
    gw = Gateway(
        upstream=upstream.base_url,
        upstream_key=ADMIN_KEY,
        policy=policy,
        auth=TokenTable(TOKENS),
        audit=AuditLog(tmp_path / "audit.jsonl"),
    )
    with GatewayServer(gw) as server:
        yield server


def _request(model: str = MODEL) -> LlmRequest:
    return LlmRequest(
        model=model, system="test", messages=[{"role": "user", "content": "hi"}], max_tokens=100
    )


async def _turn(url: str, user: str, model: str = MODEL) -> LlmOutcome:
    provider = AnthropicProvider(api_key=TOKEN[user], base_url=url, stall_timeout=20)
    try:
        updates = [u async for u in provider.stream(_request(model))]
    finally:
        await provider.aclose()
    last = updates[-1]
    assert isinstance(last, LlmOutcome)
    return last


def _audit(gateway: GatewayServer, count: int = 0) -> list[dict]:
    """The audit lines, once there are `count` (a line is written when the upstream's
    answer ends, which the client may see a moment before the gateway does)."""
    return _lines(gateway.gateway, count)


def _lines(gw: Gateway, count: int) -> list[dict]:
    deadline = time.monotonic() + 30
    while True:
        lines = list(gw.audit.lines())
        if len(lines) >= count or time.monotonic() > deadline:
            return lines  # type: ignore[return-value]
        time.sleep(0.01)


async def test_a_turn_goes_upstream_with_the_admins_key_and_never_the_users_token(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    outcome = await _turn(gateway.url, "phx-a")
    assert outcome.response is not None, outcome.failure
    assert "hello from upstream" in str(outcome.response.content)
    [received] = upstream.requests
    # the fake redacts secret headers in its record: look at the raw key check instead
    assert received.path == "/v1/messages"
    assert all(TOKEN["phx-a"] not in str(v) for v in received.headers.values())
    assert all(TOKEN["phx-a"] not in json.dumps(r.body) for r in upstream.requests)
    [line] = _audit(gateway, 1)
    assert line["user"] == "phx-a"
    assert line["model"] == MODEL
    assert line["status"] == "ok"
    assert (line["input_tokens"], line["output_tokens"], line["cached_tokens"]) == (
        10_000,
        1_000,
        0,
    )
    assert line["dollars"] == pytest.approx(0.045)
    assert set(line) >= {
        "time",
        "user",
        "conversation",
        "model",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "dollars",
        "status",
        "event",
    }


async def test_an_unknown_token_is_refused_before_anything_goes_upstream(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    provider = AnthropicProvider(api_key="not-a-hub-token", base_url=gateway.url)
    updates = [u async for u in provider.stream(_request())]
    await provider.aclose()
    outcome = updates[-1]
    assert isinstance(outcome, LlmOutcome) and outcome.failure is not None
    assert "401" in outcome.failure.message
    assert upstream.requests == []
    assert _audit(gateway) == []


async def test_without_the_gateway_the_admins_key_is_what_the_upstream_checks(
    upstream: FakeAnthropic,
) -> None:
    """The fake really checks the key: a user's token sent straight to it fails."""
    outcome = await _turn(upstream.base_url, "phx-a")
    assert outcome.failure is not None and "401" in outcome.failure.message


async def test_a_user_past_the_daily_budget_is_refused_while_others_go_on(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    first = await _turn(gateway.url, "phx-b")
    second = await _turn(gateway.url, "phx-b")  # $0.09 > $0.05 spent after this one
    assert first.response is not None and second.response is not None
    refused = await _turn(gateway.url, "phx-b")
    assert refused.failure is not None
    assert "403" in refused.failure.message
    assert "phx-b has spent $0.09 today" in refused.failure.message
    assert "/etc/phoenix/policy.toml line 9 ([budgets] user_daily)" in refused.failure.message
    assert len(upstream.requests) == 2, "the refused request never reached the upstream"
    for user in ("phx-a", "phx-c"):
        ok = await _turn(gateway.url, user)
        assert ok.response is not None, (user, ok.failure)
    lines = _audit(gateway, 5)
    assert [(x["user"], x["status"]) for x in lines] == [
        ("phx-b", "ok"),
        ("phx-b", "ok"),
        ("phx-b", "refused"),
        ("phx-a", "ok"),
        ("phx-c", "ok"),
    ]


async def test_a_model_outside_the_policy_is_refused_at_the_gateway(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    outcome = await _turn(gateway.url, "phx-a", model="claude-opus-4-5")
    assert outcome.failure is not None
    assert "line 5 ([models] allowed)" in outcome.failure.message
    assert upstream.requests == []


def test_the_stream_comes_back_byte_for_byte(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()

    def post(url: str, key: str) -> bytes:
        req = urllib.request.Request(
            url + "/v1/messages",
            data=body,
            method="POST",
            headers={
                "content-type": "application/json",
                "x-api-key": key,
                "anthropic-version": "2023-06-01",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.read()

    direct = post(upstream.base_url, ADMIN_KEY)
    through = post(gateway.url, TOKEN["phx-c"])
    # ids differ per answer; everything else is the same bytes
    import re

    def norm(b: bytes) -> bytes:
        return re.sub(rb'"(msg|req)_[A-Za-z0-9]+"', b'"ID"', b)

    assert norm(through) == norm(direct)
    assert b"event: message_start" in through


def test_kernels_report_events_under_their_own_user(gateway: GatewayServer) -> None:
    def post(event: dict, token: str) -> int:
        req = urllib.request.Request(
            gateway.url + "/audit",
            data=json.dumps(event).encode(),
            method="POST",
            headers={"authorization": f"token {token}", "content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert (
        post(
            {"event": "mode_change", "conversation": "c1", "mode": "unrestricted", "user": "phx-c"},
            TOKEN["phx-a"],
        )
        == 200
    )
    assert post({"event": "revert", "conversation": "c1"}, "bad-token") == 401
    assert post({"event": "rm -rf"}, TOKEN["phx-a"]) == 400
    [line] = _audit(gateway)
    assert line["user"] == "phx-a", "the user is the token's, never the body's"
    assert (line["event"], line["conversation"], line["mode"]) == (
        "mode_change",
        "c1",
        "unrestricted",
    )


async def test_spend_today_is_shown_to_its_user_and_survives_a_restart(
    gateway: GatewayServer, upstream: FakeAnthropic, tmp_path: Path
) -> None:
    await _turn(gateway.url, "phx-a")

    def get(path: str, token: str) -> bytes:
        req = urllib.request.Request(
            gateway.url + path, headers={"authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.read()

    spend = json.loads(get("/spend", TOKEN["phx-a"]))
    assert spend["user"] == "phx-a" and spend["dollars"] == pytest.approx(0.045)
    assert json.loads(get("/spend", TOKEN["phx-b"]))["dollars"] == 0
    assert b"phx-a: today" in get("/", TOKEN["phx-a"]) and b"$0.04" in get("/", TOKEN["phx-a"])
    again = Gateway(
        upstream=upstream.base_url,
        upstream_key=ADMIN_KEY,
        policy=gateway.gateway.policy,
        auth=TokenTable(TOKENS),
        audit=AuditLog(tmp_path / "audit.jsonl"),
    )
    day = datetime.now(UTC).date().isoformat()
    assert again.ledger.today("phx-a", day).dollars == pytest.approx(0.045)


async def test_an_openai_compatible_upstream_gets_the_admins_bearer_key(tmp_path: Path) -> None:
    """`[gateway] upstream = "openai"`: the kernel's openai provider sends the Hub token as
    its bearer key; the upstream gets the admin's, and the final usage chunk is metered."""
    from phoenix_nb.llm.openai_chat import OpenAIChatProvider
    from phoenix_nb.testing.fake_openai import FakeOpenAI

    usage = Usage(input_tokens=2000, output_tokens=200, cache_read_input_tokens=500)
    policy = parse_policy('[gateway]\nurl = "http://x"\nupstream = "openai"\n', "/p.toml")
    with FakeOpenAI(api_key=ADMIN_KEY, default=Turn([text("chat answer")], usage=usage)) as up:
        gw = Gateway(
            upstream=up.base_url,
            upstream_key=ADMIN_KEY,
            policy=policy,
            auth=TokenTable(TOKENS),
            audit=AuditLog(tmp_path / "audit.jsonl"),
        )
        with GatewayServer(gw) as server:
            provider = OpenAIChatProvider(api_key=TOKEN["phx-c"], base_url=server.url)
            tagged = replace(_request("gpt-test"), headers={"x-phoenix-conversation": "chat-1"})
            updates = [u async for u in provider.stream(tagged)]
            await provider.aclose()
    outcome = updates[-1]
    assert isinstance(outcome, LlmOutcome) and outcome.response is not None, outcome
    assert "chat answer" in str(outcome.response.content)
    assert len(up.requests) == 1 and up.requests[0].path == "/v1/chat/completions"
    [line] = _lines(gw, 1)
    assert (line["user"], line["model"], line["status"]) == ("phx-c", "gpt-test", "ok")
    assert line["conversation"] == "chat-1"
    assert "x-phoenix-conversation" not in {k.lower() for k in up.requests[0].headers}
    assert (line["input_tokens"], line["output_tokens"], line["cached_tokens"]) == (2000, 200, 500)


def test_a_hub_that_cannot_answer_is_a_503_and_nothing_goes_upstream(
    gateway: GatewayServer, upstream: FakeAnthropic
) -> None:
    gateway.gateway.auth.down = True  # type: ignore[attr-defined]
    req = urllib.request.Request(
        gateway.url + "/v1/messages",
        data=b'{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []}',
        headers={"x-api-key": TOKEN["phx-a"], "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=30)
    assert caught.value.code == 503
    assert "the Hub did not answer" in caught.value.read().decode()
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/messages/batches"),
        ("GET", "/v1/files"),
        ("POST", "/v1/../v1/messages/batches"),
    ],
)
def test_only_what_a_kernel_sends_is_forwarded_with_the_admins_key(
    gateway: GatewayServer, upstream: FakeAnthropic, method: str, path: str
) -> None:
    req = urllib.request.Request(
        gateway.url + path,
        data=b"{}" if method == "POST" else None,
        method=method,
        headers={"x-api-key": TOKEN["phx-a"], "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=30)
    assert caught.value.code in (400, 404)
    assert upstream.requests == []


async def test_more_answers_at_once_than_an_http_pool_holds_all_reach_the_upstream(
    tmp_path: Path,
) -> None:
    """One gateway serves a whole hub, and each answer holds its upstream connection for
    as long as it streams (minutes). This upstream answers nobody until 150 requests are
    open at once: with aiohttp's default pool of 100 connections the 101st would wait for
    a free one for ever, and so would everyone."""
    wanted, arrived, everyone = 150, [], asyncio.Event()

    async def answer(request: web.Request) -> web.Response:
        arrived.append(request.headers.get("x-api-key"))
        if len(arrived) == wanted:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 60)
        usage = {"input_tokens": 10, "output_tokens": 1}
        return web.json_response(
            {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
             "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
             "usage": usage}
        )  # fmt: skip

    app = web.Application()
    app.router.add_post("/v1/messages", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    gw = Gateway(
        upstream=f"http://127.0.0.1:{port}",
        upstream_key=ADMIN_KEY,
        policy=None,
        auth=TokenTable(TOKENS),
        audit=AuditLog(tmp_path / "audit.jsonl"),
    )
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    try:
        with GatewayServer(gw) as server:
            async with ClientSession(connector=TCPConnector(limit=0)) as http:

                async def ask() -> int:
                    headers = {"x-api-key": TOKEN["phx-b"]}
                    async with http.post(
                        server.url + "/v1/messages", json=body, headers=headers
                    ) as r:
                        await r.read()
                        return r.status

                statuses = await asyncio.gather(*(ask() for _ in range(wanted)))
    finally:
        await runner.cleanup()
    assert statuses == [200] * wanted
    assert arrived == [ADMIN_KEY] * wanted
    lines = _lines(gw, wanted)
    assert [(x["user"], x["status"]) for x in lines] == [("phx-b", "ok")] * wanted
