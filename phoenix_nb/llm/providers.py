"""Building the provider the settings name: one port, four ways to reach a model.

* `anthropic`: the Messages API through `anthropic.AsyncAnthropic`, at Anthropic
  or at any compatible server given by a base URL (Ollama, llama.cpp, vLLM, a
  LiteLLM proxy, a gateway).
* `bedrock`: `anthropic.AsyncAnthropicBedrock` (extra `phoenix_nb[bedrock]`):
  the AWS credential chain of boto3 (environment, profile, SSO, instance role)
  or a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), the region from
  `AWS_REGION` / the profile; model ids such as `us.anthropic.claude-…-v1:0`.
* `vertex`: `anthropic.AsyncAnthropicVertex` (extra `phoenix_nb[vertex]`):
  Google's application-default credentials, `CLOUD_ML_REGION` and
  `ANTHROPIC_VERTEX_PROJECT_ID`; model ids such as `claude-…@20250929`.
* `openai`: Chat Completions through `openai.AsyncOpenAI` (extra
  `phoenix_nb[openai]`, `openai_chat.OpenAIChatProvider`): `OPENAI_API_KEY`,
  the base URL (or `OPENAI_BASE_URL`) for Gemini, OpenRouter, vLLM and others.

Each SDK is imported here, when its provider is first built, so importing
phoenix_nb and `%load_ext` never load openai, boto3/botocore or google (unless
the warm-up imports the one `c.Phoenix.provider` names, on its thread). The
manager builds bedrock, vertex and openai through `lazy.LazyProvider`, on a
worker thread at the first request: importing and building here takes the
caller's thread for 0.3 s and more. The
credentials are read by the SDKs themselves, where they need them; phoenix
reads only `ANTHROPIC_API_KEY` (and passes no other secret anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from phoenix_nb.errors import PhoenixError

if TYPE_CHECKING:
    from phoenix_nb.core.models import ModelSpec

__all__ = ["EXTRAS", "ProviderUnavailable", "make_provider"]

# The pip extra that brings each provider's SDK parts.
EXTRAS = {"bedrock": "bedrock", "vertex": "vertex", "openai": "openai"}


class ProviderUnavailable(PhoenixError):
    """The provider cannot be built here (its SDK extra is missing, or its SDK refused
    the configuration); the message says what to install or set."""


def _missing(kind: str, exc: ImportError) -> ProviderUnavailable:
    return ProviderUnavailable(
        f"the {kind} provider needs its SDK ({exc.name or exc}): "
        f"pip install 'phoenix_nb[{EXTRAS[kind]}]' and restart the kernel"
    )


def _timeout(timeout: float, connect: float, stall: float) -> Any:
    import httpx2

    # `read` bounds the wait for headers and every gap between stream chunks: a stall.
    return httpx2.Timeout(timeout, connect=connect, read=stall)


def make_provider(
    kind: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    stall_timeout: float = 60.0,
    cache_ttl: str | None = "1h",
    timeout: float = 600.0,
    connect_timeout: float = 10.0,
    specs: Mapping[str, ModelSpec] | None = None,
) -> Any:
    """The provider for `kind` (one of runtime.settings.PROVIDERS); SDK retries are off
    everywhere (REQ-BED-006: the state machine retries). `specs`: the user's model
    descriptions (what each model is said to lack)."""
    from phoenix_nb.core.models import NO_SPECS

    specs = NO_SPECS if specs is None else specs
    from phoenix_nb.llm.provider import AnthropicProvider

    if kind == "anthropic":
        return AnthropicProvider(
            api_key=api_key,
            base_url=base_url,
            stall_timeout=stall_timeout,
            cache_ttl=cache_ttl,
            timeout=timeout,
            connect_timeout=connect_timeout,
            specs=specs,
        )
    limits = _timeout(timeout, connect_timeout, stall_timeout)
    if kind == "bedrock":
        try:
            import boto3  # type: ignore[import-untyped]  # noqa: F401  (SigV4 signing; fail here)
            from anthropic import AsyncAnthropicBedrock
        except ImportError as exc:
            raise _missing(kind, exc) from None
        client: Any
        try:
            client = AsyncAnthropicBedrock(base_url=base_url, max_retries=0, timeout=limits)
        except Exception as exc:  # no region, conflicting credentials: the SDK says which
            raise ProviderUnavailable(f"Bedrock: {exc}") from None
        if not client.api_key:
            # An empty AWS_BEARER_TOKEN_BEDROCK is no key: the SDK would send "Bearer "
            # (an illegal header, seen as a network fault and retried) instead of
            # signing with the AWS credential chain, which then says what is missing.
            client.api_key = None
        return AnthropicProvider(
            client=client,
            name="bedrock",
            stall_timeout=stall_timeout,
            cache_ttl=cache_ttl,
            specs=specs,
        )
    if kind == "vertex":
        try:
            import google.auth  # noqa: F401  (application-default credentials)
            from anthropic import AsyncAnthropicVertex
        except ImportError as exc:
            raise _missing(kind, exc) from None
        try:
            client = AsyncAnthropicVertex(base_url=base_url, max_retries=0, timeout=limits)
        except Exception as exc:  # no region: the SDK says which variable to set
            raise ProviderUnavailable(f"Vertex: {exc}") from None
        return AnthropicProvider(
            client=client,
            name="vertex",
            stall_timeout=stall_timeout,
            cache_ttl=cache_ttl,
            specs=specs,
        )
    if kind == "openai":
        try:
            from phoenix_nb.llm.openai_chat import OpenAIChatProvider
        except ImportError as exc:
            raise _missing(kind, exc) from None
        return OpenAIChatProvider(
            base_url=base_url, stall_timeout=stall_timeout, timeout=limits, specs=specs
        )
    raise ProviderUnavailable(f"unknown provider {kind!r}")
