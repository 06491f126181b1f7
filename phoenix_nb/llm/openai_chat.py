"""OpenAI-compatible Chat Completions behind the provider port, on the official `openai` SDK.

For endpoints that speak only Chat Completions: OpenAI itself, Gemini's
OpenAI-compatible endpoint, OpenRouter, and vLLM / llama.cpp / Ollama when used
that way. The journal stays in phoenix's own (Messages API) shape; this module
translates both ways and nothing else does:

* out: the system prompt becomes a system message; each assistant message's
  text and `tool_use` blocks become `content` and `tool_calls`; each
  `tool_result` becomes a `tool` message right after the call it answers
  (images a tool returned follow in a user message: a tool message holds text
  only); user images become `image_url` parts with a data: URL. Every call is
  answered exactly once in what is sent (a missing answer is filled, a stray
  one dropped), so the history is valid for this API whatever the journal holds.
  Thinking and blocks only Anthropic's API understands are left out.
* in: text deltas, reasoning (`reasoning_content` / `reasoning` deltas, from vLLM,
  DeepSeek, Ollama, OpenRouter) as unsigned thinking that is shown and never sent
  back, tool calls streamed as `tool_calls[i]` fragments (parallel
  calls interleave by their `index`), the finish reason and usage (with cached
  prompt tokens where the server reports them) become the same `StreamUpdate`s
  and `ModelResponse` the Messages API provider yields.

The request body is encoded here (`body.MessagesBody.chained`): each journal
message is converted and encoded once, and again only when it follows other
unanswered calls than before (the one thing its conversion depends on besides
itself), in a worker thread; the bytes go to the SDK's own client
(`post(..., content=...)`), which still sends them (headers, timeouts, error
types, typed stream chunks). Letting `chat.completions.create` prepare the body
would convert, copy and encode the whole history on the event loop every round.
An SDK whose `post` takes no raw body gets the parameters through `create`.

Failures are classified into the same kinds and retryability (REQ-BED-006) as
`errors.classify` does for the Messages API; SDK retries are off. The key is
the SDK's (`OPENAI_API_KEY`), read by the SDK only.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any, cast

import openai

from phoenix_nb.core.models import NO_SPECS, ModelSpec
from phoenix_nb.core.values import ErrorKind, LlmFailure, TextBlock, ThinkingBlock, Usage
from phoenix_nb.llm import capabilities
from phoenix_nb.llm.body import Convert, MessagesBody, encode, join_fields
from phoenix_nb.llm.credentials import client_credentials
from phoenix_nb.llm.errors import LlmCallError, retry_after_seconds, status_kind
from phoenix_nb.llm.provider import LlmRequest, _tool_block
from phoenix_nb.llm.stream import (
    LlmOutcome,
    ModelResponse,
    ProviderNotice,
    StreamUpdate,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
    final_response,
)

__all__ = ["OpenAIChatProvider", "convert_message", "to_chat_messages", "to_chat_tools"]

K = ErrorKind
# finish_reason -> the Messages API's stop_reason the state machine reads.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")
# The order of `AsyncCompletions.create`'s body (openai 2.x) for the fields sent here.
CHAT_ORDER = (
    "model",
    "stream",
    "messages",
    "max_completion_tokens",
    "max_tokens",
    "stream_options",
    "tools",
)
# The auth `create` sends: the bearer key (an admin key from the environment is never
# sent to a Chat Completions server in its place).
_SECURITY = {"bearer_auth": True}
THINKING_NOTICE = "Chat Completions has no extended thinking: this model's requests go without it."


def _text_of(content: Any) -> str:
    """The text of a tool result's content: a string, or the strings and text blocks of
    a list (a plain-string result arrives here as a one-item list, and was once lost,
    reaching the model as "(no output)")."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
    return "\n".join(parts)


