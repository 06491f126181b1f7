"""The demo model behind the provider port.

`DemoProvider` owns a started demo server and the SDK-based provider pointed at
it, so the runtime treats the demo like any other model: it streams requests
and closes the provider when done. Going through the real SDK (not a shortcut
that yields stream updates directly) keeps the demo an honest end-to-end run:
what a newcomer sees is what Claude's path does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from phoenix_nb.demo.screenplay import start_demo_server
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import StreamUpdate

DEMO_KEY = "demo-key-not-secret"  # the loopback server checks that some key is sent


class DemoProvider:
    """The scripted demo model, served over loopback and reached through the SDK."""

    def __init__(self, *, pace: float | None = None) -> None:
        self._server = start_demo_server(pace=pace)
        self._client = AnthropicProvider(api_key=DEMO_KEY, base_url=self._server.base_url)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def __repr__(self) -> str:
        return f"DemoProvider(base_url={self.base_url!r})"

    async def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        async for update in self._client.stream(request):
            yield update

    async def complete_text(self, request: LlmRequest) -> str:
        return await self._client.complete_text(request)

    def live_credentials(self) -> tuple[str, ...]:
        """The demo's loopback key (not a secret, but held like one)."""
        return self._client.live_credentials()

    async def aclose(self) -> None:
        try:
            await self._client.aclose()
        finally:
            self._server.stop()
