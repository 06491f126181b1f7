"""A fake OpenAI Chat Completions server on 127.0.0.1, for tests only.

It is scripted with the same vocabulary as `FakeAnthropic` (`Turn`, `text`,
`tool_use`, `Fault`; it reuses that server's queue, rules, request log and
connection events) and answers `POST /v1/chat/completions` in the Chat
Completions wire format the `openai` SDK parses: `data: {chunk}` lines, text as
`choices[0].delta.content`, each tool call as `delta.tool_calls[i]` fragments
(the first with id, type and name, then pieces of `arguments`; several calls
of one turn are parallel calls with indices 0, 1, …), the `finish_reason`, a
last chunk with `usage` (and `prompt_tokens_details.cached_tokens` when the
turn's Usage has cache reads), then `data: [DONE]`.

It validates requests as the API would where a translation bug would show: every
assistant `tool_calls` entry answered by exactly one `tool` message before the
next assistant or user message, no `tool` message answering nothing, content
parts of known types, `image_url` parts as data: URLs, no `reasoning_content` in an
assistant message (DeepSeek refuses it). A turn's thinking streams as
`reasoning_content` deltas, as vLLM and DeepSeek send reasoning. Faults: `status` (an
OpenAI error body), `drop` (connection cut mid-stream), `stall`,
`in_stream_error` (a `data: {"error": …}` line) and `eof_without_stop`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from phoenix_nb.demo.server import FakeAnthropic, _estimate_usage
from phoenix_nb.demo.turns import (
    Fault,
    TextSpec,
    ThinkingSpec,
    ToolUseSpec,
    Turn,
    _next_id,
    text,
)

__all__ = ["FakeOpenAI", "validate_chat_request"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    404: "model_not_found",
    429: "rate_limit_exceeded",
}


class ChatRequestInvalid(ValueError):
    """A request the real API would answer with 400."""


def validate_chat_request(body: Any) -> None:
    """Raise ChatRequestInvalid for a request the API would reject (see the module docstring)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise ChatRequestInvalid("'messages' is required")
    if not body.get("model"):
        raise ChatRequestInvalid("'model' is required")
    pending: list[str] = []
    for i, message in enumerate(body["messages"]):
        role = message.get("role")
        if role == "tool":
            call = message.get("tool_call_id")
            if call not in pending:
                raise ChatRequestInvalid(
                    f"messages[{i}]: a 'tool' message must answer a preceding tool_calls id"
                    f" (got {call!r})"
                )
            pending.remove(call)
            if not isinstance(message.get("content"), str):
                raise ChatRequestInvalid(f"messages[{i}].content: a tool message holds text")
            continue
        if pending:
            raise ChatRequestInvalid(
                f"messages[{i}]: an assistant message with 'tool_calls' must be followed by "
                f"tool messages responding to each 'tool_call_id'. Missing: {pending}"
            )
        if role == "assistant":
            if "reasoning_content" in message:  # DeepSeek's answer to reasoning sent back
                raise ChatRequestInvalid(
                    f"messages[{i}]: The reasoning_content is an intermediate result for "
                    "display purposes only; please remove it from your API request"
                )
            for call in message.get("tool_calls") or []:
                json.loads(call["function"]["arguments"])  # must be a JSON string
                pending.append(call["id"])
        elif role == "user":
            content = message.get("content")
            if isinstance(content, list):
                for part in content:
                    kind = part.get("type")
                    if kind == "image_url":
                        url = part["image_url"]["url"]
                        if not url.startswith("data:image/"):
                            raise ChatRequestInvalid(f"messages[{i}]: bad image_url {url[:40]}")
                    elif kind != "text":
                        raise ChatRequestInvalid(f"messages[{i}]: unknown part type {kind!r}")
        elif role != "system":
            raise ChatRequestInvalid(f"messages[{i}].role: unknown role {role!r}")
    if pending:
        raise ChatRequestInvalid(f"tool calls left unanswered: {pending}")


