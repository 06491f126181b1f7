"""Prompt-cache breakpoints for Messages API requests.

An agent loop re-sends its whole history every round; without caching the
input bill grows with the square of the number of rounds. The API caches a
prompt prefix up to a `cache_control` breakpoint and, on a later request,
finds an earlier entry by looking back at most 20 blocks from each breakpoint.

So every request gets:

* the automatic top-level `cache_control` (the API puts the breakpoint on the
  last cacheable block and it moves forward as the history grows): system +
  tools + history are written once and read back at 0.1x afterwards;
* a second, explicit breakpoint on the block where the previous request of the
  same conversation ended, when more than `LOOKBACK` blocks were added since
  (a round of many tool calls, a sub-agent's burst): the automatic breakpoint
  alone would look back too short a way and write the whole prefix again.

The planner remembers, per conversation prefix (model, system, tools and first
message), where the last request ended. It is placed where the request is sent
(the provider), so request shaping stays ignorant of caching and the system
prompt and tool definitions are sent byte for byte as given.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

CacheTtl = Literal["5m", "1h"]
CACHE_TTLS: tuple[str, ...] = ("5m", "1h")
LOOKBACK = 20  # blocks the API looks back from a breakpoint for an earlier entry
# Blocks that cannot carry cache_control (they are cached as part of the prefix).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_MEMORY = 512  # conversations remembered; an LRU bound, not a correctness limit


def cache_control(ttl: str) -> dict[str, str]:
    """The marker for `ttl` ("5m" is the API's default and is sent without a ttl field)."""
    if ttl not in CACHE_TTLS:
        raise ValueError(f"cache_ttl must be one of {', '.join(CACHE_TTLS)} (got {ttl!r})")
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return [content] if isinstance(content, str) else list(content or [])


def _markable(block: Any) -> bool:
    if isinstance(block, str):
        return bool(block.strip())
    if not isinstance(block, Mapping):
        return False
    if block.get("type") in _UNMARKABLE:
        return False
    return not (block.get("type") == "text" and not str(block.get("text") or "").strip())


def _fingerprint(params: Mapping[str, Any]) -> str:
    messages = params.get("messages") or []
    head = {
        "model": params.get("model"),
        "system": params.get("system"),
        "tools": params.get("tools"),
        "first": messages[0] if messages else None,
    }
    return hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode()).hexdigest()


Position = tuple[int, int]  # (message index, block index) of a content block


def _count(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    return 1 if isinstance(content, str) else len(content or ())


def _block(messages: Sequence[Mapping[str, Any]], pos: Position) -> Any:
    content = messages[pos[0]].get("content")
    return content if isinstance(content, str) else (content or ())[pos[1]]


def _before(messages: Sequence[Mapping[str, Any]], pos: Position) -> Position | None:
    """The block just before `pos` in prompt order, or None at the start.

    Breakpoints go near the end of a history that may hold thousands of messages,
    so positions are walked back from the end: placing one costs the blocks walked
    over, never the whole request."""
    m, b = pos
    while b <= 0:
        m -= 1
        if m < 0:
            return None
        b = _count(messages[m])
    return m, b - 1


def _last_markable(messages: Sequence[Mapping[str, Any]], pos: Position | None) -> Position | None:
    """The last markable block at or before `pos`, or None."""
    while pos is not None and not _markable(_block(messages, pos)):
        pos = _before(messages, pos)
    return pos


def _more_than(
    messages: Sequence[Mapping[str, Any]], start: Position, end: Position, limit: int
) -> bool:
    """Whether more than `limit` blocks separate `start` from `end` (start < end)."""
    pos: Position | None = end
    steps = 0
    while pos is not None and pos != start:
        steps += 1
        if steps > limit:
            return True
        pos = _before(messages, pos)
    return False


def _valid(messages: Sequence[Mapping[str, Any]], pos: Position) -> bool:
    return 0 <= pos[0] < len(messages) and 0 <= pos[1] < _count(messages[pos[0]])


def _mark(
    messages: list[dict[str, Any]], where: Position, marker: dict[str, str]
) -> list[dict[str, Any]]:
    """A copy of `messages` with `marker` on one block; the caller's lists stay untouched."""
    m, b = where
    blocks = _blocks(messages[m])
    block = blocks[b]
    new_block = {"type": "text", "text": block} if isinstance(block, str) else dict(block)
    new_block["cache_control"] = marker
    blocks = [*blocks[:b], new_block, *blocks[b + 1 :]]
    out = list(messages)
    out[m] = {**messages[m], "content": blocks}
    return out


class CachePlanner:
    """Adds cache breakpoints to request parameters (see the module docstring)."""

    def __init__(self, ttl: str | None = "1h") -> None:
        if ttl is not None:
            cache_control(ttl)  # validates
        self.ttl = ttl
        self._ends: OrderedDict[str, Position] = OrderedDict()

    def apply(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` with breakpoints; unchanged when caching is off."""
        if self.ttl is None:
            return params
        marker = cache_control(self.ttl)
        messages = list(params.get("messages") or [])
        last = _before(messages, (len(messages) - 1, _count(messages[-1]))) if messages else None
        end = _last_markable(messages, last)
        key = _fingerprint(params)
        previous = self._ends.get(key)
        out = {**params, "cache_control": marker}
        if (
            previous is not None
            and end is not None
            and _valid(messages, previous)
            and previous < end
            and _more_than(messages, previous, end, LOOKBACK)
        ):
            target = _last_markable(messages, previous)
            if target is not None:
                out["messages"] = _mark(messages, target, marker)
        if end is not None:
            self._ends[key] = end
            self._ends.move_to_end(key)
            while len(self._ends) > _MEMORY:
                self._ends.popitem(last=False)
        return out
