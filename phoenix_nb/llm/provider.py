"""The Anthropic provider: the official SDK, streamed, with every failure classified.

Why the raw event stream: `client.messages.create(..., stream=True)` yields
the SDK's typed SSE events and nothing more, while `messages.stream()` also
rebuilds a full snapshot of the message after every event (and re-parses the
growing tool JSON each time). We need the deltas anyway, so we accumulate
ourselves: joined string parts per block, tool JSON parsed once at the end.
Measured here on 30,000 deltas: the helper took 2.5-3x bare iteration;
this provider stays within noise of it (`tests/benchmarks/bench_stream.py`).

Nothing the API returns is dropped: blocks phoenix does not interpret
(redacted_thinking, server tool calls and their results, MCP blocks,
compaction, types not known today) become `RawBlock`s holding the block's JSON
as sent, completed from their deltas, and text citations are kept; the history
sends them back unchanged (the API requires it after `pause_turn` and for
redacted reasoning before a tool call).

Every request carries prompt-cache breakpoints (`caching.CachePlanner`), thinking
when asked and images, unless the model is described as lacking them or its server
rejected them (`capabilities`: the request is sent again without, with one line).

The same class serves every server of this wire format: Anthropic's API, a
compatible local or self-hosted server (a base URL), and Bedrock and Vertex,
whose anthropic SDK clients (`AsyncAnthropicBedrock`, `AsyncAnthropicVertex`)
take the same requests and yield the same events (`providers.make_provider`
builds each and hands the client in).

The request body is encoded here, each history message once (`body.MessagesBody`),
and handed to the SDK's own client as bytes (`post(..., content=...)`): the SDK
would otherwise deep-copy and JSON-encode the whole history for every round. The
SDK still sends it (headers, timeouts, error types, typed stream events). A
client built elsewhere (Bedrock, Vertex) rewrites the body as a dict before it
sends it, so it gets the parameters through its own `messages.create`.

Retries belong to the state machine (REQ-BED-006), so the SDK's are off
(`max_retries=0`). The key is held by the SDK client only; it never appears
in `repr`, in failure messages or in logs written here.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from phoenix_nb.core.models import NO_SPECS, ModelSpec
from phoenix_nb.core.values import (
    SERVER_TOOL_CALL_TYPES,
    Citation,
    CitedTextBlock,
    ContentBlock,
    ErrorKind,
    LlmFailure,
    RawBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from phoenix_nb.llm import capabilities
from phoenix_nb.llm.body import MessagesBody
from phoenix_nb.llm.caching import CachePlanner
from phoenix_nb.llm.credentials import client_credentials
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
    final_response,
)


@dataclass(frozen=True)
class LlmRequest:
    """One Messages API request, already in API format (see core.messages.to_api_messages).

    A message handed to a request is never changed afterwards (a changed message is
    a new dict): the provider keeps each message's encoding by identity.

    `thinking` is passed through as the API's `thinking` parameter (e.g.
    `{"type": "enabled", "budget_tokens": 2000}`); None leaves it off.
    """

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    thinking: Mapping[str, Any] | None = None
    # HTTP headers for this request only: a JupyterHub's phoenix gateway is told the
    # conversation (x-phoenix-conversation) for its audit line and per-conversation
    # budget; it strips them before forwarding. Empty for a provider's own API.
    headers: Mapping[str, str] = field(default_factory=dict)


class _Block:
    """A content block being assembled from deltas.

    kind "raw" keeps `raw` (the start block's JSON) and merges deltas into it.
    """

    __slots__ = ("citations", "id", "input", "kind", "name", "parts", "raw", "signature")

    def __init__(self, kind: str, id: str = "", name: str = "", input: Any = None) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.signature = ""
        self.id = id
        self.name = name
        self.input = input
        self.raw: dict[str, Any] = {}
        self.citations: list[dict[str, Any]] = []

    def finish(self, stop_reason: str | None) -> ContentBlock | None:
        text = "".join(self.parts)
        if self.kind == "text":
            if self.citations:
                return CitedTextBlock(text, tuple(Citation(c) for c in self.citations))
            return TextBlock(text)
        if self.kind == "thinking":
            return ThinkingBlock(text, self.signature)
        if self.kind == "tool_use":
            return _tool_block(self.id, self.name, text, self.input, stop_reason)
        if self.kind == "raw":
            if self.parts:  # streamed input JSON of a server / MCP tool call
                try:
                    self.raw["input"] = json.loads(text)
                except json.JSONDecodeError:
                    self.raw["input"] = self.raw.get("input") or {}
            return RawBlock(self.raw)
        return None


def _as_json(model: Any) -> dict[str, Any]:
    """An SDK model as the JSON the API sent (unset fields left out, key order kept)."""
    if isinstance(model, Mapping):
        return dict(model)
    data = model.to_dict(mode="json", exclude_unset=True)
    return dict(data) if isinstance(data, Mapping) else {}


def _merge_delta(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Fold an unknown delta into a raw block: strings append, lists extend, others replace."""
    for key, value in delta.items():
        if key == "type":
            continue
        old = block.get(key)
        if isinstance(old, str) and isinstance(value, str):
            block[key] = old + value
        elif isinstance(old, list) and isinstance(value, list):
            block[key] = [*old, *value]
        else:
            block[key] = value


def _tool_block(
    id: str, name: str, raw: str, start_input: Any, stop_reason: str | None
) -> ToolUseBlock:
    """Parse a tool call's accumulated JSON; unusable input is kept as an error, not a crash."""
    if not raw.strip():
        start = start_input if isinstance(start_input, Mapping) else {}
        return ToolUseBlock(id, name, dict(start))
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        why = (
            "the response hit max_tokens before the input was complete"
            if stop_reason == "max_tokens"
            else f"the input is not valid JSON ({exc.msg} at position {exc.pos})"
        )
        return ToolUseBlock(id, name, {}, input_error=f"Tool input unusable: {why}.")
    if not isinstance(value, dict):
        return ToolUseBlock(
            id, name, {}, input_error="Tool input unusable: it is not a JSON object."
        )
    return ToolUseBlock(id, name, value)


def _usage(raw: Any, base: Usage | None = None) -> Usage:
    """Usage from an SDK usage object; absent fields keep `base`'s (message_delta is cumulative)."""
    base = base or Usage()
    if raw is None:
        return base

    def pick(name: str, old: int) -> int:
        value = getattr(raw, name, None)
        return old if value is None else int(value)

    split = getattr(raw, "cache_creation", None)
    one_hour = getattr(split, "ephemeral_1h_input_tokens", None) if split is not None else None
    return Usage(
        cache_creation_1h_input_tokens=(
            base.cache_creation_1h_input_tokens if one_hour is None else int(one_hour)
        ),
        input_tokens=pick("input_tokens", base.input_tokens),
        output_tokens=pick("output_tokens", base.output_tokens),
        cache_creation_input_tokens=pick(
            "cache_creation_input_tokens", base.cache_creation_input_tokens
        ),
        cache_read_input_tokens=pick("cache_read_input_tokens", base.cache_read_input_tokens),
    )


def _build_client(
    key: str | None, url: str | None, timeout: float, connect_timeout: float, stall: float
) -> Any:
    """The SDK client: run on a worker thread, as it imports the SDK (or waits for the
    import under way on another thread) and builds the TLS context (loading the CA
    bundle holds the GIL for tens of milliseconds)."""
    import anthropic
    import httpx2

    # `read` bounds the wait for headers and every gap between stream chunks.
    return anthropic.AsyncAnthropic(
        api_key=key,
        base_url=url,
        max_retries=0,
        timeout=httpx2.Timeout(timeout, connect=connect_timeout, read=stall),
    )


class AnthropicProvider:
    """Streams Messages API responses as StreamUpdates ending in one LlmOutcome."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        stall_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        cache_ttl: str | None = "1h",
        client: Any = None,
        name: str = "anthropic",
        specs: Mapping[str, ModelSpec] = NO_SPECS,
    ) -> None:
        """`cache_ttl`: "1h" (default; README explains why), "5m", or None for no caching.

        `client`: an SDK client of this wire format built elsewhere (Bedrock, Vertex);
        None builds `AsyncAnthropic`. A base URL without any credential in the
        environment is a local server that needs none: the SDK insists on one, so a
        placeholder is sent (a server that does check answers 401, shown as such).
        """
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        url = base_url if base_url is not None else os.environ.get("ANTHROPIC_BASE_URL")
        self.name = name
        self._secret = key or ""
        self._cache = CachePlanner(cache_ttl)
        self._stall_timeout = stall_timeout
        self.capabilities = capabilities.Capabilities(specs)
        self._notified: set[tuple[str, str]] = set()
        # Per model: responses in a row that carried cache_control and reported no cache
        # activity (see capabilities.IGNORED_AFTER); Anthropic's own API is never judged.
        self._uncached: dict[str, int] = {}
        self._sdk_client: Any = client
        self.body = MessagesBody()
        # Our own client takes the body as encoded bytes; one built elsewhere rewrites it.
        self._encoded = client is None
        if client is not None:
            self.base_url = str(getattr(client, "base_url", "") or base_url or "")
            self._local = False
            self._options = (key, url, timeout, connect_timeout)
            return
        self.base_url = url or "https://api.anthropic.com"
        # A server other than Anthropic's: its models endpoint may answer without a key.
        self._local = bool(url)
        if url and not key and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            key = "no-key-needed"
        self._options = (key, url, timeout, connect_timeout)

    async def _client(self) -> Any:
        """The SDK client, built for the first request.

        `import anthropic` costs 1-7 s; `%load_ext` starts it on a thread. A provider
        is made with every conversation, also for commands that only read the store
        (`%phoenix status`, `list`, `history`), so it must not import the SDK: the
        first request builds the client on a worker thread, waiting for what is left
        of the import under way, while the kernel's loop (Cancel, widgets) stays free.
        """
        if self._sdk_client is None:
            client = await asyncio.to_thread(_build_client, *self._options, self._stall_timeout)
            if self._sdk_client is None:  # two first requests at once: keep one client
                self._sdk_client = client
        return self._sdk_client

    def __repr__(self) -> str:
        key = "set" if self._secret else "unset"
        return f"AnthropicProvider({self.name}, base_url={self.base_url!r}, api_key={key})"

    def live_credentials(self) -> tuple[str, ...]:
        """The key this provider was given and what its SDK client holds now: the API
        key or auth token, credential headers, Bedrock's resolved AWS credentials,
        Vertex's google-auth access and refresh tokens (`credentials.client_credentials`)."""
        return client_credentials(self._sdk_client, (self._secret,))

    async def aclose(self) -> None:
        """Release pooled connections (none if no request was made)."""
        if self._sdk_client is not None:
            await self._sdk_client.close()

    def _params(
        self, request: LlmRequest, off: frozenset[str] | None = None, *, messages: bool = True
    ) -> dict[str, Any]:
        """The request's parameters without the features `off` (the model's, by default);
        `messages=False` leaves the messages unstripped (`_create` strips each once)."""
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if request.thinking is not None:
            params["thinking"] = dict(request.thinking)
        if off is None:
            off = self.capabilities.off(request.model)
        if "caching" not in off:
            params = self._cache.apply(params)
        return capabilities.without(params, off, messages=messages)

    async def _create(
        self, params: dict[str, Any], off: frozenset[str], headers: Mapping[str, str] | None = None
    ) -> Any:
        """Open the response stream for `params` (messages not yet stripped of `off`),
        with the request's own `headers` besides the client's.

        The body is built in a worker thread: only new messages are encoded, but
        finding them and joining the rest still visits every message of the history."""
        client = await self._client()
        if not self._encoded:
            params = capabilities.without(params, off)
            return await client.messages.create(
                **params, stream=True, extra_headers=dict(headers or {}) or None
            )
        import anthropic
        from anthropic.types import Message, RawMessageStreamEvent

        kinds = sorted(off & {"caching", "images"})
        strip = partial(capabilities.message_without, off=off) if kinds else None
        content = await asyncio.to_thread(
            self.body.body, {**params, "stream": True}, strip, ",".join(kinds)
        )
        return await client.post(
            "/v1/messages",
            cast_to=Message,
            content=content,
            stream=True,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
            options={"headers": dict(headers)} if headers else {},
        )

    def lacks(self, model: str) -> tuple[str, ...]:
        """Optional features not sent to `model`: described as missing, or refused."""
        off = self.capabilities.off(model)
        return tuple(f for f in capabilities.FEATURES if f in off)

    def _rejected(self, failure: LlmFailure, params: Mapping[str, Any], model: str) -> str | None:
        """The optional feature a failed request was refused for, now turned off; its
        notice is returned once per model and feature (None: not such a failure)."""
        sent = capabilities.features_in(params) - self.capabilities.off(model)
        feature = capabilities.rejected_feature(failure, sent)
        if feature is None:
            return None
        self.capabilities.turn_off(model, feature)
        return feature

    @property
    def cache_ttl(self) -> str | None:
        return self._cache.ttl

    def _failure(self, exc: BaseException, model: str) -> LlmFailure:
        failure = classify(exc, model=model, stall_timeout=self._stall_timeout, provider=self.name)
        if self._secret and self._secret in failure.message:
            # A proxy or server may echo the key back; it must not reach the notebook.
            failure = LlmFailure(
                failure.kind,
                failure.message.replace(self._secret, "[redacted]"),
                failure.retryable,
                failure.retry_after,
                failure.status,
            )
        return failure

    async def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        """Yield deltas as they arrive, then exactly one LlmOutcome.

        Never raises for API or network faults. Cancelling the task that
        iterates this generator propagates CancelledError and closes the
        connection, which the server sees as a disconnect.
        """
        for _ in (*capabilities.FEATURES, "last"):  # each feature is turned off at most once
            off = self.capabilities.off(request.model)
            params = self._params(request, off, messages=False)
            try:
                raw = await self._create(params, off, request.headers)
            except Exception as exc:
                refused = self._failure(exc, request.model)
                feature = self._rejected(refused, params, request.model)
                if feature is None:
                    yield LlmOutcome(failure=refused)
                    return
                if (request.model, feature) not in self._notified:
                    self._notified.add((request.model, feature))
                    yield ProviderNotice(capabilities.NOTICE[feature])
                continue
            break
        blocks: dict[int, _Block] = {}
        usage = Usage()
        stop_reason: str | None = None
        complete = False
        failure: LlmFailure | None = None
        try:
            async for event in raw:
                etype = event.type
                if etype == "content_block_delta":
                    delta = event.delta
                    dtype = delta.type
                    index = event.index
                    block = blocks[index]
                    if dtype == "text_delta" and block.kind == "text":
                        block.parts.append(delta.text)
                        yield TextDelta(index, delta.text)
                    elif dtype == "input_json_delta":
                        block.parts.append(delta.partial_json)
                        if block.kind == "tool_use":
                            yield ToolInputDelta(index, delta.partial_json)
                        elif block.id:
                            yield ServerToolInputDelta(index, delta.partial_json)
                    elif dtype == "thinking_delta" and block.kind == "thinking":
                        block.parts.append(delta.thinking)
                        yield ThinkingDelta(index, delta.thinking)
                    elif dtype == "signature_delta" and block.kind == "thinking":
                        block.signature += delta.signature
                    elif dtype == "citations_delta" and block.kind == "text":
                        block.citations.append(_as_json(delta.citation))
                    elif block.kind == "raw":
                        _merge_delta(block.raw, _as_json(delta))
                elif etype == "content_block_start":
                    cb = event.content_block
                    ctype = cb.type
                    if ctype == "tool_use":
                        blocks[event.index] = _Block("tool_use", cb.id, cb.name, cb.input)
                        yield ToolUseStart(event.index, cb.id, cb.name)
                    elif ctype == "text":
                        block = _Block("text")
                        if cb.text:
                            block.parts.append(cb.text)
                        block.citations = [_as_json(c) for c in (cb.citations or [])]
                        blocks[event.index] = block
                    elif ctype == "thinking":
                        block = _Block("thinking")
                        if cb.thinking:
                            block.parts.append(cb.thinking)
                        block.signature = cb.signature or ""
                        blocks[event.index] = block
                    else:
                        block = _Block("raw")
                        block.raw = _as_json(cb)
                        blocks[event.index] = block
                        if ctype in SERVER_TOOL_CALL_TYPES:
                            block.id = str(block.raw.get("id") or "")
                            name = str(block.raw.get("name") or "")
                            yield ServerToolUseStart(event.index, block.id, name, ctype)
                elif etype == "message_start":
                    usage = _usage(event.message.usage)
                elif etype == "message_delta":
                    stop_reason = event.delta.stop_reason
                    usage = _usage(event.usage, usage)
                elif etype == "message_stop":
                    complete = True
        except Exception as exc:
            failure = self._failure(exc, request.model)
        finally:
            await raw.close()
        if failure is None and not complete:
            failure = LlmFailure(
                kind=ErrorKind.NETWORK,
                message="The response stream ended early (no message_stop); it will be retried.",
                retryable=True,
            )
        if failure is not None:
            yield LlmOutcome(failure=failure)
            return
        content = tuple(
            b for b in (blocks[i].finish(stop_reason) for i in sorted(blocks)) if b is not None
        )
        if "caching" not in off and self._local and self._caching_ignored(request.model, usage):
            self.capabilities.turn_off(request.model, "caching")
            yield ProviderNotice(capabilities.IGNORED_NOTICE)
        yield LlmOutcome(response=ModelResponse(content, stop_reason, usage))

    def _caching_ignored(self, model: str, usage: Usage) -> bool:
        """Whether this response makes it IGNORED_AFTER in a row, for `model`, that
        carried cache_control on a large prompt and report no cache write or read."""
        if usage.cache_creation_input_tokens or usage.cache_read_input_tokens:
            self._uncached[model] = -1  # the server caches: never judged again
            return False
        if self._uncached.get(model, 0) < 0 or usage.input_tokens < capabilities.IGNORED_MIN_INPUT:
            return False
        self._uncached[model] = self._uncached.get(model, 0) + 1
        return self._uncached[model] >= capabilities.IGNORED_AFTER

    @property
    def has_key(self) -> bool:
        return bool(self._secret)

    async def model_limits(self, model: str) -> tuple[int | None, int | None] | None:
        """(max_input_tokens, max_tokens) from the server's models endpoint; (None, None)
        when it does not know the model (404) or has no such endpoint; None when it
        could not be asked (no key, a network or server fault). The registry or the
        stated default answers then, and a lookup never fails a conversation.

        Anthropic's `GET /v1/models/{id}` reports both figures. A compatible server
        may instead list its models in the OpenAI form (`GET /v1/models`) with the
        window under its own name: vLLM `max_model_len`, llama.cpp `meta.n_ctx_train`,
        others `context_length`.
        """
        models = getattr(await self._client(), "models", None)
        if models is None or not (self._secret or self._local):
            return None  # Bedrock and Vertex have no models endpoint in this SDK
        try:
            info = await models.retrieve(model)
        except Exception as exc:  # any fault: the registry answers instead
            status = getattr(exc, "status_code", None)
            if status not in (404, 405) or not self._local:
                return (None, None) if status in (404, 405) else None
            info = None
        window = getattr(info, "max_input_tokens", None) if info is not None else None
        output = getattr(info, "max_tokens", None) if info is not None else None
        if window is None and output is None and self._local:
            return await self._listed_limits(model)
        return window, output

    async def _listed_limits(self, model: str) -> tuple[int | None, int | None]:
        """The window a compatible server's model list reports, OpenAI-style."""
        try:
            listing = await (await self._client()).get("/v1/models", cast_to=object)
        except Exception:
            return (None, None)
        entries = listing.get("data") if isinstance(listing, Mapping) else None
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, Mapping) or entry.get("id") != model:
                continue
            meta = entry.get("meta") if isinstance(entry.get("meta"), Mapping) else {}
            for value in (
                entry.get("max_input_tokens"),
                entry.get("max_model_len"),
                entry.get("context_length"),
                meta.get("n_ctx_train") if isinstance(meta, Mapping) else None,
            ):
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    output = entry.get("max_tokens")
                    return value, output if isinstance(output, int) else None
        return (None, None)

    async def complete(self, request: LlmRequest) -> ModelResponse:
        """Run `stream` to its end; raise LlmCallError on failure."""
        return await final_response(self.stream(request))

    async def complete_text(self, request: LlmRequest) -> str:
        """A small non-streamed call (keyword_search, summaries): its text, or LlmCallError."""
        while True:
            params = self._params(request)
            try:
                message = await (await self._client()).messages.create(**params)
            except Exception as exc:
                failure = self._failure(exc, request.model)
                if self._rejected(failure, params, request.model) is None:
                    raise LlmCallError(failure) from exc
                continue  # the feature is off now: at most three more tries
            break
        return "".join(b.text or "" for b in message.content if b.type == "text")
