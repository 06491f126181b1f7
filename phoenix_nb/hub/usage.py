"""Token usage read from the bytes the gateway forwards, as they pass.

The gateway streams the upstream's answer back unchanged; it reads the usage
the answer carries on the way (no second request, no buffering of the stream):
the Messages API's `message_start` / `message_delta` events (the latter's
counts are cumulative), a Chat Completions stream's final `usage` chunk, or the
`usage` of a whole JSON answer. Bedrock carries the same Messages API events in
AWS event-stream frames (each event's JSON base64-encoded in a `chunk` frame);
Vertex streams the Messages API's SSE.

Bedrock's frames are walked here by their length prelude, not with botocore's
parser: that parses and checks every frame in Python, 15 ms of the gateway's CPU
for a 2,000-token answer (the client's own decoder checks the CRCs anyway). Only
a frame whose base64 can hold "usage" is decoded: "usage" always leaves one of
three 4-character groups in base64, one per alignment ("usa" -> dXNh, "sag" ->
c2Fn, "age" -> YWdl), found at C speed; a false hit only costs a decode.
The dollars come from the same price table the kernel uses (`core.prices`), so
the gateway's and the kernel's spend agree.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass
from typing import Any

from phoenix_nb.core.prices import cost
from phoenix_nb.core.values import Usage

__all__ = ["Metered", "UsageMeter"]

_PRELUDE = 12  # an event-stream frame's total length, headers length and their CRC
_MAX_FRAME = 16 * 1024 * 1024  # the format's own bound on a frame
_USAGE_BASE64 = (b"dXNh", b"c2Fn", b"YWdl")  # "usage" in base64, one per alignment


@dataclass(frozen=True)
class Metered:
    """What one forwarded answer used: tokens, and dollars where the model has a price."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # read from the prompt cache
    cache_write_tokens: int = 0
    dollars: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cached_tokens + self.cache_write_tokens


class UsageMeter:
    """Fed the answer's bytes in the order they pass; `result()` is the usage seen."""

    def __init__(self, model: str, *, streamed: bool, framing: str = "sse") -> None:
        self.model = model
        self.streamed = streamed
        self._frames = streamed and framing == "eventstream"
        self._off = False  # a frame stream that stopped making sense: metering ends
        self._pending = b""
        self._whole = bytearray()
        self._usage: dict[str, int] = {}
        self._one_hour = 0

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            self._whole += chunk
            return
        if self._off:
            return
        if self._frames:
            self._feed_frames(chunk)
            return
        # Only the few events that carry usage are looked at, found by `find` (C
        # speed) rather than a Python loop over every line: a long answer's first
        # chunk can be 64 KB, 1,500 lines, of text deltas (1.2 ms looped, ~10 us found).
        data = self._pending + chunk if self._pending else chunk
        cut = data.rfind(b"\n") + 1  # complete lines end here; the rest waits
        at = data.find(b"usage", 0, cut)
        while at != -1:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at, cut)
            if data.startswith(b"data:", start):
                self._event(data[start + 5 : end].strip())
            at = data.find(b"usage", end, cut)
        self._pending = data[cut:]

    def _feed_frames(self, chunk: bytes) -> None:
        """AWS event-stream frames: prelude (total length, headers length, CRC), headers,
        payload, CRC. A frame whose lengths make no sense ends the metering (the stream
        itself still passes unchanged: the client's decoder reports it)."""
        data = self._pending + chunk if self._pending else chunk
        at = 0
        while len(data) - at >= _PRELUDE:
            total, headers = struct.unpack_from("!II", data, at)
            if total < _PRELUDE + 4 + headers or total > _MAX_FRAME:
                self._off, self._pending = True, b""  # not a frame stream after all
                return
            if len(data) - at < total:
                break  # the rest of this frame comes in a later chunk
            start, end = at + _PRELUDE + headers, at + total - 4
            if any(data.find(group, start, end) != -1 for group in _USAGE_BASE64):
                self._chunk(data[start:end])
            at += total
        self._pending = data[at:]

    def _chunk(self, payload: bytes) -> None:
        """A chunk frame's payload: `{"bytes": <the event's JSON, base64>}`."""
        try:
            wrapped = json.loads(payload)
            if isinstance(wrapped, dict) and isinstance(wrapped.get("bytes"), str):
                self._event(base64.b64decode(wrapped["bytes"]))
        except (ValueError, binascii.Error):
            return  # an exception frame's payload, or not base64

    def _event(self, data: bytes) -> None:
        if not data or data == b"[DONE]" or b"usage" not in data:
            return  # most events carry text; only usage-bearing ones are parsed
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        message = event.get("message")
        usage = message.get("usage") if isinstance(message, dict) else event.get("usage")
        if isinstance(usage, dict):
            self._take(usage)

    def _take(self, usage: dict[str, Any]) -> None:
        """Counts seen later replace earlier ones (message_delta's are cumulative)."""
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[key] = value
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            self._usage["cached_tokens"] = details["cached_tokens"]
        split = usage.get("cache_creation")
        if isinstance(split, dict) and isinstance(split.get("ephemeral_1h_input_tokens"), int):
            self._one_hour = split["ephemeral_1h_input_tokens"]

    def result(self) -> Metered:
        if not self.streamed and self._whole:
            try:
                answer = json.loads(bytes(self._whole))
            except ValueError:
                answer = None
            if isinstance(answer, dict) and isinstance(answer.get("usage"), dict):
                self._take(answer["usage"])
        u = self._usage
        if "prompt_tokens" in u:  # Chat Completions: prompt_tokens include the cached ones
            cached = u.get("cached_tokens", 0)
            usage = Usage(
                input_tokens=max(0, u["prompt_tokens"] - cached),
                output_tokens=u.get("completion_tokens", 0),
                cache_read_input_tokens=cached,
            )
        else:
            usage = Usage(
                input_tokens=u.get("input_tokens", 0),
                output_tokens=u.get("output_tokens", 0),
                cache_creation_input_tokens=u.get("cache_creation_input_tokens", 0),
                cache_read_input_tokens=u.get("cache_read_input_tokens", 0),
                cache_creation_1h_input_tokens=self._one_hour,
            )
        return Metered(
            model=self.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cache_read_input_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens,
            dollars=cost(usage, self.model) if u else None,
        )
