"""Bedrock and Vertex through the anthropic SDK's own clients (`AsyncAnthropicBedrock`,
`AsyncAnthropicVertex`), built by `make_provider` with their standard credential chains,
against fakes that speak each cloud's endpoints and framing: AWS event-stream frames
signed-for with SigV4, Vertex's :streamRawPredict with a token from google-auth."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.core.values import ErrorKind, TextBlock, ToolUseBlock
from phoenix_nb.llm.providers import make_provider
from phoenix_nb.llm.stream import TextDelta, ToolInputDelta
from phoenix_nb.testing import Fault, Turn, text, tool_use
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_vertex import FakeVertex

from .helpers import collect, request

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeBedrock]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-access-key")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with FakeBedrock() as server:
        yield server


@pytest.fixture
def vertex(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeVertex]:
    with FakeVertex() as server:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(server.credentials_file(tmp_path)))
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "fake-project")
        monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
        monkeypatch.setenv("NO_GCE_CHECK", "True")
        yield server


TURN = Turn([text("Checking.", chunk=3), tool_use("bash", {"command": "ls"}, id="toolu_c1")])


async def test_bedrock_streams_a_tool_turn_signed(bedrock: FakeBedrock) -> None:
    bedrock.script(TURN)
    provider = make_provider("bedrock", base_url=bedrock.base_url)
    updates, outcome = await collect(provider, request(model=BEDROCK_MODEL))
    assert outcome.response is not None, outcome.failure
    assert outcome.response.content == (
        TextBlock("Checking."),
        ToolUseBlock("toolu_c1", "bash", {"command": "ls"}),
    )
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "Checking."
    assert any(isinstance(u, ToolInputDelta) for u in updates)
    [wire] = bedrock.wire
    assert wire.path == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    assert wire.body["anthropic_version"] and "model" not in wire.body
    assert wire.headers["authorization"] == "[redacted]"  # it was there, and signed (else 403)
    assert bedrock.requests[0].body["model"] == BEDROCK_MODEL
    await provider.aclose()


@pytest.mark.parametrize(
    ("fault", "kind", "retryable"),
    [
        (Fault.status(429), ErrorKind.RATE_LIMIT, True),
        (Fault.status(400, message="bad input"), ErrorKind.INVALID_REQUEST, False),
        (Fault.in_stream_error("rate_limit_error", after_events=3), ErrorKind.RATE_LIMIT, True),
        (Fault.in_stream_error("overloaded_error", after_events=3), ErrorKind.SERVER_ERROR, True),
        (Fault.drop_after(4), ErrorKind.NETWORK, True),
    ],
)
async def test_bedrock_errors(
    bedrock: FakeBedrock, fault: Fault, kind: ErrorKind, retryable: bool
) -> None:
    bedrock.script(fault)
    provider = make_provider("bedrock", base_url=bedrock.base_url)
    _, outcome = await collect(provider, request(model=BEDROCK_MODEL))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (kind, retryable)
    await provider.aclose()


async def test_vertex_streams_a_tool_turn_with_a_refreshed_token(vertex: FakeVertex) -> None:
    vertex.script(TURN)
    provider = make_provider("vertex", base_url=vertex.vertex_url)
    _, outcome = await collect(provider, request(model=VERTEX_MODEL))
    assert outcome.response is not None, outcome.failure
    assert outcome.response.content[1] == ToolUseBlock("toolu_c1", "bash", {"command": "ls"})
    [wire] = vertex.wire
    assert wire.path == (
        "/v1/projects/fake-project/locations/us-east5/publishers/anthropic/models/"
        f"{VERTEX_MODEL}:streamRawPredict"
    )
    assert wire.body["anthropic_version"] and "model" not in wire.body
    assert vertex.token_requests == 1
    await provider.aclose()


@pytest.mark.parametrize(
    ("fault", "kind", "retryable"),
    [
        (Fault.status(529), ErrorKind.SERVER_ERROR, True),
        (Fault.status(404), ErrorKind.INVALID_REQUEST, False),
        (Fault.drop_after(4), ErrorKind.NETWORK, True),
    ],
)
async def test_vertex_errors(
    vertex: FakeVertex, fault: Fault, kind: ErrorKind, retryable: bool
) -> None:
    vertex.script(fault)
    provider = make_provider("vertex", base_url=vertex.vertex_url)
    _, outcome = await collect(provider, request(model=VERTEX_MODEL))
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (kind, retryable)
    await provider.aclose()


async def test_cancel_mid_stream_reaches_the_server(bedrock: FakeBedrock) -> None:
    bedrock.script(Turn([text("word " * 300, chunk=5, delay=0.05)]))
    provider = make_provider("bedrock", base_url=bedrock.base_url)
    seen = asyncio.Event()

    async def consume() -> None:
        async for update in provider.stream(request(model=BEDROCK_MODEL)):
            if isinstance(update, TextDelta):
                seen.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(seen.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await bedrock.wait_for_async(
        lambda f: any(e.kind == "disconnected" for e in f.events), 30
    )
    await provider.aclose()


@pytest.mark.parametrize(
    ("kind", "module"),
    [("bedrock", "boto3"), ("vertex", "google.auth"), ("openai", "openai")],
)
def test_a_missing_extra_names_what_to_install(
    kind: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from phoenix_nb.llm.providers import ProviderUnavailable

    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "phoenix_nb.llm.openai_chat", raising=False)
    with pytest.raises(ProviderUnavailable) as caught:
        make_provider(kind, base_url="http://127.0.0.1:9")
    assert f"pip install 'phoenix_nb[{kind}]'" in str(caught.value)


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_cloud_credentials_name_the_cloud_s_own_settings(
    bedrock: FakeBedrock, vertex: FakeVertex, status: int
) -> None:
    """Expired or wrong AWS / Google credentials: the message names what that provider
    reads, never ANTHROPIC_API_KEY, and is not retried."""
    said = "The security token included in the request is expired"
    for fake, kind, model, url, names in (
        (bedrock, "bedrock", BEDROCK_MODEL, bedrock.base_url, "AWS_ACCESS_KEY_ID"),
        (vertex, "vertex", VERTEX_MODEL, vertex.vertex_url, "GOOGLE_APPLICATION_CREDENTIALS"),
    ):
        fake.script(Fault.status(status, message=said))
        provider = make_provider(kind, base_url=url)
        _, outcome = await collect(provider, request(model=model))
        failure = outcome.failure
        assert failure is not None and failure.kind is ErrorKind.AUTH and not failure.retryable
        assert names in failure.message and said in failure.message, failure.message
        assert "ANTHROPIC_API_KEY" not in failure.message and "API key" not in failure.message
        await provider.aclose()
