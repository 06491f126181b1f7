"""A fake Anthropic Messages API on 127.0.0.1, for tests and the offline demo.

It speaks the wire format the official SDK expects (SSE with `event:` lines,
chunked bodies so a dropped connection is a real protocol error), validates
requests like the real API where history bugs would show, records every
request with secrets redacted, and notes when a client goes away.

The server always runs on its own thread and event loop, so the same object
serves sync code (`with FakeAnthropic() as fake:`), async code (`async with`)
and the kernel's loop without competing with the client for it.

Replies come from, in order: the FIFO of `script(...)`, the rules of
`add_rule(...)` (first match wins), then `default` (a short text turn).

It also caches prompts as the API does (`prompt_cache.py`: usage reports cache
reads and writes) and serves `GET /v1/models/{id}` for models added with
`add_model(...)`, so the Models API lookup runs through the real SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web

from phoenix_nb.core.values import Usage
from phoenix_nb.demo.prompt_cache import CacheUsage, PromptCache
from phoenix_nb.demo.turns import (
    FakeRequest,
    Fault,
    RawSpec,
    Reply,
    ReplyFactory,
    Rule,
    TextSpec,
    ThinkingSpec,
    Turn,
    _next_id,
    text,
)
from phoenix_nb.demo.validate import RequestInvalid, validate_messages_request

_SECRET_HEADER_PARTS = ("authorization", "api-key", "token", "secret", "cookie")
_FLUSH_BYTES = 64 * 1024
_MALFORMED_EVENT = b'event: content_block_delta\ndata: {"type": "content_block_delta", oops\n\n'


@dataclass(frozen=True)
class ConnectionEvent:
    """What became of a request's connection.

    kind: "completed" (body fully sent), "disconnected" (the client went away
    mid-response), "dropped" (a Fault cut it), "error" (an HTTP error answered).
    """

    request_index: int
    kind: str


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers fit to record: anything that may carry a credential is blanked."""
    return {
        k.lower(): ("[redacted]" if any(p in k.lower() for p in _SECRET_HEADER_PARTS) else v)
        for k, v in headers.items()
    }


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _chunks(value: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for i in range(0, len(value), size):
        yield value[i : i + size]


def _estimate_usage(
    turn: Turn, body: Mapping[str, Any], billing: CacheUsage | None = None
) -> Usage:
    chars = 0
    for block in turn.blocks:
        if isinstance(block, TextSpec):
            chars += len(block.text)
        elif isinstance(block, ThinkingSpec):
            chars += len(block.thinking)
        elif isinstance(block, RawSpec):
            chars += len(json.dumps(dict(block.block)))
        else:
            chars += len(block.json_text())
    if billing is None:
        billing = CacheUsage(input_tokens=max(1, len(json.dumps(body.get("messages", []))) // 4))
    return Usage(
        input_tokens=billing.input_tokens,
        output_tokens=max(1, chars // 4),
        cache_creation_input_tokens=billing.cache_creation_input_tokens,
        cache_read_input_tokens=billing.cache_read_input_tokens,
        cache_creation_1h_input_tokens=billing.cache_creation_1h_input_tokens,
    )


def _usage_json(usage: Usage, *, output_tokens: int | None = None) -> dict[str, Any]:
    one_hour = usage.cache_creation_1h_input_tokens
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens if output_tokens is None else output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_creation_input_tokens - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        },
    }


def turn_events(
    turn: Turn, body: Mapping[str, Any], billing: CacheUsage | None = None
) -> list[tuple[bytes, float]]:
    """The SSE events of a turn, each with the delay to wait before sending it."""
    usage = turn.usage or _estimate_usage(turn, body, billing)
    model = turn.model or str(body.get("model", "claude-fake"))
    events: list[tuple[bytes, float]] = []
    add = events.append
    message: dict[str, Any] = {
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage_json(usage, output_tokens=1),
    }
    add((_sse("message_start", {"type": "message_start", "message": message}), 0.0))
    add((_sse("ping", {"type": "ping"}), 0.0))
    for index, block in enumerate(turn.blocks):
        deltas: list[tuple[Mapping[str, Any], float]]
        start: Mapping[str, Any]
        if isinstance(block, TextSpec):
            start = {"type": "text", "text": ""}
            deltas = [({"type": "citations_delta", "citation": c}, 0.0) for c in block.citations]
            deltas += [
                ({"type": "text_delta", "text": c}, block.delay)
                for c in _chunks(block.text, block.chunk)
            ]
            if block.citations:
                start = {"type": "text", "text": "", "citations": []}
        elif isinstance(block, RawSpec):
            start = block.start_payload()
            deltas = [(d, 0.0) for d in block.deltas]
        elif isinstance(block, ThinkingSpec):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                ({"type": "thinking_delta", "thinking": c}, block.delay)
                for c in _chunks(block.thinking, block.chunk)
            ]
            deltas.append(({"type": "signature_delta", "signature": block.signature}, 0.0))
        else:
            start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            deltas = [
                ({"type": "input_json_delta", "partial_json": c}, block.delay)
                for c in _chunks(block.json_text(), block.chunk)
            ]
        add(
            (
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                0.0,
            )
        )
        for delta, delay in deltas:
            add(
                (
                    _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    ),
                    delay,
                )
            )
        add((_sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0.0))
    if turn.fault is not None and turn.fault.kind == "eof_without_stop":
        return events
    add(
        (
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": turn.final_stop_reason(), "stop_sequence": None},
                    "usage": _usage_json(usage),
                },
            ),
            0.0,
        )
    )
    add((_sse("message_stop", {"type": "message_stop"}), 0.0))
    return events