def _chunk(model: str, cid: str, delta: Mapping[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _pieces(value: str, size: int) -> list[str]:
    size = max(1, size)
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def chat_chunks(turn: Turn, body: Mapping[str, Any]) -> list[tuple[bytes, float]]:
    """The SSE lines of a turn, each with the delay to wait before sending it."""
    model = str(body.get("model"))
    cid = _next_id("chatcmpl")
    out: list[tuple[bytes, float]] = [(_chunk(model, cid, {"role": "assistant"}), 0.0)]
    call_index = 0
    for block in turn.blocks:
        if isinstance(block, TextSpec):
            for piece in _pieces(block.text, block.chunk):
                out.append((_chunk(model, cid, {"content": piece}), block.delay))
        elif isinstance(block, ThinkingSpec):  # as vLLM and DeepSeek stream reasoning
            for piece in _pieces(block.thinking, block.chunk):
                out.append((_chunk(model, cid, {"reasoning_content": piece}), block.delay))
        elif isinstance(block, ToolUseSpec):
            call_id = block.id or _next_id("call")
            first = {
                "index": call_index,
                "id": call_id,
                "type": "function",
                "function": {"name": block.name, "arguments": ""},
            }
            out.append((_chunk(model, cid, {"tool_calls": [first]}), 0.0))
            for piece in _pieces(block.json_text(), block.chunk):
                fragment = {"index": call_index, "function": {"arguments": piece}}
                out.append((_chunk(model, cid, {"tool_calls": [fragment]}), block.delay))
            call_index += 1
    if turn.fault is not None and turn.fault.kind == "eof_without_stop":
        return out
    stop = turn.final_stop_reason()
    finish = {"tool_use": "tool_calls", "max_tokens": "length"}.get(stop or "", "stop")
    out.append((_chunk(model, cid, {}, finish), 0.0))
    usage = turn.usage or _estimate_usage(turn, body)
    prompt = usage.input_tokens + usage.cache_read_input_tokens
    report: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
    }
    if usage.cache_read_input_tokens:
        report["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_input_tokens}
    if (body.get("stream_options") or {}).get("include_usage"):
        tail = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 1_760_000_000,
            "model": model,
            "choices": [],
            "usage": report,
        }
        out.append((f"data: {json.dumps(tail)}\n\n".encode(), 0.0))
    out.append((b"data: [DONE]\n\n", 0.0))
    return out


class FakeOpenAI(FakeAnthropic):
    """See the module docstring. `base_url` ends in /v1, as the openai SDK expects."""

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._handle_chat)

    def _chat_error(self, index: int, status: int, message: str, fault: Fault | None = None) -> Any:
        headers = {"x-request-id": _next_id("req")}
        if fault is not None:
            headers.update(fault.headers)
            if fault.retry_after is not None:
                headers["retry-after"] = f"{fault.retry_after:g}"
        kind = _ERROR_TYPES.get(status, "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        self._record_event(index, "error")
        return web.json_response(body, status=status, headers=headers)

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        index, req, body = await self._receive(request)
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer ") or not auth[7:].strip():
            return self._chat_error(index, 401, "You didn't provide an API key.")
        if self.api_key is not None and auth[7:].strip() != self.api_key:
            return self._chat_error(index, 401, "Incorrect API key provided.")
        try:
            validate_chat_request(body)
        except (ChatRequestInvalid, KeyError, TypeError, ValueError) as exc:
            return self._chat_error(index, 400, str(exc))
        reply = self._choose(req)
        fault = reply if isinstance(reply, Fault) else reply.fault
        if fault is not None and fault.kind == "status":
            return self._chat_error(index, fault.code, fault.message, fault)
        turn = reply if isinstance(reply, Turn) else Turn([text("Partial answer.")], fault=fault)
        if not body.get("stream"):
            return self._whole(index, turn, body)
        return await self._stream_chat(request, index, turn, body)

    def _whole(self, index: int, turn: Turn, body: Mapping[str, Any]) -> web.Response:
        words = "".join(b.text for b in turn.blocks if isinstance(b, TextSpec))
        usage = turn.usage or _estimate_usage(turn, body)
        self._record_event(index, "completed")
        return web.json_response(
            {
                "id": _next_id("chatcmpl"),
                "object": "chat.completion",
                "created": 1_760_000_000,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": words},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens,
                },
            }
        )

    async def _stream_chat(
        self, request: web.Request, index: int, turn: Turn, body: Mapping[str, Any]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"content-type": "text/event-stream", "x-request-id": _next_id("req")}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        fault = turn.fault
        chunks = chat_chunks(turn, body)
        fault_at = min(fault.after_events, len(chunks)) if fault is not None else -1
        outcome = "completed"
        try:
            for position, (data, delay) in enumerate([*chunks, (b"", 0.0)]):
                if fault is not None and position == fault_at:
                    if fault.kind == "drop":
                        outcome = "dropped"
                        assert request.transport is not None
                        request.transport.close()
                        return resp
                    if fault.kind == "in_stream_error":
                        error = {"error": {"message": fault.message, "type": fault.error_type}}
                        await resp.write(f"data: {json.dumps(error)}\n\n".encode())
                        await resp.write_eof()
                        return resp
                    if fault.kind == "stall":
                        await self._pause(fault.seconds)
                if not data:
                    break
                if delay > 0:
                    await self._pause(delay)
                    if request.transport is None or request.transport.is_closing():
                        outcome = "disconnected"
                        return resp
                await resp.write(data)
            await resp.write_eof()
        except ConnectionError:
            outcome = "disconnected"
        except asyncio.CancelledError:
            outcome = "disconnected"
            raise
        finally:
            self._record_event(index, outcome)
        return resp
