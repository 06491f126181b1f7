"""Model registry: how much context each model holds, how much it may write, and
which optional features (thinking, prompt caching, images) it takes.

Continuation (REQ-BED-019/022) compares used tokens against the conversation
model's window. Where the figures come from, best first:

1. the user's own description (`c.Phoenix.models`, passed as `specs`, from
   `prices.ModelTables`): the only source for a model served by a local or
   self-hosted server that the registry and the server do not describe;
2. the server's models endpoint (`with_api_limits`; looked up and cached by
   `phoenix_nb.llm.model_limits`);
3. this table, for Claude models under any provider's id form (Bedrock's
   `us.anthropic.claude-…-v1:0`, Vertex's `claude-…@20250929`);
4. a stated default for a model nobody describes: on Anthropic's own API the
   smallest known window (REQ-BED-022, so continuation fires early rather than
   never); on any other server `CONSERVATIVE` (the caller says which, as
   `unknown=`), because a local model's window is often far smaller than
   Claude's and a server such as Ollama truncates the prompt silently instead
   of failing.

The user's descriptions are a value (`specs`, from `Settings.model_tables()`), passed
to every reader by its caller: two `Phoenix` objects in one kernel each see their
own, as with the sandbox policy. The functions are pure given it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ModelInfo:
    context_window: int
    max_output: int
    name: str = ""
    # Where the limits come from: "registry" (this table), "models_api" (the server's
    # own figures), "configured" (c.Phoenix.models), "fallback" (unknown model on
    # Anthropic's API: the smallest known window, REQ-BED-022), "default" (unknown
    # model on another server: CONSERVATIVE).
    source: str = "registry"


@dataclass(frozen=True)
class Supports:
    """Which optional request features a model takes; None: unknown, so phoenix sends
    it and stops when the server rejects it."""

    thinking: bool | None = None
    caching: bool | None = None
    images: bool | None = None

    def lacks(self) -> tuple[str, ...]:
        """The features known to be missing, in a fixed order."""
        return tuple(n for n in ("thinking", "caching", "images") if getattr(self, n) is False)


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
# A model no one describes, on a server other than Anthropic's: small enough that
# continuation starts before most local servers' windows overflow (Ollama's default
# context is a few thousand tokens unless the server is started with more; then
# c.Phoenix.models says so), large enough for phoenix's system prompt and tools.
CONSERVATIVE = ModelInfo(context_window=32_768, max_output=4_096, source="default")


@dataclass(frozen=True)
class ModelSpec:
    """A user's description of a model (`c.Phoenix.models[name]`); None: not said."""

    context_window: int | None = None
    max_output: int | None = None
    supports: Supports = Supports()


NO_SPECS: Mapping[str, ModelSpec] = MappingProxyType({})  # nobody described any model


_BEDROCK = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<id>.+?)(?:-v\d+(?::\d+)?)?$")


def canonical(name: str) -> str:
    """The Anthropic API id of a provider's id form, for the registry and price table:
    Bedrock `us.anthropic.claude-sonnet-4-5-20250929-v1:0` and Vertex
    `claude-sonnet-4-5@20250929` both become `claude-sonnet-4-5-20250929`."""
    match = _BEDROCK.match(name)
    if match:
        name = match.group("id")
    return name.replace("@", "-")


def known_alias(name: str, table: Mapping[str, object]) -> str:
    """The table key for `name`: itself, else the longest alias a dated id extends."""
    name = canonical(name)
    if name in table:
        return name
    best = ""
    for known in table:
        if name.startswith(known + "-") and len(known) > len(best):
            best = known
    return best


def supports(name: str, specs: Mapping[str, ModelSpec] = NO_SPECS) -> Supports:
    """What `name` is known to take: the user's description, else unknown (None)."""
    spec = specs.get(name)
    return spec.supports if spec is not None else Supports()


def model_info(
    name: str, unknown: ModelInfo | None = None, specs: Mapping[str, ModelSpec] = NO_SPECS
) -> ModelInfo:
    """The model's limits; dated ids (claude-sonnet-4-5-20250929) match their alias.

    Unknown models get `unknown` (CONSERVATIVE off Anthropic's API), else the
    smallest known window (see the module docstring). `specs`: the user's descriptions.
    """
    spec = specs.get(name)
    alias = known_alias(name, MODELS)
    base = (
        ModelInfo(MODELS[alias].context_window, MODELS[alias].max_output, name) if alias else None
    )
    if alias == name:
        base = MODELS[name]
    if spec is not None and (spec.context_window or spec.max_output):
        fill = base or _unknown(name, unknown)
        return ModelInfo(
            spec.context_window or fill.context_window,
            spec.max_output or fill.max_output,
            name,
            "configured",
        )
    return base or _unknown(name, unknown)


def _unknown(name: str, default: ModelInfo | None) -> ModelInfo:
    if default is not None:
        return ModelInfo(default.context_window, default.max_output, name, "default")
    return ModelInfo(SMALLEST_KNOWN.context_window, SMALLEST_KNOWN.max_output, name, "fallback")


def with_api_limits(
    name: str,
    max_input_tokens: int | None,
    max_tokens: int | None,
    unknown: ModelInfo | None = None,
    specs: Mapping[str, ModelSpec] = NO_SPECS,
) -> ModelInfo:
    """The model's limits as the server reports them, the registry filling any gap.

    A figure the server leaves out (or reports as non-positive) falls back to the
    registry's, so a model unknown to both keeps the stated default. The user's
    own description wins over both.
    """
    base = model_info(name, unknown, specs)
    if base.source == "configured":
        return base
    window = max_input_tokens if max_input_tokens and max_input_tokens > 0 else None
    output = max_tokens if max_tokens and max_tokens > 0 else None
    if window is None and output is None:
        return base
    return ModelInfo(window or base.context_window, output or base.max_output, name, "models_api")
