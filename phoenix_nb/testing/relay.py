"""The shared part of the Bedrock and Vertex fakes: a `FakeAnthropic` that also
serves a cloud's own routes by relaying each request to its own `/v1/messages`.

So every scripted turn, rule, fault and prompt-cache figure of the Messages API
fake works unchanged behind a cloud's framing, and `requests` / `events` keep
describing the Messages API side; `wire` holds what the cloud route received
(path, redacted headers, body as sent by the SDK).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from aiohttp import web

from phoenix_nb.demo.server import FakeAnthropic, redact_headers
from phoenix_nb.demo.turns import FakeRequest

__all__ = ["RelayFake", "Upstream"]

RELAY_KEY = "relay-internal"


class Upstream:
    """The relayed Messages API response: its status, JSON error, or SSE events."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.status = response.status

    async def json(self) -> Any:
        return await self.response.json(content_type=None)

    async def raw(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.content.iter_any():
            yield chunk

    async def events(self) -> AsyncIterator[tuple[str, bytes]]:
        """(event name, data bytes) per SSE event, as they arrive."""
        buffer = b""
        async for chunk in self.response.content.iter_any():
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                name, data = "", b""
                for line in block.split(b"\n"):
                    if line.startswith(b"event:"):
                        name = line[6:].strip().decode()
                    elif line.startswith(b"data:"):
                        data = line[5:].strip()
                if data:
                    yield name, data


class RelayFake(FakeAnthropic):
    """A FakeAnthropic with extra routes (`routes()`), each relaying to /v1/messages."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wire: list[FakeRequest] = []
        self._session: aiohttp.ClientSession | None = None

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    async def _startup(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))

    async def _shutdown(self) -> None:
        if self._session is not None:
            await self._session.close()
        await super()._shutdown()

    def note_wire(self, request: web.Request, body: Any) -> None:
        with self._cond:
            self.wire.append(
                FakeRequest(
                    len(self.wire),
                    request.method,
                    request.path,
                    redact_headers(request.headers),
                    body,
                )
            )
            self._cond.notify_all()

    def relay(self, body: Mapping[str, Any]) -> Any:
        """POST `body` to this server's own /v1/messages (use with `async with`)."""
        assert self._session is not None
        return self._session.post(
            f"http://127.0.0.1:{self.port}/v1/messages",
            data=json.dumps(dict(body)),
            headers={"x-api-key": RELAY_KEY, "content-type": "application/json"},
        )
