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

Behind the phoenix gateway (a JupyterHub, `phoenix_nb.hub`) a kernel holds no cloud
credential: `api_key` is then the user's Hub token, which Bedrock's client sends
as its bearer key and Vertex's as its access token, to the gateway's base URL; the
gateway signs or re-authorizes each request with its own credentials. The region
and project the clients want in their URLs are placeholders there (the gateway
puts the admin's in the upstream's path), unless the environment names them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from phoenix_nb.errors import PhoenixError

if TYPE_CHECKING:
    from phoenix_nb.core.models import ModelSpec

__all__ = ["EXTRAS", "ProviderUnavailable", "make_provider"]

# The pip extra that brings each provider's SDK parts.
EXTRAS = {"bedrock": "bedrock", "vertex": "vertex", "openai": "openai"}
# The region or project a cloud client puts in its URLs when the gateway answers for
# the cloud (it replaces them with the admin's): never a real one, so never mistaken.
_GATEWAY_PLACEHOLDER = "phoenix-gateway"


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
        gateway: dict[str, Any] = {}
        if api_key:  # the gateway's: the Hub token as a Bedrock API key, any region
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            gateway = {"api_key": api_key, "aws_region": region or _GATEWAY_PLACEHOLDER}
        try:
            client = AsyncAnthropicBedrock(
                base_url=base_url, max_retries=0, timeout=limits, **gateway
            )
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
            if not api_key:
                import google.auth  # noqa: F401  (application-default credentials)
            from anthropic import AsyncAnthropicVertex
        except ImportError as exc:
            raise _missing(kind, exc) from None
        vertex: dict[str, Any] = {}
        if api_key:  # the gateway's: the Hub token as the access token
            vertex = {
                "access_token": api_key,
                "region": os.environ.get("CLOUD_ML_REGION") or _GATEWAY_PLACEHOLDER,
                "project_id": os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID") or _GATEWAY_PLACEHOLDER,
            }
        try:
            client = AsyncAnthropicVertex(
                base_url=base_url, max_retries=0, timeout=limits, **vertex
            )
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
