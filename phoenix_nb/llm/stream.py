"""What the provider yields while a response streams, and how it ends.

The runtime turns these into core events. They are separate from the core's
events on purpose: the provider can be built and tested without the state
machine, and the runtime decides which updates are worth a UI refresh.

Updates are small frozen slotted dataclasses: one is built per SSE event, so
their construction cost shows up directly in the streaming benchmark.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass

from phoenix_nb.core.values import ContentBlock, LlmFailure, Usage
from phoenix_nb.llm.errors import LlmCallError


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text for the text block at `index` of the response."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """More reasoning for the thinking block at `index`."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolUseStart:
    """The model began a tool call; its input follows as ToolInputDelta."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolInputDelta:
    """A fragment of a tool call's input JSON, not parseable on its own."""

    index: int
    partial_json: str


@dataclass(frozen=True, slots=True)
class ServerToolUseStart:
    """The model began a call the API itself runs (web search, code execution, an MCP
    server): shown as it happens, never executed by phoenix. `kind` is the block
    type (server_tool_use, mcp_tool_use); its input follows as ServerToolInputDelta."""

    index: int
    id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class ServerToolInputDelta:
    """A fragment of a server tool call's input JSON."""

    index: int
    partial_json: str


@dataclass(frozen=True, slots=True)
class ProviderNotice:
    """One line the user should read about how requests are sent from now on (a
    server rejected an optional feature and phoenix stopped sending it)."""

    text: str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A complete response: the model reached `message_stop`."""

    content: tuple[ContentBlock, ...]
    stop_reason: str | None
    usage: Usage


@dataclass(frozen=True, slots=True)
class LlmOutcome:
    """The last item of every stream: exactly one of `response` or `failure` is set."""

    response: ModelResponse | None = None
    failure: LlmFailure | None = None

    def __post_init__(self) -> None:
        if (self.response is None) == (self.failure is None):
            raise ValueError("LlmOutcome needs exactly one of response or failure")


StreamUpdate = (
    TextDelta
    | ThinkingDelta
    | ToolUseStart
    | ToolInputDelta
    | ServerToolUseStart
    | ServerToolInputDelta
    | ProviderNotice
    | LlmOutcome
)


async def final_response(updates: AsyncIterable[StreamUpdate]) -> ModelResponse:
    """Run a stream to its end: its response, or `LlmCallError` with its failure.

    What every provider's `complete` answers; the stream itself never raises for
    API faults, so this is where a failure becomes an exception."""
    outcome: LlmOutcome | None = None
    async for update in updates:
        if isinstance(update, LlmOutcome):
            outcome = update
    assert outcome is not None  # every stream ends with exactly one
    if outcome.failure is not None:
        raise LlmCallError(outcome.failure)
    assert outcome.response is not None
    return outcome.response
