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

A wire format whose messages are not the journal's (Chat Completions) converts
each message on the way, and that conversion carries state from one message to
the next (the calls still unanswered). `MessagesBody.chained` keeps, with each
message's bytes, the state its conversion started from and ended in: the bytes
are reused only when the message comes after the same state again, so the
result is the one converting the whole history afresh would give.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = ["BODY_ORDER", "Convert", "MessagesBody", "encode", "join_fields"]

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
# (message, state before it) -> (the items it becomes, state after it)
Convert = Callable[[Mapping[str, Any], Hashable], tuple[Sequence[Any], Hashable]]


def encode(value: Any) -> bytes:
    """`value` as the SDK encodes a request body."""
    return _ENCODER.encode(value).encode()


def join_fields(
    params: Mapping[str, Any], order: Sequence[str], encoded: Mapping[str, bytes]
) -> bytes:
    """The JSON object of `params` and `encoded` (fields already JSON, written as those
    bytes), fields in `order` first (the SDK's), the rest after."""
    given = [*params, *(k for k in encoded if k not in params)]
    names = [k for k in order if k in given]
    names += [k for k in given if k not in order]
    parts = [
        encode(name) + b":" + (encoded[name] if name in encoded else encode(params[name]))
        for name in names
    ]
    return b"{" + b",".join(parts) + b"}"


class MessagesBody:
    """Request bodies of one provider, each message encoded once (module docstring).

    Safe to call from worker threads at once (conversations and sub-agents sharing a
    provider send concurrently). `encoded` counts the messages encoded so far: a
    conversation of n messages over any number of rounds encodes about n, not
    n per round.

    A request of `messages` visits every message only in C (`map` over ids and cache
    lookups, the join): finding a message's bytes needs no identity check in Python,
    because the cache holds every message it has bytes for, and two live objects never
    share an id. `chained` must compare each message's state, a short Python step per
    message (about 4 ms at 10,000, in the worker thread that builds the body).
    """

    def __init__(self) -> None:
        self.encoded = 0
        self._lock = threading.Lock()
        # per transform key: id of message -> (message, its bytes[, state before, after])
        self._caches: dict[str, dict[int, tuple[Any, ...]]] = {}
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

    def chained(
        self,
        messages: Sequence[Mapping[str, Any]],
        convert: Convert,
        key: str = "",
        start: Hashable = (),
    ) -> tuple[bytes, Hashable]:
        """The JSON array items (no brackets) `messages` become through `convert`, and
        the state after the last; `start` is the state before the first.

        `convert` must give the same result for the same message and state (`key`
        names it). A message is converted again only when it follows another state
        than last time; a message that becomes no item adds no bytes."""
        parts: list[bytes] = []
        state = start
        with self._lock:
            cache = self._caches.setdefault(key, {})
            for message in messages:
                entry = cache.get(id(message))
                if entry is None or entry[2] != state:
                    items, after = convert(message, state)
                    joined = b",".join(map(encode, items))
                    entry = cache[id(message)] = (message, joined, state, after)
                    self.encoded += 1
                if entry[1]:
                    parts.append(entry[1])
                state = entry[3]
            self._recent.append(messages)
            if self.cached > self._sweep_at:
                self._forget()
        return b",".join(parts), state

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
        encoded = {}
        if "messages" in params:
            encoded["messages"] = self.messages(params["messages"], transform, key)
        return join_fields(params, BODY_ORDER, encoded)
