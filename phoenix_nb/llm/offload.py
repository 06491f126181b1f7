"""The SDK's own preparation of a request body, run off the kernel's event loop.

The anthropic SDK deep-copies every request body before it sends it (so that a
caller's containers are never changed and one-shot iterators are read once).
Every round re-sends the whole conversation, so at 10,000 stored messages that
copy takes 0.1-0.3 s on this machine: a stall of the kernel's event loop on
every request, which a Cancel or Approve click waits out.

`off_loop` gives a client class whose copy runs in a worker thread. The work is
the SDK's own method, unchanged; only where it runs differs. What it reads is
safe to read from another thread: phoenix builds a fresh messages list for each
request and never changes a message or block once built (core/messages.py). An
SDK without this method (older or newer than the one seen here) is used as it is.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, TypeVar

__all__ = ["off_loop"]

C = TypeVar("C", bound=type)

_HOOK = "_copy_and_prepare"  # AsyncAPIClient's body copy (anthropic 2.12)


def off_loop(client_class: C) -> C:
    """`client_class` with the body copy of each request run in a worker thread."""
    original = getattr(client_class, _HOOK, None)
    if original is None or not inspect.iscoroutinefunction(original):
        return client_class

    async def prepare(self: Any, options: Any) -> Any:
        parent = original.__get__(self, type(self))
        return await asyncio.to_thread(asyncio.run, parent(options))

    return type(client_class.__name__, (client_class,), {_HOOK: prepare})  # type: ignore[return-value]
