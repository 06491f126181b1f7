"""Bedrock and Vertex upstreams at the gateway, with the gateway's own credentials.

The kernel's side is phoenix's real provider (`make_provider("bedrock"|"vertex")`,
the anthropic SDK's cloud clients) with the gateway as its base URL and the user's
Hub token as its only credential. The fakes check what they RECEIVED: FakeBedrock
recomputes the SigV4 signature with the gateway's AWS keys (botocore's signer) and
refuses anything else; FakeVertex takes only the access token it issued to the
gateway's service account (google-auth's jwt-bearer refresh against its /token).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.core.values import TextBlock, Usage
from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.hub.upstreams import GoogleAuth, SigV4Auth, wire_for
from phoenix_nb.llm.providers import make_provider
from phoenix_nb.policy import parse_policy
from phoenix_nb.testing import Turn, text
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_vertex import ACCESS_TOKEN, FakeVertex
from phoenix_nb.testing.hub import GatewayServer, TokenTable
from tests.llm.helpers import collect, request

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
AWS_KEYS = ("AKIDGATEWAYONLY0001", "gateway-secret-access-key-0123456789")
TOKENS = {"hubtok-a-0123456789": "phx-a", "hubtok-b-0123456789": "phx-b"}
TOKEN = {user: token for token, user in TOKENS.items()}
# 10,000 input + 1,000 output tokens of Sonnet 4.5: $0.045 a request
USAGE = Usage(input_tokens=10_000, output_tokens=1_000)
POLICY = """\
[gateway]
url = "http://127.0.0.1:8765"
upstream = "{kind}"

[models]
allowed = ["*claude-sonnet-4-5*"]

[budgets]
user_daily = 0.05
"""


def _no_cloud_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The kernel's side has none: whatever the gateway was given is gone by then."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "CLOUD_ML_REGION",
        "ANTHROPIC_VERTEX_PROJECT_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.fixture
def bedrock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[FakeBedrock, GatewayServer]]:
    _no_cloud_credentials(monkeypatch, tmp_path)
    with FakeBedrock(
        aws_keys=AWS_KEYS, default=Turn([text("hello from bedrock")], usage=USAGE)
    ) as fake:
        with monkeypatch.context() as gateway_env:  # the gateway's service environment
            gateway_env.setenv("AWS_ACCESS_KEY_ID", AWS_KEYS[0])
            gateway_env.setenv("AWS_SECRET_ACCESS_KEY", AWS_KEYS[1])
            signer = SigV4Auth("us-west-2")
        gateway = Gateway(
            upstream=fake.base_url,
            policy=parse_policy(POLICY.format(kind="bedrock"), "/etc/phoenix/policy.toml"),
            auth=TokenTable(TOKENS),
            audit=AuditLog(tmp_path / "audit.jsonl"),
            upstream_auth=signer,
            wire=wire_for("bedrock"),
        )
        with GatewayServer(gateway) as server:
            yield fake, server


@pytest.fixture
def vertex(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[FakeVertex, GatewayServer]]:
    _no_cloud_credentials(monkeypatch, tmp_path)
    with FakeVertex(default=Turn([text("hello from vertex")], usage=USAGE)) as fake:
        with monkeypatch.context() as gateway_env:
            gateway_env.setenv(
                "GOOGLE_APPLICATION_CREDENTIALS", str(fake.credentials_file(tmp_path))
            )
            google = GoogleAuth()
        gateway = Gateway(
            upstream=fake.vertex_url,
            policy=parse_policy(POLICY.format(kind="vertex"), "/etc/phoenix/policy.toml"),
            auth=TokenTable(TOKENS),
            audit=AuditLog(tmp_path / "audit.jsonl"),
            upstream_auth=google,
            wire=wire_for("vertex", project="admins-project", region="us-east5"),
        )
        with GatewayServer(gateway) as server:
            yield fake, server


def _lines(gw: Gateway, count: int) -> list[dict]:
    deadline = time.monotonic() + 30
    while True:
        lines = list(gw.audit.lines())
        if len(lines) >= count or time.monotonic() > deadline:
            return lines  # type: ignore[return-value]
        time.sleep(0.01)


async def _turn(kind: str, url: str, user: str, model: str) -> object:
    provider = make_provider(kind, api_key=TOKEN[user], base_url=url, stall_timeout=20)
    try:
        _, outcome = await collect(provider, request(model=model))
    finally:
        await provider.aclose()
    return outcome


async def test_bedrock_turns_are_signed_with_the_gateways_aws_keys(
    bedrock: tuple[FakeBedrock, GatewayServer],
) -> None:
    fake, server = bedrock
    outcome = await _turn("bedrock", server.url, "phx-a", BEDROCK_MODEL)
    assert outcome.response is not None, outcome.failure  # type: ignore[attr-defined]
    assert outcome.response.content == (TextBlock("hello from bedrock"),)  # type: ignore[attr-defined]
    [wire] = fake.wire
    assert wire.path == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    assert fake.refused_signatures == 0  # recomputed with the gateway's keys: it matched
    said = json.dumps(wire.headers) + json.dumps(wire.body)
    assert TOKEN["phx-a"] not in said and "x-phoenix" not in said
    [line] = _lines(server.gateway, 1)
    assert (line["user"], line["model"], line["status"]) == ("phx-a", BEDROCK_MODEL, "ok")
    assert (line["input_tokens"], line["output_tokens"]) == (10_000, 1_000)
    assert line["dollars"] == pytest.approx(0.045)


async def test_bedrock_refuses_a_wrong_signature_so_the_check_can_fail(
    bedrock: tuple[FakeBedrock, GatewayServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake's check is real: the same gateway signing with another secret is refused."""
    fake, server = bedrock
    signer = server.gateway._upstream_auth
    monkeypatch.setattr(
        signer, "_credentials", type(signer._credentials)(AWS_KEYS[0], "not-the-secret")
    )
    outcome = await _turn("bedrock", server.url, "phx-a", BEDROCK_MODEL)
    assert outcome.failure is not None  # type: ignore[attr-defined]
    assert fake.refused_signatures == 1 and fake.requests == []


