"""Provider streaming cost against bare SDK iteration, measured in the same run.

The fake streams a 100,000-token answer (one token, ~4 characters, per delta)
as fast as it can. We time iterating the SDK's raw event stream and iterating
the provider's updates (which also accumulates the final response), best of
several alternating rounds, and print the ratio. Target: provider <= 1.3x raw.
The same for Chat Completions: the openai adapter (`llm/openai_chat.py`) against
iterating the `openai` SDK's chunks, on the fake Chat Completions server.

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


if __name__ == "__main__":
    n_tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    n_rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    asyncio.run(main(n_tokens, n_rounds))
