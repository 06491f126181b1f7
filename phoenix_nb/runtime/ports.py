"""The ports of the runtime: what the conversation loop needs from the world.

The loop (`conversation.py`) knows executors only through these small
`typing.Protocol`s, so no runtime module needs `Any` for another and a test or
a new executor can stand in for any of them structurally. The concrete
executors are `phoenix_nb.llm.provider.AnthropicProvider` and
`phoenix_nb.demo.DemoProvider` (LLM requests), `phoenix_nb.tools` (tools),
`asyncio` timers, and `runtime.subagents.SubAgentSpawner` (sub-agents).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.llm.stream import StreamUpdate


class LlmProvider(Protocol):
    """Streams Messages API responses; Claude and the demo model both stand behind it."""

    def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        """Deltas as they arrive, then exactly one LlmOutcome; never raises for API faults."""
        ...

    async def complete_text(self, request: LlmRequest) -> str:
        """A small non-streamed call; its text, or LlmCallError."""
        ...

    async def aclose(self) -> None:
        """Release connections (and, for the demo, its server)."""
        ...
