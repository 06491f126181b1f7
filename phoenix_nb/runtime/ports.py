"""The ports of the runtime: what the conversation loop needs from the world.

The loop (`conversation.py`) knows executors only through these small
`typing.Protocol`s, so no runtime module needs `Any` for another and a test or
a new executor can stand in for any of them structurally. The concrete
executors are `phoenix_nb.llm.provider.AnthropicProvider` (Anthropic, compatible
servers, Bedrock, Vertex), `phoenix_nb.llm.openai_chat.OpenAIChatProvider` (Chat
Completions) and `phoenix_nb.demo.DemoProvider` (LLM requests; built by
`phoenix_nb.llm.providers.make_provider`), `phoenix_nb.tools` (tools),
`asyncio` timers, and `runtime.subagents.SubAgentSpawner` (sub-agents).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

from phoenix_nb.core.effects import SpawnSubAgents
from phoenix_nb.core.events import Event
from phoenix_nb.core.states import ConvContext
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.llm.stream import StreamUpdate
from phoenix_nb.runtime.turn_pool import TurnPool
from phoenix_nb.tools.base import Tool, ToolContext


class LlmProvider(Protocol):
    """Streams responses to Messages-API-shaped requests, whatever the wire format behind
    (Claude, a compatible server, Bedrock, Vertex, Chat Completions, the demo model)."""

    def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        """Deltas as they arrive, then exactly one LlmOutcome; never raises for API faults.
        A ProviderNotice may come first: an optional feature the server refused is off."""
        ...

    async def complete_text(self, request: LlmRequest) -> str:
        """A small non-streamed call; its text, or LlmCallError."""
        ...

    async def aclose(self) -> None:
        """Release connections (and, for the demo, its server)."""
        ...

    def live_credentials(self) -> tuple[str, ...]:
        """Every credential this provider holds now, as the values a fork of the kernel
        must scrub: keys and tokens it was given, and what its SDK made or resolved
        since (an OAuth access token, its refresh token, cloud credentials read from a
        file or a cache, credential headers). Reads memory only: never refreshes, never
        asks a server, never imports an SDK; empty before a client exists. A new
        provider must say how its live credentials are found (REQ: README "Secrets")."""
        ...


class WorkTreeRecorder(Protocol):
    """Checkpoints of a conversation's working tree (`phoenix_nb.checkpoints.Checkpoints`).

    The loop calls `writes_possible` when write access begins (approval) or a
    turn begins Unrestricted, and runs every tool call through `around_tool`,
    which checkpoints before and after a call that can write and returns the
    result with what the call changed (`ToolResult.changes`).
    """

    async def writes_possible(
        self, conversation_id: str, cwd: str, reason: Literal["approval", "turn"]
    ) -> None: ...

    async def around_tool(
        self,
        *,
        conversation_id: str,
        cwd: str,
        mode: Mode,
        tool: str,
        tool_use_id: str,
        run: Callable[[], Awaitable[ToolResult]],
        writes: bool = True,
    ) -> ToolResult: ...


class EventSink(Protocol):
    """Where an executor's result goes back: the conversation's queue (`post`)."""

    def __call__(self, event: Event, /) -> object: ...


class ToolRunner(Protocol):
    """Runs one tool call to its result; never raises for the tool's own failures."""

    def __call__(
        self,
        tools: Iterable[Tool],
        name: str,
        input: Any,
        ctx: ToolContext,
        tool_use_id: str,
        /,
    ) -> Awaitable[ToolResult]: ...


class Parent(Protocol):
    """What a sub-agent needs of the conversation that spawned it."""

    @property
    def id(self) -> str: ...

    @property
    def context(self) -> ConvContext: ...

    @property
    def record(self) -> Mapping[str, Any]:
        """The parent's stored conversation: a child starts on its parent's `server`."""
        ...

    @property
    def closed(self) -> bool: ...

    def post(self, event: Event, *, urgent: bool = False) -> object: ...

    def pool_for_spawn(self) -> TurnPool:
        """The parent turn's budget its sub-agents draw every request from."""
        ...


class SubAgents(Protocol):
    """The sub-agent executor (REQ-BED-008): spawns children and cancels them."""

    def spawn(self, parent: Parent, effect: SpawnSubAgents) -> None: ...

    def cancel(self, parent: Parent, agent_ids: tuple[str, ...]) -> list[asyncio.Task[None]]: ...