async def test_bedrock_budget_and_models_are_the_gateways_as_for_anthropic(
    bedrock: tuple[FakeBedrock, GatewayServer],
) -> None:
    fake, server = bedrock
    other = "us.anthropic.claude-opus-4-5-20251101-v1:0"
    refused = await _turn("bedrock", server.url, "phx-b", other)
    assert "is not allowed" in refused.failure.message  # type: ignore[attr-defined]
    for _ in range(2):  # $0.045 each: the second passes $0.05
        ok = await _turn("bedrock", server.url, "phx-b", BEDROCK_MODEL)
        assert ok.response is not None, ok.failure  # type: ignore[attr-defined]
    past = await _turn("bedrock", server.url, "phx-b", BEDROCK_MODEL)
    assert "daily budget" in past.failure.message, past.failure  # type: ignore[attr-defined]
    assert len(fake.requests) == 2
    lines = _lines(server.gateway, 4)
    assert [x["status"] for x in lines] == ["refused", "ok", "ok", "refused"]


def test_bedrocks_event_stream_comes_back_byte_for_byte(
    bedrock: tuple[FakeBedrock, GatewayServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answer straight from the upstream (signed here) and through the gateway:
    the same bytes, frames, CRCs and all (ids fixed, so the two answers are equal)."""
    from botocore.auth import SigV4Auth as Signer
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    import phoenix_nb.demo.server as fake_server

    monkeypatch.setattr(fake_server, "_next_id", lambda prefix: f"{prefix}_fixed")
    fake, server = bedrock
    path = f"/model/{BEDROCK_MODEL.replace(':', '%3A')}/invoke-with-response-stream"
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()

    def post(url: str, headers: dict[str, str]) -> bytes:
        req = urllib.request.Request(url, data=body, method="POST", headers=headers)
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.read()

    signed = AWSRequest(
        method="POST",
        url=fake.base_url + path,
        data=body,
        headers={"content-type": "application/json"},
    )
    Signer(Credentials(*AWS_KEYS), "bedrock", "us-west-2").add_auth(signed)
    direct = post(fake.base_url + path, dict(signed.headers.items()))
    through = post(
        server.url + path,
        {"content-type": "application/json", "authorization": f"Bearer {TOKEN['phx-a']}"},
    )
    assert through == direct
    assert b":event-type\x07\x00\x05chunk" in through and len(fake.requests) == 2


async def test_vertex_turns_carry_the_gateways_token_and_project(
    vertex: tuple[FakeVertex, GatewayServer],
) -> None:
    fake, server = vertex
    for user in ("phx-a", "phx-b"):
        outcome = await _turn("vertex", server.url, user, VERTEX_MODEL)
        assert outcome.response is not None, outcome.failure  # type: ignore[attr-defined]
        assert outcome.response.content == (TextBlock("hello from vertex"),)  # type: ignore[attr-defined]
    assert fake.token_requests == 1, "one token, refreshed once, serves every user"
    for wire in fake.wire:
        # the kernel's placeholders replaced by the admin's project and region
        assert wire.path == (
            "/v1/projects/admins-project/locations/us-east5/publishers/anthropic/models/"
            f"{VERTEX_MODEL}:streamRawPredict"
        )
        said = json.dumps(wire.headers) + json.dumps(wire.body)
        assert not any(token in said for token in TOKENS) and "x-phoenix" not in said
    lines = _lines(server.gateway, 2)
    assert [(x["user"], x["model"], x["status"]) for x in lines] == [
        ("phx-a", VERTEX_MODEL, "ok"),
        ("phx-b", VERTEX_MODEL, "ok"),
    ]
    assert all(x["dollars"] == pytest.approx(0.045) for x in lines)


async def test_vertex_refuses_anything_but_the_token_it_issued(
    vertex: tuple[FakeVertex, GatewayServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake's check is real: a gateway sending the user's token on is refused."""
    fake, server = vertex

    async def hub_token_on(*_args: object) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN['phx-a']}"}

    monkeypatch.setattr(server.gateway._upstream_auth, "sign", hub_token_on)
    outcome = await _turn("vertex", server.url, "phx-a", VERTEX_MODEL)
    assert outcome.failure is not None  # type: ignore[attr-defined]
    assert fake.requests == [] and ACCESS_TOKEN not in outcome.failure.message  # type: ignore[attr-defined]
