"""A gateway for tests: on its own thread and loop, with a table of tokens.

`TokenTable` is the `TokenAuth` port answered from a dict (the real one,
`HubTokenAuth`, asks a real Hub: tests/hub/test_real_hub.py). `GatewayServer`
runs a `Gateway` on 127.0.0.1 on its own thread, so sync code and the kernel's
loop can use it like a remote service.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Self

from aiohttp import web

from phoenix_nb.hub import Gateway, HubUnreachable, make_app

__all__ = ["GatewayServer", "TokenTable"]


class TokenTable:
    """Tokens and their users: the Hub's answer, without a Hub."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = dict(users)
        self.asked = 0
        self.down = False  # True: answer as a Hub that is not there

    async def user_for(self, token: str) -> str | None:
        self.asked += 1
        if self.down:
            raise HubUnreachable("phoenix gateway: the Hub did not answer (test).")
        return self.users.get(token)


class GatewayServer:
    """`with GatewayServer(gateway) as server:` serves at `server.url` until the block ends."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        runner = web.AppRunner(make_app(self.gateway))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="gateway", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the gateway did not start in 30 s")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)
