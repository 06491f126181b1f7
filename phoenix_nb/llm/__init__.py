"""The LLM executor: the Anthropic provider on the official SDK, and image preparation.

Nothing heavy is imported with the package: the SDK loads when a provider is
built, Pillow when an image is prepared (`%load_ext` must stay fast).
"""

from typing import TYPE_CHECKING, Any

from phoenix_nb.llm.errors import LlmCallError, classify
from phoenix_nb.llm.stream import (
    LlmOutcome,
    LlmResponse,
    ServerToolInputDelta,
    ServerToolUseStart,
    StreamUpdate,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
)

if TYPE_CHECKING:
    from phoenix_nb.llm.images import ImageError, image_block, prepare_image
    from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest

_LAZY = {
    "AnthropicProvider": "phoenix_nb.llm.provider",
    "LlmRequest": "phoenix_nb.llm.provider",
    "ImageError": "phoenix_nb.llm.images",
    "image_block": "phoenix_nb.llm.images",
    "prepare_image": "phoenix_nb.llm.images",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnthropicProvider",
    "ImageError",
    "LlmCallError",
    "LlmOutcome",
    "LlmRequest",
    "LlmResponse",
    "ServerToolInputDelta",
    "ServerToolUseStart",
    "StreamUpdate",
    "TextDelta",
    "ThinkingDelta",
    "ToolInputDelta",
    "ToolUseStart",
    "classify",
    "image_block",
    "prepare_image",
]
