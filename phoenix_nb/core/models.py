"""Model registry: how much context each model holds and how much it may write.

Continuation (REQ-BED-019/022) compares used tokens against the conversation
model's window; an unknown name gets the smallest known window so that the
threshold fires early rather than never.

The registry is the offline fallback: with an API key the Models API's own
`max_input_tokens` / `max_tokens` for the model win (`with_api_limits`; looked
up and cached by `phoenix_nb.llm.model_limits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ModelInfo:
    context_window: int
    max_output: int
    name: str = ""
    # Where the limits come from: "registry" (this table), "models_api" (the API's
    # own figures), "fallback" (unknown model: the smallest known window, REQ-BED-022).
    source: str = "registry"


def _info(name: str, window: int, max_output: int) -> tuple[str, ModelInfo]:
    return name, ModelInfo(context_window=window, max_output=max_output, name=name)


MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    dict(
        [
            _info("claude-opus-5-5", 200_000, 64_000),
            _info("claude-sonnet-5-5", 200_000, 64_000),
            _info("claude-haiku-5-5", 200_000, 64_000),
            _info("claude-opus-5", 200_000, 64_000),
            _info("claude-sonnet-5", 200_000, 64_000),
            _info("claude-opus-4-8", 200_000, 64_000),
            _info("claude-opus-4-7", 200_000, 64_000),
            _info("claude-opus-4-6", 200_000, 64_000),
            _info("claude-sonnet-4-6", 200_000, 64_000),
            _info("claude-opus-4-5", 200_000, 64_000),
            _info("claude-opus-4-1", 200_000, 32_000),
            _info("claude-opus-4-0", 200_000, 32_000),
            _info("claude-sonnet-4-5", 200_000, 64_000),
            _info("claude-sonnet-4-5[1m]", 1_000_000, 64_000),
            _info("claude-sonnet-4-0", 200_000, 64_000),
            _info("claude-sonnet-4-0[1m]", 1_000_000, 64_000),
            _info("claude-haiku-4-5", 200_000, 64_000),
            _info("claude-3-7-sonnet-latest", 200_000, 64_000),
            _info("claude-3-5-haiku-latest", 200_000, 8_192),
            # The offline demo model served by phoenix_nb.testing.
            _info("demo", 200_000, 8_192),
        ]
    )
)

SMALLEST_KNOWN: ModelInfo = min(MODELS.values(), key=lambda m: (m.context_window, m.max_output))


def model_info(name: str) -> ModelInfo:
    """The model's limits; dated ids (claude-sonnet-4-5-20250929) match their alias.

    Unknown models get the smallest known window (REQ-BED-022).
    """
    if name in MODELS:
        return MODELS[name]
    best = ""
    for known in MODELS:
        if name.startswith(known + "-") and len(known) > len(best):
            best = known
    if best:
        info = MODELS[best]
        return ModelInfo(info.context_window, info.max_output, name)
    return ModelInfo(SMALLEST_KNOWN.context_window, SMALLEST_KNOWN.max_output, name, "fallback")


def with_api_limits(name: str, max_input_tokens: int | None, max_tokens: int | None) -> ModelInfo:
    """The model's limits as the Models API reports them, the registry filling any gap.

    A figure the API leaves out (or reports as non-positive) falls back to the
    registry's, so a model unknown to both keeps REQ-BED-022's smallest window.
    """
    base = model_info(name)
    window = max_input_tokens if max_input_tokens and max_input_tokens > 0 else None
    output = max_tokens if max_tokens and max_tokens > 0 else None
    if window is None and output is None:
        return base
    return ModelInfo(window or base.context_window, output or base.max_output, name, "models_api")
