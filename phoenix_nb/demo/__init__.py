"""The offline demo model: a scripted agent for people without an API key.

Only the model is scripted; the tools, the sandbox and the approval flow are
the real ones. The runtime reaches the demo exactly as it reaches Claude:
through the provider port (`phoenix_nb.runtime.ports.LlmProvider`), served by
the official SDK talking over loopback to a local Messages API server
(`server.py`) that plays the screenplay (`screenplay.py`). Tests reuse the same
server, with scripted turns and faults, through `phoenix_nb.testing`.

Nothing is imported here at package import: the server needs aiohttp and the
provider the SDK, both paid for only when the demo model is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phoenix_nb.demo.provider import DemoProvider

__all__ = ["DemoProvider"]


def __getattr__(name: str) -> Any:
    if name == "DemoProvider":
        from phoenix_nb.demo.provider import DemoProvider

        return DemoProvider
    raise AttributeError(name)
