"""One budget per turn, sub-agents included: the rounds and dollars a turn's sub-agents draw.

The turn budget (`core.states.TurnBudget`: ``max_turn_rounds``, ``max_turn_cost``)
is the parent's, but a turn's sub-agents run concurrently, each its own
conversation. Counting their responses when they arrive would let three children
with one round left each send a request; so every model request of a sub-agent
is *reserved* here before it is sent (`TurnPool.enter`): it goes out only while
the parent's own responses plus the requests its sub-agents have started stay
under ``max_turn_rounds``, and while what the turn has spent (the parent's share
when the children were spawned, plus every child response's price, recorded as
it arrives) stays under ``max_turn_cost``. With a dollar limit on a priced
model, one sub-agent request is in flight at a time, so the turn stops after
the response that reached the limit, as the parent's own rounds do; without
one, children run in parallel. A refused request is a non-retryable failure
whose text says which limit stopped the sub-agent; the parent's sub-agent
result shows it, and the parent's next request is refused by the same budget
(`core.transition`, ``TurnBudget.sub_agent_rounds``), with a note saying so.

One pool per parent turn: made at the turn's first spawn, dropped at the next
user message. Its count never resets within the turn, whatever happens in it
(mode approvals, more spawns, retries: a retried request is a request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from phoenix_nb.core.prices import cost, format_usd
from phoenix_nb.core.values import Usage

__all__ = ["PoolGate", "TurnPool"]


@dataclass
class TurnPool:
    """The turn's rounds and dollars as its sub-agents draw them (see the module).

    ``parent_rounds``: the parent's responses this turn, read at each reservation.
    ``base_spent``: what the turn had spent when its last spawn began (None: the
    model has no price, dollar limits are off), set by `at_spawn`.
    """

    model: str
    max_rounds: int | None
    max_cost: float | None
    parent_rounds: Callable[[], int]
    base_spent: float | None = None
    rounds: int = 0  # sub-agent requests started this turn
    spent_by: dict[str, float] = field(default_factory=dict)  # child conversation id -> USD
    stopped: str | None = None  # the first refusal's text
    _one: asyncio.Semaphore | None = None

    def at_spawn(self, turn_spent: float | None) -> None:
        """A spawn begins: `turn_spent` is the turn's spend with every earlier child
        already counted by the parent's record, so their share here is dropped."""
        self.base_spent = turn_spent
        self.spent_by.clear()

    def spent(self) -> float:
        return sum(self.spent_by.values())

    def spent_outside(self, known: Collection[str]) -> float:
        """What children not yet in the parent's record have spent."""
        return sum(usd for cid, usd in self.spent_by.items() if cid not in known)

    def _dollars_limited(self) -> bool:
        return self.max_cost is not None and self.base_spent is not None

    def _refusal(self) -> str | None:
        used = self.parent_rounds() + self.rounds
        if self.max_rounds is not None and used >= self.max_rounds:
            return (
                f"Stopped by the turn's budget: the turn has used {used} of its "
                f"{self.max_rounds} model responses (c.Phoenix.max_turn_rounds counts the "
                "sub-agents' responses too)."
            )
        if self._dollars_limited():
            assert self.max_cost is not None and self.base_spent is not None
            total = self.base_spent + self.spent()
            if total >= self.max_cost:
                return (
                    f"Stopped by the turn's budget: the turn has spent {format_usd(total)}, "
                    f"which reaches its limit of {format_usd(self.max_cost)} "
                    "(c.Phoenix.max_turn_cost counts the sub-agents' spend too)."
                )
        return None

    async def enter(self) -> tuple[str | None, bool]:
        """Reserve one request: (None, held) to send it, or (the text saying which
        limit refuses it, False). `held`: the one-in-flight slot was taken; `leave`
        gives it back once the request has ended."""
        held = False
        if self._dollars_limited():
            if self._one is None:
                self._one = asyncio.Semaphore(1)
            await self._one.acquire()
            held = True
        refused = self._refusal()
        if refused is not None:
            self.stopped = self.stopped or refused
            self.leave(held)
            return refused, False
        self.rounds += 1
        return None, held

    def leave(self, held: bool) -> None:
        if held and self._one is not None:
            self._one.release()

    def spend(self, who: str, usage: Usage) -> None:
        """A child's response arrived: its price counts now (before the next
        reservation can be made)."""
        price = cost(usage, self.model)
        if price is not None:
            self.spent_by[who] = self.spent_by.get(who, 0.0) + price


@dataclass
class PoolGate:
    """One sub-agent's view of its parent turn's pool (`executors.LlmExecutor.gate`)."""

    pool: TurnPool
    who: str
    _held: bool = False

    async def enter(self) -> str | None:
        """None: send the request (call `leave` when it has ended); else why not."""
        refused, self._held = await self.pool.enter()
        return refused

    def spend(self, usage: Usage) -> None:
        self.pool.spend(self.who, usage)

    def leave(self) -> None:
        held, self._held = self._held, False
        self.pool.leave(held)
