"""Provider streaming cost against bare SDK iteration, measured in the same run.

The fake streams a 100,000-token answer (one token, ~4 characters, per delta)
as fast as it can. We time iterating the SDK's raw event stream and iterating
the provider's updates (which also accumulates the final response), best of
several alternating rounds, and print the ratio. Target: provider <= 1.3x raw.
The same for Chat Completions: the openai adapter (`llm/openai_chat.py`) against
iterating the `openai` SDK's chunks, on the fake Chat Completions server; and for
Bedrock and Vertex, the adapter against iterating the same SDK client's events. (A
compatible server at a base URL is the first case's adapter.) All in one run.

Run: /work/venv/bin/python tests/benchmarks/bench_stream.py [tokens] [rounds]
"""

from __future__ import annotations

import asyncio
import sys
import time

import anthropic

from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import LlmOutcome
from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.fake_openai import FakeOpenAI

KEY = "bench-key"


async def raw_sdk(base_url: str, req: LlmRequest) -> float:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0)
    start = time.perf_counter()
    stream = await client.messages.create(
        model=req.model, max_tokens=req.max_tokens, messages=req.messages, stream=True
    )
    count = 0
    async for _event in stream:
        count += 1
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


async def provider_stream(base_url: str, req: LlmRequest) -> float:
    provider = AnthropicProvider(api_key=KEY, base_url=base_url)
    start = time.perf_counter()
    outcome = None
    async for update in provider.stream(req):
        if isinstance(update, LlmOutcome):
            outcome = update
    elapsed = time.perf_counter() - start
    await provider.aclose()
    assert outcome is not None and outcome.response is not None, outcome
    return elapsed


async def raw_openai(base_url: str, req: LlmRequest) -> float:
    import openai

    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0)
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model=req.model,
        max_tokens=req.max_tokens,
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    async for _chunk in stream:
        pass
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


async def openai_adapter(base_url: str, req: LlmRequest) -> float:
    from phoenix_nb.llm.openai_chat import OpenAIChatProvider

    provider = OpenAIChatProvider(api_key=KEY, base_url=base_url)
    start = time.perf_counter()
    outcome = None
    async for update in provider.stream(req):
        if isinstance(update, LlmOutcome):
            outcome = update
    elapsed = time.perf_counter() - start
    await provider.aclose()
    assert outcome is not None and outcome.response is not None, outcome
    return elapsed


async def raw_cloud(client: object, req: LlmRequest) -> float:
    """Iterating a cloud client's (Bedrock, Vertex) raw event stream."""
    start = time.perf_counter()
    stream = await client.messages.create(  # type: ignore[attr-defined]
        model=req.model, max_tokens=req.max_tokens, messages=req.messages, stream=True
    )
    async for _event in stream:
        pass
    elapsed = time.perf_counter() - start
    await client.close()  # type: ignore[attr-defined]
    return elapsed


async def cloud_adapter(kind: str, base_url: str, req: LlmRequest) -> float:
    from phoenix_nb.llm.providers import make_provider

    provider = make_provider(kind, base_url=base_url)
    start = time.perf_counter()
    outcome = None
    async for update in provider.stream(req):
        if isinstance(update, LlmOutcome):
            outcome = update
    elapsed = time.perf_counter() - start
    await provider.aclose()
    assert outcome is not None and outcome.response is not None, outcome
    return elapsed


async def clouds(answer: str, rounds: int) -> None:
    """Bedrock (AWS event stream, SigV4) and Vertex (google-auth token) through their
    anthropic SDK clients: the adapter against iterating the same client's events."""
    import os
    import tempfile
    from pathlib import Path

    from anthropic import AsyncAnthropicBedrock, AsyncAnthropicVertex

    from phoenix_nb.testing.fake_bedrock import FakeBedrock
    from phoenix_nb.testing.fake_vertex import FakeVertex

    folder = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    os.environ.update(
        AWS_ACCESS_KEY_ID="AKIDFAKEFAKEFAKE",
        AWS_SECRET_ACCESS_KEY="fake-secret-access-key",
        AWS_REGION="us-west-2",
        AWS_CONFIG_FILE=str(folder / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(folder / "none"),
        CLOUD_ML_REGION="us-east5",
        ANTHROPIC_VERTEX_PROJECT_ID="fake-project",
        CLOUDSDK_CONFIG=str(folder / "gcloud"),
        NO_GCE_CHECK="True",
    )
    cases = [
        ("bedrock", FakeBedrock(), "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("vertex", FakeVertex(), "claude-sonnet-4-5@20250929"),
    ]
    for kind, fake, model in cases:
        go = [{"role": "user", "content": "go"}]
        req = LlmRequest(model=model, system="", messages=go, max_tokens=200_000)
        with fake:
            fake.add_rule(lambda r: True, Turn([text(answer, chunk=4)]))
            if isinstance(fake, FakeVertex):
                os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(fake.credentials_file(folder))
                url = fake.vertex_url
            else:
                url = fake.base_url
            raw_times, adapter_times = [], []
            for _ in range(rounds):
                client = (
                    AsyncAnthropicVertex(base_url=url, max_retries=0)
                    if kind == "vertex"
                    else AsyncAnthropicBedrock(base_url=url, max_retries=0)
                )
                raw_times.append(await raw_cloud(client, req))
                adapter_times.append(await cloud_adapter(kind, url, req))
        raw, adapter = min(raw_times), min(adapter_times)
        print(f"raw {kind} iteration:{' ' * (10 - len(kind))}{raw:.3f} s (best of {rounds})")
        print(f"{kind} adapter:{' ' * (16 - len(kind))}{adapter:.3f} s (best of {rounds})")
        print(f"ratio adapter/raw:      {adapter / raw:.3f}  (target <= 1.3)")


async def main(tokens: int, rounds: int) -> None:
    answer = "tok " * tokens
    req = LlmRequest(
        model="claude-bench",
        system="",
        messages=[{"role": "user", "content": "go"}],
        max_tokens=200_000,
    )
    with FakeAnthropic() as fake:
        fake.add_rule(lambda r: True, Turn([text(answer, chunk=4)]))
        raw_times: list[float] = []
        provider_times: list[float] = []
        for _ in range(rounds):
            raw_times.append(await raw_sdk(fake.base_url, req))
            provider_times.append(await provider_stream(fake.base_url, req))
    raw, prov = min(raw_times), min(provider_times)
    print(f"tokens streamed:        {tokens}")
    print(f"raw SDK iteration:      {raw:.3f} s (best of {rounds})")
    print(f"provider event stream:  {prov:.3f} s (best of {rounds})")
    print(f"ratio provider/raw:     {prov / raw:.3f}  (target <= 1.3)")
    with FakeOpenAI() as chat:
        chat.add_rule(lambda r: True, Turn([text(answer, chunk=4)]))
        raw_times, adapter_times = [], []
        for _ in range(rounds):
            raw_times.append(await raw_openai(chat.base_url, req))
            adapter_times.append(await openai_adapter(chat.base_url, req))
    raw, adapter = min(raw_times), min(adapter_times)
    print(f"raw openai iteration:   {raw:.3f} s (best of {rounds})")
    print(f"Chat Completions adapter: {adapter:.3f} s (best of {rounds})")
    print(f"ratio adapter/raw:      {adapter / raw:.3f}  (target <= 1.3)")
    await clouds(answer, rounds)


if __name__ == "__main__":
    n_tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    n_rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    asyncio.run(main(n_tokens, n_rounds))
