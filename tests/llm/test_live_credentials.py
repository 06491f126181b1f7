"""Each provider says which credentials it holds now (`LlmProvider.live_credentials`),
through its real SDK client, after a real request to the fake of its wire format:
what it was given and what its SDK made or resolved since. A provider kind without
the method fails `test_every_provider_kind_declares_its_live_credentials`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.llm.credentials import client_credentials, header_secrets
from phoenix_nb.llm.lazy import LazyProvider
from phoenix_nb.llm.providers import make_provider
from phoenix_nb.runtime.settings import PROVIDERS
from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_openai import FakeOpenAI
from phoenix_nb.testing.fake_vertex import ACCESS_TOKEN, FakeVertex

from .helpers import collect, request

PROCESS_SECRET = "pRoCeSs/SeCrEt+Kq2Wm8Zt5Xv1Yb4Nc7Hd0Lf3Jg6"
PROCESS_SESSION = "IQoJb3JpZ2luX2VjEProcessSessionTokenZq8Wm2"


@pytest.fixture
def aws_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeBedrock]:
    """AWS credentials only through the config file's credential_process (no AWS_* key)."""
    import sys

    out = tmp_path / "creds.json"
    out.write_text(
        json.dumps(
            {
                "Version": 1,
                "AccessKeyId": "AKIAPROCESSEXAMPLE77",
                "SecretAccessKey": PROCESS_SECRET,
                "SessionToken": PROCESS_SESSION,
            }
        )
    )
    config = tmp_path / "config"
    config.write_text(
        f"[default]\ncredential_process = {sys.executable} -c "
        f"\"import sys; sys.stdout.write(open('{out}').read())\"\n"
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    # The SDK keeps one boto3 session per set of explicit options (an lru_cache): an
    # earlier test's session, holding the credentials its environment gave, would be
    # reused here (a kernel's environment does not change under it; this process's does).
    from anthropic.lib.aws._auth import _get_session

    _get_session.cache_clear()
    with FakeBedrock() as server:
        yield server


async def test_bedrock_holds_what_botocore_resolved(aws_process: FakeBedrock) -> None:
    provider = make_provider("bedrock", base_url=aws_process.base_url)
    assert PROCESS_SECRET not in provider.live_credentials()  # nothing resolved yet
    aws_process.script(Turn([text("hi")]))
    _, outcome = await collect(provider, request(model="us.anthropic.claude-x-v1:0"))
    assert outcome.response is not None, outcome.failure  # signed with the process's key
    held = provider.live_credentials()
    assert PROCESS_SECRET in held and PROCESS_SESSION in held
    await provider.aclose()


async def test_vertex_holds_the_access_token_google_auth_minted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with FakeVertex() as server:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(server.credentials_file(tmp_path)))
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "fake-project")
        monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
        monkeypatch.setenv("NO_GCE_CHECK", "True")
        provider = make_provider("vertex", base_url=server.vertex_url)
        assert ACCESS_TOKEN not in provider.live_credentials()
        server.script(Turn([text("hi")]))
        _, outcome = await collect(provider, request(model="claude-sonnet-4-5@20250929"))
        assert outcome.response is not None, outcome.failure
        assert server.token_requests == 1
        assert ACCESS_TOKEN in provider.live_credentials()
        await provider.aclose()


def test_google_user_credentials_give_token_refresh_token_and_client_secret() -> None:
    from anthropic import AsyncAnthropicVertex
    from google.oauth2.credentials import Credentials

    creds = Credentials(
        token="ya29.user-access-Zq8Wm2Lt5Xv",
        refresh_token="1//refresh-Hx3Kd9Mw2Nb6Vc1",
        client_id="client.apps.googleusercontent.com",
        client_secret="GOCSPX-clientSecret-Rt4Yu7",
    )
    client = AsyncAnthropicVertex(credentials=creds, region="us-east5", project_id="p")
    held = client_credentials(client)
    assert {"ya29.user-access-Zq8Wm2Lt5Xv", "1//refresh-Hx3Kd9Mw2Nb6Vc1"} <= set(held)
    assert "GOCSPX-clientSecret-Rt4Yu7" in held


async def test_anthropic_holds_its_key_and_credential_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Gateway-Token: gw-Lq4Zt8Wx2Mv6Nb1\nX-Team: a")
    with FakeAnthropic() as server:
        provider = make_provider(
            "anthropic", api_key="sk-ant-given-Qm7vX2pL9", base_url=server.base_url
        )
        assert "sk-ant-given-Qm7vX2pL9" in provider.live_credentials()
        server.script(Turn([text("hi")]))
        _, outcome = await collect(provider, request())
        assert outcome.response is not None, outcome.failure
        held = provider.live_credentials()
        assert "gw-Lq4Zt8Wx2Mv6Nb1" in held and "sk-ant-given-Qm7vX2pL9" in held
        assert not any("X-Team" in v or v == "a" for v in held)
        await provider.aclose()


async def test_openai_holds_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-openai-Vb8nM3qW6")
    with FakeOpenAI(api_key="sk-proj-openai-Vb8nM3qW6") as server:
        provider = make_provider("openai", base_url=server.base_url)
        assert "sk-proj-openai-Vb8nM3qW6" in provider.live_credentials()
        await provider.aclose()


async def test_a_lazy_provider_holds_nothing_until_built_then_what_it_built() -> None:
    with FakeAnthropic() as server:
        lazy = LazyProvider(
            lambda: make_provider(
                "anthropic", api_key="sk-ant-lazy-Zr5Tq8Wm1", base_url=server.base_url
            ),
            name="anthropic",
        )
        assert lazy.live_credentials() == ()
        await lazy.provider()
        assert "sk-ant-lazy-Zr5Tq8Wm1" in lazy.live_credentials()
        await lazy.aclose()


def test_every_provider_kind_declares_its_live_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "p")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-declared-Vb8nM3")
    for kind in PROVIDERS:
        provider = make_provider(kind, base_url="http://127.0.0.1:9")
        held = provider.live_credentials()
        assert isinstance(held, tuple) and all(isinstance(v, str) for v in held), kind


def test_header_secrets_takes_credential_headers_and_the_token_after_the_scheme() -> None:
    found = header_secrets(
        {
            "Authorization": "Bearer tok-Zr5Tq8Wm1Xn4",
            "x-api-key": "k-Qm7vX2pL9tR4",
            "Cookie": "session=Sx7Kd2Mw9Nb4",
            "anthropic-version": "2023-06-01",
            "X-Team": "data-science-team",
        }
    )
    assert "tok-Zr5Tq8Wm1Xn4" in found and "Bearer tok-Zr5Tq8Wm1Xn4" in found
    assert "k-Qm7vX2pL9tR4" in found and "session=Sx7Kd2Mw9Nb4" in found
    assert "2023-06-01" not in found and "data-science-team" not in found