def turn_message(
    turn: Turn, body: Mapping[str, Any], billing: CacheUsage | None = None
) -> dict[str, Any]:
    """The non-streamed JSON message of a turn."""
    usage = turn.usage or _estimate_usage(turn, body, billing)
    content: list[dict[str, Any]] = []
    for block in turn.blocks:
        if isinstance(block, TextSpec):
            item: dict[str, Any] = {"type": "text", "text": block.text}
            if block.citations:
                item["citations"] = [dict(c) for c in block.citations]
            content.append(item)
        elif isinstance(block, RawSpec):
            content.append(dict(block.block))
        elif isinstance(block, ThinkingSpec):
            content.append(
                {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
            )
        else:
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
            )
    return {
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": turn.model or str(body.get("model", "claude-fake")),
        "content": content,
        "stop_reason": turn.final_stop_reason(),
        "stop_sequence": None,
        "usage": _usage_json(usage),
    }


DEFAULT_TURN = Turn(
    [text("This is the offline fake model; no reply was scripted for this request.")]
)


class FakeAnthropic:
    """The fake server. Start with `with`, `async with`, or `start()` / `stop()`.

    `api_key`: when set, requests carrying another key get 401 like the real API.
    `validate`: answer 400 to requests the real API would reject.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        default: Reply | ReplyFactory = DEFAULT_TURN,
        validate: bool = True,
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        # A fixed port keeps one server identity across processes that follow one
        # another (a conversation keeps its server's base URL); 0 takes a free one.
        self._fixed_port = port
        self.default = default
        self.validate = validate
        self._queue: list[Reply] = []
        self._rules: list[list[Any]] = []  # [Rule, remaining uses]
        self._requests: list[FakeRequest] = []
        self._events: list[ConnectionEvent] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._error: BaseException | None = None
        self.port = 0
        # Prompt caching as the API does it; `cache.advance(s)` moves its clock.
        self.cache = PromptCache()
        self._billing: dict[int, CacheUsage] = {}
        self._models: dict[str, dict[str, Any]] = {}
        self._model_requests: list[str] = []

    # --- scripting -------------------------------------------------------------------

    def script(self, *replies: Reply) -> Self:
        """Queue replies, served one per request before any rule."""
        with self._cond:
            self._queue.extend(replies)
        return self

    def add_rule(
        self,
        match: Callable[[FakeRequest], bool],
        reply: Reply | ReplyFactory,
        *,
        times: int | None = None,
    ) -> Self:
        """Answer matching requests with `reply` (or `reply(request)`), `times` times or forever."""
        with self._cond:
            self._rules.append([Rule(match, reply, times), times])
        return self

    def reply_to(self, text_contains: str, reply: Reply | ReplyFactory) -> Self:
        """A rule on the last user text, the common case for demos."""
        needle = text_contains.lower()
        return self.add_rule(lambda r: needle in r.last_user_text.lower(), reply)

    def clear(self) -> None:
        """Forget scripted replies, rules, recorded requests and events."""
        with self._cond:
            self._queue.clear()
            self._rules.clear()
            self._requests.clear()
            self._events.clear()
            self._billing.clear()

    def add_model(
        self,
        model_id: str,
        *,
        max_input_tokens: int | None,
        max_tokens: int | None,
        display_name: str = "",
    ) -> Self:
        """Serve `GET /v1/models/{model_id}` with these limits (unknown ids get 404)."""
        with self._cond:
            self._models[model_id] = {
                "type": "model",
                "id": model_id,
                "display_name": display_name or model_id,
                "created_at": "2026-01-01T00:00:00Z",
                "max_input_tokens": max_input_tokens,
                "max_tokens": max_tokens,
            }
        return self

    @property
    def model_requests(self) -> list[str]:
        """Model ids asked of the Models API, in order."""
        with self._cond:
            return list(self._model_requests)

    def billing(self, index: int) -> CacheUsage | None:
        """How request `index`'s input was billed (cache reads/writes), if it was served."""
        with self._cond:
            return self._billing.get(index)

    # --- observation ----------------------------------------------------------------

    @property
    def requests(self) -> list[FakeRequest]:
        """Every request served, oldest first (headers redacted)."""
        with self._cond:
            return list(self._requests)

    @property
    def events(self) -> list[ConnectionEvent]:
        """What became of each connection, in order."""
        with self._cond:
            return list(self._events)

    @property
    def pending_replies(self) -> int:
        with self._cond:
            return len(self._queue)

    def wait_for(self, predicate: Callable[[FakeAnthropic], bool], timeout: float = 5.0) -> bool:
        """Block until `predicate(self)` holds (re-checked on every request/event) or timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    async def wait_for_async(
        self, predicate: Callable[[FakeAnthropic], bool], timeout: float = 5.0
    ) -> bool:
        """`wait_for` without blocking the caller's event loop."""
        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    @property
    def base_url(self) -> str:
        if not self.port:
            raise RuntimeError("FakeAnthropic is not started")
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server thread; returns once the port accepts connections."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        if not ready.wait(10.0) or self._error is not None:
            raise RuntimeError(f"FakeAnthropic failed to start: {self._error!r}")
        return self

    def stop(self) -> None:
        """Stop serving; in-flight stalls end at once."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        future.result(timeout=10.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10.0)
        self._thread = None
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:
            self._error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self._fixed_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._fixed_port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    def _routes(self, app: web.Application) -> None:
        """The endpoints this server answers (a subclass speaks another wire format)."""
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_get("/v1/models/{model_id}", self._handle_model)

    async def _shutdown(self) -> None:
        assert self._closing is not None and self._runner is not None
        self._closing.set()
        await self._runner.cleanup()

    # --- serving ----------------------------------------------------------------------

    def _record_event(self, index: int, kind: str) -> None:
        with self._cond:
            self._events.append(ConnectionEvent(index, kind))
            self._cond.notify_all()

    def _choose(self, req: FakeRequest) -> Reply:
        with self._cond:
            if self._queue:
                return self._queue.pop(0)
            for entry in self._rules:
                rule, left = entry
                if left is not None and left <= 0:
                    continue
                if rule.match(req):
                    if left is not None:
                        entry[1] = left - 1
                    reply = rule.reply
                    break
            else:
                reply = self.default
        return reply(req) if callable(reply) else reply

    async def _receive(self, request: web.Request) -> tuple[int, FakeRequest, Any]:
        """Record a request as it came (its body parsed, None when not JSON), before
        anything judges it: tests read what the client sent, good or bad."""
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._cond:
            index = len(self._requests)
            req = FakeRequest(
                index, request.method, request.path, redact_headers(request.headers), body
            )
            self._requests.append(req)
            self._cond.notify_all()
        return index, req, body

    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        index, req, body = await self._receive(request)
        problem = self._auth_problem(request)
        if problem:
            return self._error_response(index, Fault.status(401, message=problem))
        if body is None:
            return self._error_response(
                index, Fault.status(400, message="request body is not valid JSON")
            )
        try:
            if self.validate:
                validate_messages_request(body)
            self.cache.segments(body)  # markers the API would reject
        except RequestInvalid as exc:
            return self._error_response(index, Fault.status(400, message=str(exc)))
        reply = self._choose(req)
        fault = reply if isinstance(reply, Fault) else reply.fault
        if fault is not None and fault.kind == "status":
            return self._error_response(index, fault)
        billing = self.cache.process(body)
        with self._cond:
            self._billing[index] = billing
        if fault is not None and fault.kind == "slow_headers":
            await self._pause(fault.seconds)
        turn = (
            reply
            if isinstance(reply, Turn)
            else Turn([text("Partial answer before the fault.")], fault=fault)
        )
        if not body.get("stream"):
            self._record_event(index, "completed")
            return web.json_response(
                turn_message(turn, body, billing), headers={"request-id": _next_id("req")}
            )
        return await self._stream(request, index, turn, body, billing)

    async def _handle_model(self, request: web.Request) -> web.Response:
        model_id = request.match_info["model_id"]
        with self._cond:
            self._model_requests.append(model_id)
            info = self._models.get(model_id)
            self._cond.notify_all()
        headers = {"request-id": _next_id("req")}
        problem = self._auth_problem(request)
        if problem or info is None:
            status, etype = (401, "authentication_error") if problem else (404, "not_found_error")
            error = {"type": etype, "message": problem or f"model: {model_id}"}
            return web.json_response(
                {"type": "error", "error": error}, status=status, headers=headers
            )
        return web.json_response(info, headers=headers)

    def _auth_problem(self, request: web.Request) -> str:
        key = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if key is None and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        if not key:
            return "x-api-key header is required"
        if self.api_key is not None and key != self.api_key:
            return "invalid x-api-key"
        return ""

    def _error_response(self, index: int, fault: Fault) -> web.Response:
        headers = {"request-id": _next_id("req"), **fault.headers}
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
        if fault.retry_after_ms is not None:
            headers["retry-after-ms"] = f"{fault.retry_after_ms:g}"
        body = {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}
        self._record_event(index, "error")
        return web.json_response(body, status=fault.code, headers=headers)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but end at once when the server shuts down."""
        assert self._closing is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _stream(
        self,
        request: web.Request,
        index: int,
        turn: Turn,
        body: Mapping[str, Any],
        billing: CacheUsage | None = None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "request-id": _next_id("req"),
            }
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        fault = turn.fault
        events = turn_events(turn, body, billing)
        buffer: list[bytes] = []
        size = 0
        outcome = "completed"
        try:
            # A fault placed past the end strikes just before the body would end.
            fault_at = min(fault.after_events, len(events)) if fault is not None else -1
            in_stream = ("drop", "in_stream_error", "malformed_json", "stall")
            for position, (data, delay) in enumerate([*events, (b"", 0.0)]):
                if fault is not None and position == fault_at and fault.kind in in_stream:
                    if buffer:
                        await resp.write(b"".join(buffer))
                        buffer, size = [], 0
                    if fault.kind == "drop":
                        outcome = "dropped"
                        assert request.transport is not None
                        # Closing without the chunk terminator is a protocol error for the client.
                        request.transport.close()
                        return resp
                    if fault.kind == "in_stream_error":
                        error = {
                            "type": "error",
                            "error": {"type": fault.error_type, "message": fault.message},
                        }
                        await resp.write(_sse("error", error))
                        await resp.write_eof()
                        return resp
                    if fault.kind == "malformed_json":
                        await resp.write(_MALFORMED_EVENT)
                        await resp.write_eof()
                        return resp
                    await self._pause(fault.seconds)
                if not data:
                    break
                if delay > 0:
                    if buffer:
                        await resp.write(b"".join(buffer))
                        buffer, size = [], 0
                    await self._pause(delay)
                    if request.transport is None or request.transport.is_closing():
                        outcome = "disconnected"
                        return resp
                buffer.append(data)
                size += len(data)
                if size >= _FLUSH_BYTES or delay > 0:
                    await resp.write(b"".join(buffer))
                    buffer, size = [], 0
            if buffer:
                await resp.write(b"".join(buffer))
            await resp.write_eof()
        except ConnectionError:
            # The client went away (a cancel): expected, so not an aiohttp error log.
            outcome = "disconnected"
        except asyncio.CancelledError:
            outcome = "disconnected"
            raise
        finally:
            self._record_event(index, outcome)
        return resp
