"""A Messages API request body encoded to JSON, each message once.

Every round re-sends the whole conversation. Letting the SDK prepare the body
means deep-copying and JSON-encoding every message of the history again for
each request: at 10,000 stored messages that is a quarter of a second of
interpreter time per round, growing with every message, and it holds the GIL
that the kernel's event loop needs.

The history a request is made from only grows, and a message, once handed to a
request, is never changed (core/messages.py builds a new dict for anything that
changes: the merged last message, a cache breakpoint's copy, a stripped image).
So each message dict is encoded once and its bytes are kept with it, found again
by identity: the next request encodes only the messages that are new or were
replaced, and the body is those bytes joined, a copy of memory. A message that
changes is a different object, so its old bytes cannot be reused by mistake;
the cache holds each message it encoded, so an id is never reused while its
bytes are kept.

The encoding is the SDK's own (compact separators, UTF-8, no NaN), and the
top-level fields are written in the order the SDK's `messages.create` writes
them, so the body is the one the SDK would send.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = ["BODY_ORDER", "MessagesBody"]

# The order of `AsyncMessages.create`'s body (anthropic 2.13); fields not listed follow.
BODY_ORDER = (
    "max_tokens",
    "messages",
    "model",
    "cache_control",
    "container",
    "diagnostics",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "speed",
    "stop_sequences",
    "stream",
    "system",
    "thinking",
    "tool_choice",
    "tools",
)

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_KEEP = 16  # requests whose messages a sweep keeps (other conversations sharing us)
_FIRST_SWEEP = 4096  # cached messages before the first sweep

_BYTES = itemgetter(1)

Transform = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def encode(value: Any) -> bytes:
    """`value` as the SDK encodes a request body."""
    return _ENCODER.encode(value).encode()


class MessagesBody:
    """Request bodies of one provider, each message encoded once (module docstring).

    Safe to call from worker threads at once (conversations and sub-agents sharing a
    provider send concurrently). `encoded` counts the messages encoded so far: a
    conversation of n messages over any number of rounds encodes about n, not
    n per round.

    A request visits every message only in C (`map` over ids and cache lookups, the
    join): finding a message's bytes needs no identity check in Python, because the
    cache holds every message it has bytes for, and two live objects never share an id.
    """

    def __init__(self) -> None:
        self.encoded = 0
        self._lock = threading.Lock()
        # per transform key: id of message -> (message, its bytes)
        self._caches: dict[str, dict[int, tuple[Mapping[str, Any], bytes]]] = {}
        self._recent: deque[Sequence[Mapping[str, Any]]] = deque(maxlen=_KEEP)
        self._sweep_at = _FIRST_SWEEP

    @property
    def cached(self) -> int:
        """Messages whose bytes are kept."""
        return sum(map(len, self._caches.values()))

    def messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        transform: Transform | None = None,
        key: str = "",
    ) -> bytes:
        """The JSON array of `messages`, each passed through `transform` (which must
        give the same result for the same message; `key` names it) before encoding."""
        with self._lock:
            cache = self._caches.setdefault(key, {})
            entries = list(map(cache.get, map(id, messages)))
            missing = -1
            while True:
                try:
                    missing = entries.index(None, missing + 1)
                except ValueError:
                    break
                message = messages[missing]
                sent = message if transform is None else transform(message)
                entries[missing] = cache[id(message)] = (message, encode(sent))
                self.encoded += 1
            self._recent.append(messages)
            if self.cached > self._sweep_at:
                self._forget()
        return b"[" + b",".join(map(_BYTES, entries)) + b"]"  # type: ignore[arg-type]

    def _forget(self) -> None:
        """Drop the bytes of messages none of the last `_KEEP` requests sent.

        A sweep runs once the cache has doubled since the last one, so its cost is
        spread over the messages encoded meanwhile."""
        live = set(map(id, chain.from_iterable(self._recent)))
        self._caches = {
            key: {i: entry for i, entry in cache.items() if i in live}
            for key, cache in self._caches.items()
        }
        self._sweep_at = max(_FIRST_SWEEP, 2 * self.cached)

    def body(
        self,
        params: Mapping[str, Any],
        transform: Transform | None = None,
        key: str = "",
    ) -> bytes:
        """The request body for `params` (JSON-ready values, a `messages` list)."""
        order = [k for k in BODY_ORDER if k in params]
        order += [k for k in params if k not in BODY_ORDER]
        parts: list[bytes] = []
        for name in order:
            if name == "messages":
                value = self.messages(params[name], transform, key)
            else:
                value = encode(params[name])
            parts.append(encode(name) + b":" + value)
        return b"{" + b",".join(parts) + b"}"
