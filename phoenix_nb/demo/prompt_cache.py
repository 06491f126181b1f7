"""Prompt caching as the Messages API documents it, for the fake server.

So that tests and the cost benchmark measure something real, the fake caches
what the API caches and bills what the API bills:

* The prompt is one sequence of blocks in the API's order: tool definitions,
  system blocks, then every message's content blocks. An entry is the hash of
  a prefix of that sequence (model included), so changing a tool description
  or the system prompt misses everything after it, as it does for real.
* Breakpoints are blocks carrying `cache_control`, plus the automatic one that
  a top-level `cache_control` puts on the last cacheable block. At most four;
  a 1-hour breakpoint may not follow a 5-minute one.
* A read: from each breakpoint, look back at most `lookback` (20) block
  boundaries for a live entry; the longest hit is read. Reading refreshes the
  entry's lifetime.
* A write: every breakpoint past the hit whose prefix is at least the model's
  minimum cacheable length is stored with its TTL ("5m" or "1h").
* Usage: `input_tokens` is what is neither read nor written,
  `cache_read_input_tokens` the hit, `cache_creation_input_tokens` the newly
  written span (split 5m / 1h in `cache_creation`).

Tokens are estimated as 4 characters of compact JSON each; the clock is
injectable so TTL expiry is tested without waiting.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from phoenix_nb.demo.validate import RequestInvalid

LOOKBACK = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
DEFAULT_MIN_TOKENS = 1024
# The documented minimum cacheable prompt length of some models; others get the default.
MIN_TOKENS: Mapping[str, int] = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-haiku-4-5": 4096,
    "claude-opus-5": 512,
}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def estimate_tokens(value: Any) -> int:
    """The fake's tokenizer: compact JSON length / 4, at least 1."""
    return max(1, len(json.dumps(value, separators=(",", ":"), sort_keys=True)) // 4)


@dataclass(frozen=True)
class CacheUsage:
    """How one request's input was billed."""

    input_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


@dataclass
class _Entry:
    ttl: str
    expires: float


def _strip(block: Any) -> Any:
    if isinstance(block, Mapping):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _marker_ttl(marker: Any, where: str) -> str:
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        raise RequestInvalid(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = marker.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise RequestInvalid(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _markable(block: Any) -> bool:
    if isinstance(block, str):
        return bool(block.strip())
    if not isinstance(block, Mapping) or block.get("type") in _UNMARKABLE:
        return False
    return not (block.get("type") == "text" and not str(block.get("text") or "").strip())


class PromptCache:
    """The server-side cache of one fake server (all keys, all models)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        min_tokens: int | None = None,
        lookback: int = LOOKBACK,
    ) -> None:
        self.clock = clock
        self.min_tokens = min_tokens  # None: the model's documented minimum
        self.lookback = lookback
        self.offset = 0.0
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self.clock() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the cache's clock forward (TTL tests without sleeping)."""
        self.offset += seconds

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def minimum(self, model: str) -> int:
        if self.min_tokens is not None:
            return self.min_tokens
        for name, value in MIN_TOKENS.items():
            if model == name or model.startswith(name + "-"):
                return value
        return DEFAULT_MIN_TOKENS

    @staticmethod
    def segments(body: Mapping[str, Any]) -> tuple[list[Any], list[tuple[int, str]]]:
        """The prompt's blocks in order (markers removed) and its breakpoints.

        Raises RequestInvalid for markers the API rejects.
        """
        blocks: list[Any] = []
        marks: list[tuple[int, str]] = []
        markable: list[int] = []

        def add(block: Any, where: str, can_mark: bool) -> None:
            if isinstance(block, Mapping) and "cache_control" in block:
                if not _markable(block):
                    raise RequestInvalid(f"{where}: this block cannot carry cache_control")
                marks.append((len(blocks), _marker_ttl(block["cache_control"], where)))
            if can_mark:
                markable.append(len(blocks))
            blocks.append(_strip(block))

        for i, tool in enumerate(body.get("tools") or []):
            add(tool, f"tools.{i}", True)
        system = body.get("system")
        if isinstance(system, str) and system:
            add(system, "system", True)
        elif isinstance(system, list):
            for i, block in enumerate(system):
                add(block, f"system.{i}", _markable(block))
        for m, message in enumerate(body.get("messages") or []):
            content = message.get("content") if isinstance(message, Mapping) else None
            items = [content] if isinstance(content, str) else list(content or [])
            for b, block in enumerate(items):
                add(block, f"messages.{m}.content.{b}", _markable(block))
        top = body.get("cache_control")
        if top is not None:
            ttl = _marker_ttl(top, "")
            if markable and all(index != markable[-1] for index, _ in marks):
                marks.append((markable[-1], ttl))
        marks.sort()
        if len(marks) > MAX_BREAKPOINTS:
            raise RequestInvalid(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        seen_short = False
        for _, ttl in marks:
            if ttl == "5m":
                seen_short = True
            elif seen_short:
                raise RequestInvalid(
                    "a ttl='1h' cache_control block must not come after a ttl='5m' one"
                )
        return blocks, marks

    def process(self, body: Mapping[str, Any]) -> CacheUsage:
        """Bill one request: read the longest live prefix, write the new breakpoints."""
        blocks, marks = self.segments(body)
        model = str(body.get("model", ""))
        hashes: list[str] = []
        cumulative: list[int] = []
        digest = hashlib.sha256(model.encode())
        total = 0
        for block in blocks:
            digest.update(json.dumps(block, sort_keys=True, separators=(",", ":")).encode())
            hashes.append(digest.copy().hexdigest())
            total += estimate_tokens(block)
            cumulative.append(total)
        if not marks:
            return CacheUsage(input_tokens=total)
        now = self.now()
        with self._lock:
            hit = -1
            for point, _ in marks:
                for j in range(point, max(-1, point - self.lookback), -1):
                    entry = self._entries.get(hashes[j])
                    if entry is not None and entry.expires > now:
                        hit = max(hit, j)
                        break
            read = cumulative[hit] if hit >= 0 else 0
            if hit >= 0:
                entry = self._entries[hashes[hit]]
                entry.expires = now + TTL_SECONDS[entry.ttl]
            minimum = self.minimum(model)
            boundary = read
            created = created_1h = 0
            for point, ttl in marks:
                if point <= hit or cumulative[point] < minimum:
                    continue
                self._entries[hashes[point]] = _Entry(ttl, now + TTL_SECONDS[ttl])
                span = cumulative[point] - boundary
                boundary = cumulative[point]
                created += span
                if ttl == "1h":
                    created_1h += span
            self._entries = {k: e for k, e in self._entries.items() if e.expires > now}
        return CacheUsage(
            input_tokens=total - read - created,
            cache_creation_input_tokens=created,
            cache_read_input_tokens=read,
            cache_creation_1h_input_tokens=created_1h,
        )
