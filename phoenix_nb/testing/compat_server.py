"""A Messages API server that is not Anthropic's: what Ollama, llama.cpp, vLLM or a
LiteLLM proxy may be, for tests only.

It serves the same scripted turns as `FakeAnthropic` (it is one), but, by default,
lacks what such servers often lack: it answers a request carrying `cache_control`
or `thinking` with 400 and the refusal wording such servers use ("Extra inputs
are not permitted"), has no models endpoint (404 for `/v1/models/...`), and
reports no cache reads or writes. `images=False` also refuses image blocks, as a
text-only model does; `models={...}` serves an OpenAI-style `GET /v1/models`
list with the window under `window_field` (vLLM's `max_model_len`, …).

Refused requests are kept in `refused` (feature names, in order); served ones
in `requests` as usual.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from phoenix_nb.demo.server import FakeAnthropic

__all__ = ["CompatServer"]


def _has(value: Any, key: str, type_value: str | None = None) -> bool:
    if isinstance(value, Mapping):
        if type_value is None and key in value:
            return True
        if type_value is not None and value.get(key) == type_value:
            return True
        return any(_has(v, key, type_value) for v in value.values())
    if isinstance(value, list):
        return any(_has(v, key, type_value) for v in value)
    return False


class CompatServer(FakeAnthropic):
    """See the module docstring."""

    def __init__(
        self,
        *,
        caching: bool = False,
        thinking: bool = False,
        images: bool = True,
        models: Mapping[str, int] | None = None,
        window_field: str = "max_model_len",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.caching = caching
        self.thinking = thinking
        self.images = images
        self.listed = dict(models or {})
        self.window_field = window_field
        self.refused: list[str] = []

    async def _startup(self) -> None:
        """The parent's server with other routes: no `/v1/models/{id}`, and the model
        list only when there is one to serve."""
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._handle_messages)
        if self.listed:
            app.router.add_get("/v1/models", self._handle_listing)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return await super()._handle_messages(request)
        refusal = self._refusal(body)
        if refusal is not None:
            feature, message = refusal
            with self._cond:
                self.refused.append(feature)
                self._cond.notify_all()
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message},
            }
            return web.json_response(error, status=400)
        return await super()._handle_messages(request)

    def _refusal(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        if not self.caching and _has(body, "cache_control"):
            return "caching", "cache_control: Extra inputs are not permitted"
        if not self.thinking and body.get("thinking") is not None:
            return "thinking", "thinking: Extra inputs are not permitted"
        if not self.images and _has(body.get("messages"), "type", "image"):
            return "images", "this model does not support images"
        return None

    async def _handle_listing(self, request: web.Request) -> web.Response:
        with self._cond:
            self._model_requests.append("*list*")
            self._cond.notify_all()
        data = [
            {"id": name, "object": "model", "owned_by": "local", self.window_field: window}
            for name, window in self.listed.items()
        ]
        return web.json_response({"object": "list", "data": data})
