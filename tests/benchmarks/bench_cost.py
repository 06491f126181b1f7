"""What prompt caching saves on a long tool session, measured against the caching fake.

A scripted 30-round tool session: a ~20k-token system prompt and tool list, the
first rounds read files worth ~30k tokens, every round adds tool calls and
results (three rounds fan out into 12 parallel calls, more blocks than the
API's 20-block lookback). The history is the real one: persisted messages
turned into requests by `core.messages.to_api_messages`, sent by the real
provider through the official SDK to the fake, which bills each request as the
API documents (prefix match, lookback, minimum length, TTL).

Printed, one run: billed-equivalent input tokens (fresh input 1x, cache writes
1.25x for 5m or 2x for 1h, cache reads 0.1x) with caching (both TTLs) against
the same session without caching, and the cache-read share of input tokens
after round 1. Targets: share >= 85%; billed-equivalent <= 0.25x uncached.

Run: /work/venv/bin/python tests/benchmarks/bench_cost.py
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.messages import to_api_messages
from phoenix_nb.core.values import ToolUseBlock, Usage
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import LlmOutcome
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use

ROUNDS = 30
MODEL = "claude-sonnet-5-5"
WIDE_ROUNDS = {7, 16, 24}  # 12 parallel calls: 36+ new blocks in one round
WRITE_WEIGHT = {"5m": 1.25, "1h": 2.0}


def words(rng: random.Random, n_tokens: int) -> str:
    """About n_tokens tokens of varied text (the fake counts 4 characters a token)."""
    vocab = ["def", "return", "self", "value", "config", "items", "result", "path", "42"]
    out: list[str] = []
    size = 0
    while size < n_tokens * 4:
        word = rng.choice(vocab) + str(rng.randrange(1000))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def tools(rng: random.Random) -> list[dict[str, Any]]:
    names = ["bash", "patch", "keyword_search", "think", "read_file", "list_dir"]
    return [
        {
            "name": name,
            "description": words(rng, 800),
            "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
        }
        for name in names
    ]


def agent_turn(round_no: int, rng: random.Random) -> Turn:
    calls = 12 if round_no in WIDE_ROUNDS else rng.randint(1, 3)
    blocks: list[Any] = [text(f"Round {round_no}: " + words(rng, 60))]
    for i in range(calls):
        blocks.append(
            tool_use("bash", {"arg": f"step {round_no}.{i}"}, id=f"toolu_b{round_no}_{i}")
        )
    return Turn(blocks, usage=None)


def result_text(round_no: int, rng: random.Random) -> str:
    if round_no <= 3:  # reading the files of the project
        return words(rng, 10_000)
    return words(rng, rng.randint(150, 900))


async def session(fake: FakeAnthropic, ttl: str | None, seed: int) -> list[Usage]:
    rng = random.Random(seed)
    system = words(rng, 15_000)
    tool_specs = tools(rng)
    provider = AnthropicProvider(api_key="bench", base_url=fake.base_url, cache_ttl=ttl)
    history: list[dict[str, Any]] = [
        {"message_type": "user", "content": {"text": "Fix the failing tests.", "images": []}}
    ]
    usages: list[Usage] = []
    for round_no in range(1, ROUNDS + 1):
        fake.script(agent_turn(round_no, rng))
        request = LlmRequest(
            model=MODEL,
            system=system,
            messages=to_api_messages(history),
            tools=tool_specs,
            max_tokens=4096,
        )
        outcome = None
        async for update in provider.stream(request):
            if isinstance(update, LlmOutcome):
                outcome = update
        assert outcome is not None and outcome.response is not None, outcome
        response = outcome.response
        usages.append(response.usage)
        blocks = to_json(response.content)
        history.append(
            {"message_type": "agent", "content": {"blocks": blocks, "stop_reason": "tool_use"}}
        )
        for block in response.content:
            if isinstance(block, ToolUseBlock):
                content = {
                    "tool_use_id": block.id,
                    "content": result_text(round_no, rng),
                    "is_error": False,
                    "images": [],
                }
                history.append({"message_type": "tool", "content": content})
    await provider.aclose()
    return usages


def billed(usages: list[Usage], write_weight: float) -> float:
    return sum(
        u.input_tokens
        + write_weight * u.cache_creation_input_tokens
        + 0.1 * u.cache_read_input_tokens
        for u in usages
    )


def prompt(u: Usage) -> int:
    return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens


async def main() -> None:
    seed = 15
    results: dict[str | None, list[Usage]] = {}
    for ttl in (None, "5m", "1h"):
        with FakeAnthropic() as fake:
            results[ttl] = await session(fake, ttl, seed)
    plain = results[None]
    uncached = float(sum(prompt(u) for u in plain))
    first = prompt(plain[0])
    print(
        f"rounds: {ROUNDS}; prompt at round 1 {first:,} tokens (system + tools), "
        f"round 4 {prompt(plain[3]):,} (files read), round {ROUNDS} {prompt(plain[-1]):,}"
    )
    print(f"without caching: {uncached:,.0f} input tokens billed (1.00x)")
    for ttl in ("5m", "1h"):
        usages = results[ttl]
        assert [prompt(u) for u in usages] == [prompt(u) for u in plain], "same prompts"
        cost = billed(usages, WRITE_WEIGHT[ttl])
        later = usages[1:]
        share = sum(u.cache_read_input_tokens for u in later) / sum(prompt(u) for u in later)
        print(
            f"caching, ttl {ttl}: {cost:,.0f} billed-equivalent ({cost / uncached:.3f}x uncached; "
            f"target <= 0.25); cache-read share after round 1: {share:.1%} (target >= 85%)"
        )


if __name__ == "__main__":
    asyncio.run(main())
