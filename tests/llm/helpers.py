"""Small helpers shared by the llm tests: a request, and collecting a stream."""

from __future__ import annotations

from typing import Any

from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import LlmOutcome, StreamUpdate

BASH_TOOL = {
    "name": "bash",
    "description": "run a command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
PATCH_TOOL = {"name": "patch", "description": "edit", "input_schema": {"type": "object"}}


def request(text: str = "hi", **overrides: Any) -> LlmRequest:
    params: dict[str, Any] = {
        "model": "claude-test",
        "system": "You are a test.",
        "messages": [{"role": "user", "content": text}],
        "tools": [BASH_TOOL, PATCH_TOOL],
        "max_tokens": 1000,
    }
    params.update(overrides)
    return LlmRequest(**params)


async def collect(
    provider: AnthropicProvider, req: LlmRequest | None = None
) -> tuple[list[StreamUpdate], LlmOutcome]:
    updates = [u async for u in provider.stream(req or request())]
    last = updates[-1]
    assert isinstance(last, LlmOutcome)
    assert not any(isinstance(u, LlmOutcome) for u in updates[:-1]), "exactly one outcome"
    return updates[:-1], last
