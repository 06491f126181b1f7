"""The LLM executor: one provider port, several wire formats, and image preparation.

`make_provider` builds the adapter the settings name: the Messages API (Anthropic
and compatible servers), Bedrock and Vertex (the anthropic SDK's own clients), or
OpenAI-compatible Chat Completions (the openai SDK). Nothing heavy is imported with
the package: an SDK loads when its provider is built, Pillow when an image is
prepared (`%load_ext` must stay fast, and openai, boto3 or google never load for a
user who does not use them).

Every provider implements `runtime.ports.LlmProvider`: `stream(request)` yields
the deltas (`stream.py`) and then exactly one `LlmOutcome` (a response or an
`LlmFailure`), never raising for API or network faults; cancelling it closes
the connection.
"""

from typing import TYPE_CHECKING, Any

from phoenix_nb.llm.errors import LlmCallError, classify
from phoenix_nb.llm.stream import (
    LlmOutcome,
    ModelResponse,
    ProviderNotice,
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
    from phoenix_nb.llm.providers import make_provider

_LAZY = {
    "AnthropicProvider": "phoenix_nb.llm.provider",
    "LlmRequest": "phoenix_nb.llm.provider",
    "make_provider": "phoenix_nb.llm.providers",
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
    "ModelResponse",
    "ProviderNotice",
    "ServerToolInputDelta",
    "ServerToolUseStart",
    "StreamUpdate",
    "TextDelta",
    "ThinkingDelta",
    "ToolInputDelta",
    "ToolUseStart",
    "classify",
    "image_block",
    "make_provider",
    "prepare_image",
]