def _image_part(block: Mapping[str, Any], images: bool) -> dict[str, Any]:
    source = block.get("source") or {}
    if not images or source.get("type") != "base64":
        return {"type": "text", "text": capabilities.IMAGE_LEFT_OUT}
    url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_parts(blocks: Sequence[Any], images: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif isinstance(block, Mapping) and block.get("type") == "image":
            parts.append(_image_part(block, images))
    return parts


def _filled(open_calls: Sequence[str]) -> list[dict[str, Any]]:
    """Answers for calls the history never answered (the API rejects a call left open)."""
    return [{"role": "tool", "tool_call_id": c, "content": "(no result)"} for c in open_calls]


def convert_message(
    message: Mapping[str, Any], open_before: tuple[str, ...], images: bool
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """One journal message as the Chat Completions messages it becomes, given the
    calls left unanswered before it; and the calls it leaves unanswered.

    Depends on nothing but its arguments: the provider keeps each message's result
    and converts it again only when it follows other unanswered calls."""
    content = message.get("content")
    blocks = [content] if isinstance(content, str) else list(content or [])
    if message.get("role") == "assistant":
        out = _filled(open_before)
        text = "".join(
            str(b.get("text") or "")
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
        calls: list[dict[str, Any]] = [
            {
                "id": str(b.get("id")),
                "type": "function",
                "function": {
                    "name": str(b.get("name")),
                    "arguments": json.dumps(b.get("input") or {}),
                },
            }
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ]
        item: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            item["tool_calls"] = calls
        if text or calls:
            out.append(item)
        return out, tuple(str(c["id"]) for c in calls)
    out = []
    open_calls = list(open_before)
    later: list[dict[str, Any]] = []  # tool images, after every tool message
    rest: list[Any] = []
    for block in blocks:
        if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
            rest.append(block)
            continue
        call_id = str(block.get("tool_use_id"))
        if call_id not in open_calls:
            continue  # answers no call that was sent: the API would reject it
        open_calls.remove(call_id)
        inner = block.get("content")
        inner_blocks = [inner] if isinstance(inner, str) else list(inner or [])
        text = _text_of(inner_blocks) or "(no output)"
        if block.get("is_error"):
            text = "Error: " + text
        out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        pictures = [b for b in inner_blocks if isinstance(b, Mapping) and b.get("type") == "image"]
        if pictures:
            later.append({"type": "text", "text": f"(images from tool call {call_id})"})
            later += [_image_part(p, images) for p in pictures]
    out += _filled(open_calls)
    parts = later + _user_parts(rest, images)
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        body: Any = "\n".join(p["text"] for p in parts) if only_text else parts
        out.append({"role": "user", "content": body})
    return out, ()


def to_chat_messages(
    system: str, messages: Sequence[Mapping[str, Any]], *, images: bool = True
) -> list[dict[str, Any]]:
    """A Messages API history as Chat Completions messages (see the module docstring)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    open_calls: tuple[str, ...] = ()  # calls of the last assistant message not yet answered
    for message in messages:
        converted, open_calls = convert_message(message, open_calls, images)
        out += converted
    return out + _filled(open_calls)


def _converter(images: bool) -> Convert:
    def convert(message: Mapping[str, Any], state: Hashable) -> tuple[Sequence[Any], Hashable]:
        return convert_message(message, cast(tuple[str, ...], state), images)

    return convert


def to_chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Client tools as functions; server tools (web search …) have no equivalent here."""
    return [
        {
            "type": "function",
            "function": {
                "name": str(t["name"]),
                "description": str(t.get("description") or ""),
                "parameters": dict(t["input_schema"]),
            },
        }
        for t in tools
        if "input_schema" in t
    ]


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cache_read_input_tokens=cached,
    )


def classify_openai(exc: BaseException, *, stall_timeout: float | None = None) -> LlmFailure:
    """Any exception from the openai SDK as one `LlmFailure` (same kinds as the Messages API)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        kind, retryable = status_kind(status)
        said = str(getattr(exc, "message", "") or "")
        body = exc.body if isinstance(exc.body, Mapping) else {}
        error = body.get("error") if isinstance(body.get("error"), Mapping) else body
        said = str(error.get("message") or said) if isinstance(error, Mapping) else said
        code = str(error.get("code") or "") if isinstance(error, Mapping) else ""
        if kind is K.INVALID_REQUEST and any(
            m in (said + " " + code).lower() for m in _CONTEXT_MARKERS
        ):
            return LlmFailure(
                K.CONTEXT_EXHAUSTED,
                f"The conversation no longer fits the model's context window. {said}".strip(),
                False,
                status=status,
            )
        if status == 401:
            message = "Authentication failed (401): check OPENAI_API_KEY."
        elif retryable:
            message = (
                f"The API answered {status}; the request will be retried. The API said: {said}"
            )
        else:
            message = f"The API rejected the request ({status}). The API said: {said}"
        return LlmFailure(
            kind,
            message,
            retryable,
            retry_after=retry_after_seconds(exc.response.headers),
            status=status,
        )
    if isinstance(exc, openai.APITimeoutError):
        secs = f" for {stall_timeout:g} s" if stall_timeout else ""
        return LlmFailure(
            K.NETWORK, f"The API stopped answering{secs}; the request will be retried.", True
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        why = f" ({type(cause).__name__})" if cause else ""
        return LlmFailure(
            K.NETWORK,
            f"The connection to the API failed{why}; it will be retried. Check the network "
            "or the base URL.",
            True,
        )
    if isinstance(exc, openai.APIError):  # an error sent inside the stream
        return LlmFailure(
            K.SERVER_ERROR,
            f"The API reported an error mid-response; it will be retried. The API said: {exc}",
            True,
        )
    import httpx

    if isinstance(exc, httpx.TransportError):
        return LlmFailure(
            K.NETWORK,
            f"The connection to the API dropped mid-response ({type(exc).__name__});"
            " it will be retried.",
            True,
        )
    if isinstance(exc, openai.OpenAIError) and "api_key" in str(exc):
        return LlmFailure(K.AUTH, "No API key found: set OPENAI_API_KEY.", False)
    if isinstance(exc, json.JSONDecodeError):
        return LlmFailure(
            K.SERVER_ERROR, "The API sent a malformed event; the request will be retried.", True
        )
    return LlmFailure(
        K.UNKNOWN, f"Unexpected error from the LLM client: {type(exc).__name__}: {exc}", False
    )


def _reasoning_of(delta: Any) -> str:
    """The reasoning text of a chunk's delta: `reasoning_content` (vLLM, DeepSeek,
    llama.cpp) or `reasoning` (OpenRouter, Ollama); the SDK keeps such fields it does
    not declare as extra attributes."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


class _Thinking:
    """Reasoning text being assembled. It becomes an unsigned ThinkingBlock: shown as
    thinking, and never sent back (the history leaves unsigned thinking out, and this
    module's conversion all thinking; DeepSeek answers 400 to `reasoning_content` in a
    request)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts


class _Call:
    """A tool call being assembled from `tool_calls[i]` fragments."""

    __slots__ = ("block", "id", "name", "parts")

    def __init__(self, block: int, id: str, name: str) -> None:
        self.block = block
        self.id = id
        self.name = name
        self.parts: list[str] = []


class OpenAIChatProvider:
    """Streams Chat Completions as StreamUpdates ending in one LlmOutcome."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        stall_timeout: float = 60.0,
        timeout: Any = 600.0,
        api_key: str | None = None,
        specs: Mapping[str, ModelSpec] = NO_SPECS,
    ) -> None:
        """`api_key` None: OPENAI_API_KEY. A keyless server at a base URL gets a
        placeholder (the SDK insists on one); OpenAI itself without a key answers every
        request with an authentication failure, sent nowhere."""
        import os

        self._stall_timeout = stall_timeout
        key = api_key or os.environ.get("OPENAI_API_KEY")
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        self._secret = key or ""
        self._missing_key = not key and not url
        if not key:
            key = "no-key-needed"
        self.base_url = url or "https://api.openai.com/v1"
        # OpenAI's own API wants max_completion_tokens; other servers know max_tokens.
        self._limit_field = "max_tokens" if url else "max_completion_tokens"
        self.capabilities = capabilities.Capabilities(specs)
        self._notified: set[tuple[str, str]] = set()
        self._usage_option = True  # stream_options.include_usage, until a server refuses it
        self._client = openai.AsyncOpenAI(api_key=key, base_url=url, max_retries=0, timeout=timeout)
        self.body = MessagesBody()
        # The SDK's `post` takes an encoded body (and the auth to send) in openai >= 2.
        self._encoded = "content" in inspect.signature(self._client.post).parameters
        self._options: dict[str, Any] = (
            {"security": _SECURITY}
            if "security" in getattr(openai, "RequestOptions", dict).__annotations__
            else {}
        )

    def __repr__(self) -> str:
        key = "set" if self._secret else "unset"
        return f"OpenAIChatProvider(base_url={self.base_url!r}, api_key={key})"

    def live_credentials(self) -> tuple[str, ...]:
        """The key and the credential headers the openai client holds now."""
        return client_credentials(self._client, (self._secret,))

    async def aclose(self) -> None:
        await self._client.close()

    def lacks(self, model: str) -> tuple[str, ...]:
        """Thinking always (Chat Completions has none phoenix can keep); caching is the
        server's own affair (OpenAI caches automatically and reports cached tokens, no
        cache_control is sent); images when described as missing or refused."""
        off = self.capabilities.off(model)
        return ("thinking", *(f for f in ("images",) if f in off))

    def _params(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        """Every field but `messages` (`_send` adds them, converted)."""
        params: dict[str, Any] = {
            "model": request.model,
            self._limit_field: request.max_tokens,
        }
        tools = to_chat_tools(request.tools)
        if tools:
            params["tools"] = tools
        if stream:
            params["stream"] = True
            if self._usage_option:
                params["stream_options"] = {"include_usage": True}
        return params

    def _messages(self, request: LlmRequest, images: bool) -> bytes:
        """The JSON array of `request`'s messages as Chat Completions messages; only
        what is new (or follows other unanswered calls) is converted and encoded."""
        items, open_calls = self.body.chained(
            request.messages, _converter(images), "images" if images else "no images"
        )
        head = encode({"role": "system", "content": request.system}) if request.system else b""
        tail = b",".join(map(encode, _filled(cast(tuple[str, ...], open_calls))))
        return b"[" + b",".join(part for part in (head, items, tail) if part) + b"]"

    async def _body(self, request: LlmRequest, params: Mapping[str, Any]) -> bytes | None:
        """The encoded body for `params` with `request`'s messages, built in a worker
        thread; None when the SDK takes no encoded body."""
        if not self._encoded:
            return None
        images = "images" not in self.capabilities.off(request.model)

        def build() -> bytes:
            return join_fields(params, CHAT_ORDER, {"messages": self._messages(request, images)})

        return await asyncio.to_thread(build)

    async def _send(
        self, request: LlmRequest, params: dict[str, Any], content: bytes | None
    ) -> Any:
        """The SDK's response for `params` (a stream of chunks or a completion), sent as
        `content` when encoded, else through `create`."""
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        if content is None:
            images = "images" not in self.capabilities.off(request.model)
            messages = to_chat_messages(request.system, request.messages, images=images)
            return await self._client.chat.completions.create(
                **{**params, "messages": messages}, extra_headers=dict(request.headers) or None
            )
        options = self._options
        if request.headers:  # the request's own (a hub gateway's conversation tag)
            options = {**options, "headers": dict(request.headers)}
        return await self._client.post(
            "/chat/completions",
            cast_to=ChatCompletion,
            content=content,
            options=cast(Any, options),
            stream=bool(params.get("stream")),
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )

    def _sent_images(self, request: LlmRequest, content: bytes | None) -> bool:
        """Whether the failed request carried an image (read only after a failure)."""
        if content is None:
            images = "images" not in self.capabilities.off(request.model)
            content = json.dumps(to_chat_messages("", request.messages, images=images)).encode()
        return b'"image_url"' in content

    def _failure(self, exc: BaseException) -> LlmFailure:
        failure = classify_openai(exc, stall_timeout=self._stall_timeout)
        if self._secret and self._secret in failure.message:
            failure = LlmFailure(
                failure.kind,
                failure.message.replace(self._secret, "[redacted]"),
                failure.retryable,
                failure.retry_after,
                failure.status,
            )
        return failure

    def _degrade(
        self, failure: LlmFailure, params: Mapping[str, Any], model: str, images: bool
    ) -> str | None:
        """A notice when the failure refused something optional, now off; None otherwise."""
        if failure.kind is not K.INVALID_REQUEST:
            return None
        text = failure.message.lower()
        if "stream_options" in params and "stream_options" in text:
            self._usage_option = False
            return "This server rejected usage reports in streams: tokens are not counted."
        sent = frozenset({"images"}) if images else None
        feature = capabilities.rejected_feature(failure, sent or frozenset())
        if feature is None:
            return None
        self.capabilities.turn_off(model, feature)
        return capabilities.NOTICE[feature]

    async def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        """Deltas as they arrive, then exactly one LlmOutcome; never raises for API faults."""
        if self._missing_key:
            yield LlmOutcome(
                failure=LlmFailure(K.AUTH, "No API key found: set OPENAI_API_KEY.", False)
            )
            return
        if request.thinking is not None and (request.model, "thinking") not in self._notified:
            self._notified.add((request.model, "thinking"))
            yield ProviderNotice(THINKING_NOTICE)
        for _ in range(3):  # stream_options and images are each turned off at most once
            params = self._params(request, stream=True)
            content = await self._body(request, params)
            try:
                raw = await self._send(request, params, content)
            except Exception as exc:
                failure = self._failure(exc)
                invalid = failure.kind is K.INVALID_REQUEST
                images = invalid and self._sent_images(request, content)
                notice = self._degrade(failure, params, request.model, images)
                if notice is None:
                    yield LlmOutcome(failure=failure)
                    return
                yield ProviderNotice(notice)
                continue
            break
        text_parts: list[str] = []
        text_index = -1
        think_parts: list[str] = []
        think_index = -1
        blocks = 0
        calls: dict[int, _Call] = {}
        order: list[tuple[int, Any]] = []  # (block index, list of text parts | _Call)
        finish: str | None = None
        usage = Usage()
        failure_out: LlmFailure | None = None
        try:
            async for chunk in raw:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                choices = chunk.choices
                if not choices:
                    continue
                choice = choices[0]
                delta = choice.delta
                if delta is not None:
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        if think_index < 0:
                            think_index, blocks = blocks, blocks + 1
                            think_parts = []
                            order.append((think_index, _Thinking(think_parts)))
                            text_index = -1  # text after reasoning is a new block
                        think_parts.append(reasoning)
                        yield ThinkingDelta(think_index, reasoning)
                    content = delta.content
                    if content:
                        if text_index < 0:
                            text_index, blocks = blocks, blocks + 1
                            text_parts = []
                            order.append((text_index, text_parts))
                            think_index = -1  # reasoning after text is a new block
                        text_parts.append(content)
                        yield TextDelta(text_index, content)
                    tool_calls = delta.tool_calls
                    if tool_calls:
                        for fragment in tool_calls:
                            call = calls.get(fragment.index)
                            function = fragment.function
                            if call is None:
                                call_id = fragment.id or f"call_{blocks}_{fragment.index}"
                                name = (function.name if function is not None else "") or ""
                                call = calls[fragment.index] = _Call(blocks, call_id, name)
                                order.append((blocks, call))
                                blocks += 1
                                text_index = think_index = -1  # after a call: new blocks
                                yield ToolUseStart(call.block, call.id, call.name)
                            if function is not None and function.arguments:
                                call.parts.append(function.arguments)
                                yield ToolInputDelta(call.block, function.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
        except Exception as exc:
            failure_out = self._failure(exc)
        finally:
            await raw.close()
        if failure_out is None and finish is None:
            failure_out = LlmFailure(
                K.NETWORK,
                "The response stream ended early (no finish_reason); it will be retried.",
                True,
            )
        if failure_out is not None:
            yield LlmOutcome(failure=failure_out)
            return
        stop = STOP_REASONS.get(finish or "", "end_turn")
        if calls and stop != "max_tokens":
            stop = "tool_use"  # some servers finish a turn of calls with "stop"
        content_blocks: list[Any] = []
        for _, item in order:
            if isinstance(item, _Call):
                content_blocks.append(
                    _tool_block(item.id, item.name, "".join(item.parts), {}, stop)
                )
            elif isinstance(item, _Thinking):
                content_blocks.append(ThinkingBlock("".join(item.parts), ""))
            else:
                content_blocks.append(TextBlock("".join(item)))
        yield LlmOutcome(response=ModelResponse(tuple(content_blocks), stop, usage))

    async def complete(self, request: LlmRequest) -> ModelResponse:
        """Run `stream` to its end; raise LlmCallError on failure."""
        return await final_response(self.stream(request))

    async def complete_text(self, request: LlmRequest) -> str:
        """A small non-streamed call (keyword_search, summaries): its text, or LlmCallError."""
        if self._missing_key:
            raise LlmCallError(LlmFailure(K.AUTH, "No API key found: set OPENAI_API_KEY.", False))
        params = self._params(request, stream=False)
        try:
            done = await self._send(request, params, await self._body(request, params))
        except Exception as exc:
            raise LlmCallError(self._failure(exc)) from exc
        return (done.choices[0].message.content or "") if done.choices else ""

    async def model_limits(self, model: str) -> tuple[int | None, int | None] | None:
        """The window the server's model list reports (OpenRouter `context_length`,
        vLLM `max_model_len`); (None, None) when it reports none."""
        try:
            listing = await self._client.get("/models", cast_to=object)
        except Exception as exc:
            return (None, None) if getattr(exc, "status_code", None) in (404, 405) else None
        entries = listing.get("data") if isinstance(listing, Mapping) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, Mapping) and entry.get("id") == model:
                for key in ("context_length", "max_model_len", "context_window"):
                    value = entry.get(key)
                    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                        return value, None
        return (None, None)
