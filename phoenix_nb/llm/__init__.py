"""The LLM executor: the Anthropic provider on the official SDK, and image preparation."""

from phoenix_nb.llm.errors import LlmCallError, classify
from phoenix_nb.llm.images import ImageError, image_block, prepare_image
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import (
    LlmOutcome,
    LlmResponse,
    StreamUpdate,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
)

__all__ = [
    "AnthropicProvider",
    "ImageError",
    "LlmCallError",
    "LlmOutcome",
    "LlmRequest",
    "LlmResponse",
    "StreamUpdate",
    "TextDelta",
    "ThinkingDelta",
    "ToolInputDelta",
    "ToolUseStart",
    "classify",
    "image_block",
    "prepare_image",
]
