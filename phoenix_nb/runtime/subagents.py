"""Sub-agents: parallel, isolated, always finishing (REQ-BED-008, 009, 018, 024).

Each task of a spawn_agents call becomes a child conversation with its own
runtime, stored with its parent's id and marked non-user-initiated. Children
run concurrently, bounded by a semaphore so a request for many agents cannot
exhaust the machine. Every child ends in exactly one report to its parent:
its submitted result, a failure (error after retries, context exhausted, turn
limit, no result, a save that failed), or a timeout — and then its runtime is
closed, which kills its tools' process trees. A child that tells its parent how
it ended (NotifyParent, or a failed save) is stopped at once: the parent never
waits for a child that has already said it is done. Cancelling the parent
cancels the children the same way, so no child task or process outlives the
parent's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from phoenix_nb.core import events as ev
from phoenix_nb.core.effects import SpawnSubAgents
from phoenix_nb.core.states import Completed, ConvContext, Error, Failed, Phase, persisted_fields
from phoenix_nb.core.transition import Rejection, initial_state
from phoenix_nb.core.values import ErrorKind, SubAgentOutcome, SubAgentStatus, SubAgentTask
from phoenix_nb.errors import Rejected
from phoenix_nb.runtime.conversation import ConversationRuntime, is_rest
from phoenix_nb.runtime.ports import Parent
from phoenix_nb.runtime.settings import SubAgentLimits
from phoenix_nb.runtime.turn_pool import TurnPool
from phoenix_nb.store import Store, StoreError

log = logging.getLogger(__name__)

STOP_GRACE = 5.0  # seconds a stopped child gets to answer its open tool calls


class ChildHost(Protocol):
    """Where children live: the manager, seen by the sub-agent executor.

    A port instead of the manager itself, so this module and the manager do
    not import each other.
    """

    @property
    def store(self) -> Store: ...

    def open_child(
        self, record: Mapping[str, Any], on_parent: Callable[[SubAgentOutcome], None]
    ) -> ConversationRuntime: ...

    def forget(self, conversation_id: str) -> None: ...


@dataclass
class _Child:
    agent_id: str
    parent: Parent
    task: asyncio.Task[None] | None = None
    runtime: ConversationRuntime | None = None
    outcome: SubAgentOutcome | None = None  # what the child itself said (NotifyParent)
    reported: bool = False
    told: asyncio.Event = field(default_factory=asyncio.Event)  # set with `outcome`
    pool: TurnPool | None = None  # the parent turn's budget, shared by its sub-agents


@dataclass
class SubAgentSpawner:
    """The sub-agent executor: one task per child, bounded, each ending in one report."""

    host: ChildHost
    limits: SubAgentLimits
    sandbox_available: bool
    _children: dict[str, _Child] = field(default_factory=dict)  # by agent_id
    _semaphore: asyncio.Semaphore | None = None

    def set_limits(self, limits: SubAgentLimits) -> None:
        """New limits (a settings change): timeouts apply to the next spawn; a new
        parallelism once no child runs (a semaphore in use cannot be resized)."""
        if limits.max_parallel != self.limits.max_parallel and not self._children:
            self._semaphore = None
        self.limits = limits

    def _limit(self) -> asyncio.Semaphore:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(max(1, self.limits.max_parallel))
        return self._semaphore

    # -- effects ------------------------------------------------------------------------
    def spawn(self, parent: Parent, effect: SpawnSubAgents) -> None:
        timeout = self.timeout_for(effect.timeout)
        pool = parent.pool_for_spawn()  # every child's request is drawn from the parent turn's
        for task in effect.tasks:
            child = _Child(task.agent_id, parent, pool=pool)
            self._children[task.agent_id] = child
            child.task = asyncio.get_running_loop().create_task(
                self._run(child, task, timeout), name=f"phoenix-subagent-{task.agent_id}"
            )

    def timeout_for(self, requested: float | None) -> float:
        """The call's own `timeout` (`SpawnSubAgents.timeout`: a positive number or
        None), clamped to `sub_agent_timeout_max`; the default when it gives none."""
        limits = self.limits
        if requested is not None:
            return min(requested, limits.timeout_max)
        return min(limits.timeout, limits.timeout_max)

    def cancel(self, parent: Parent, agent_ids: tuple[str, ...]) -> list[asyncio.Task[None]]:
        """Cancel these children; returns their tasks so the parent can wait for the
        processes to be gone before its cancel returns."""
        cancelled: list[asyncio.Task[None]] = []
        for agent_id in agent_ids:
            child = self._children.get(agent_id)
            if child is not None:
                child.reported = True  # the parent already answered for it
                if child.task is not None and not child.task.done():
                    child.task.cancel()
                    cancelled.append(child.task)
        return cancelled

    def live_children(self) -> list[ConversationRuntime]:
        return [c.runtime for c in self._children.values() if c.runtime and not c.runtime.closed]

    async def close(self) -> None:
        tasks = [c.task for c in self._children.values() if c.task and not c.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- one child ----------------------------------------------------------------------
    def _report(self, child: _Child, outcome: SubAgentOutcome) -> None:
        if child.reported or child.parent.closed:
            return
        child.reported = True
        child.parent.post(ev.SubAgentResult(child.agent_id, outcome))

    def _create_runtime(self, child: _Child, task: SubAgentTask) -> ConversationRuntime | str:
        parent = child.parent
        cwd = Path(task.cwd).expanduser() if task.cwd else Path(parent.context.cwd)
        if not cwd.is_absolute():
            cwd = Path(parent.context.cwd) / cwd
        if not cwd.is_dir():
            return f"working directory {str(cwd)!r} does not exist"
        store = self.host.store
        probe = ConvContext("new", str(cwd), parent.context.model, True, self.sandbox_available)
        state = initial_state(probe)
        if isinstance(state, Rejection):  # pragma: no cover - sub-agents never request a mode
            return state.message
        record = store.create_conversation(
            cwd=str(cwd.resolve()),
            model=parent.context.model,
            parent_id=parent.id,
            user_initiated=False,
            server=parent.record.get("server"),  # a sub-agent asks its parent's server
            **persisted_fields(state),
        )

        def keep(outcome: SubAgentOutcome) -> None:
            # Held until the child is stopped: the parent hears of it only once
            # nothing of the child runs any more.
            if child.outcome is None:
                child.outcome = _with_id(outcome, record["id"])
                child.told.set()

        runtime = self.host.open_child(record, keep)
        runtime.join_pool(child.pool)
        return runtime

    async def _run(self, child: _Child, task: SubAgentTask, timeout: float) -> None:
        outcome: SubAgentOutcome
        try:
            async with self._limit():
                created = self._create_runtime(child, task)
                if isinstance(created, str):
                    outcome = SubAgentOutcome("failure", created, ErrorKind.INVALID_REQUEST)
                else:
                    child.runtime = created
                    try:
                        async with asyncio.timeout(timeout):
                            await created.submit(ev.UserMessage(task.task))
                            state = await _settled_or_told(created, child)
                        outcome = child.outcome or _outcome_of(state.phase, created.id)
                    except Rejected as exc:  # its first message refused (store unwritable)
                        outcome = SubAgentOutcome(
                            "failure", f"The sub-agent could not start: {exc}", None, created.id
                        )
                    except TimeoutError:
                        outcome = SubAgentOutcome(
                            "timeout",
                            f"The sub-agent did not finish within {timeout:g} s and was stopped.",
                            None,
                            created.id,
                        )
                    finally:
                        await _stop(created)
                        self.host.forget(created.id)
        except asyncio.CancelledError:
            raise
        except StoreError as exc:  # its conversation could not be created (store unwritable)
            outcome = SubAgentOutcome("failure", f"The sub-agent could not start: {exc}", None)
        except Exception as exc:  # never leave the parent waiting
            log.exception("phoenix: sub-agent %s crashed", child.agent_id)
            outcome = SubAgentOutcome("failure", f"internal error: {exc}", None)
        finally:
            self._children.pop(child.agent_id, None)
        self._report(child, outcome)


async def _settled_or_told(runtime: ConversationRuntime, child: _Child) -> Any:
    """The child's state once it settles, or as soon as it has told its outcome (a
    failed save ends it at once, even while a cancelled tool is still winding down)."""
    settled = asyncio.ensure_future(runtime.wait_settled())
    told = asyncio.ensure_future(child.told.wait())
    try:
        await asyncio.wait((settled, told), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (settled, told):
            waiter.cancel()
    return runtime.state


async def _stop(runtime: ConversationRuntime) -> None:
    """End a child for good: cancel its work through the core (so its history gets
    its synthetic results and its state a terminal phase), then close it and kill
    its background jobs. Closing happens even if the graceful part is cut short."""
    try:
        if not runtime.closed and not is_rest(runtime.state):
            with contextlib.suppress(Rejected, RuntimeError, TimeoutError):
                async with asyncio.timeout(STOP_GRACE):
                    await runtime.submit(ev.UserCancel(), urgent=True)
                    await runtime.aborted_work_stopped(STOP_GRACE)
    finally:
        await runtime.close()
        await runtime.services.jobs.kill(runtime.id)


def _with_id(outcome: SubAgentOutcome, conversation_id: str) -> SubAgentOutcome:
    if outcome.conversation_id:
        return outcome
    return SubAgentOutcome(outcome.status, outcome.result, outcome.kind, conversation_id)


def _outcome_of(phase: Phase, conversation_id: str) -> SubAgentOutcome:
    """What a settled child that did not report by itself tells its parent."""
    if isinstance(phase, Completed):
        status: SubAgentStatus = "success" if phase.success else "failure"
        return SubAgentOutcome(status, phase.result, None, conversation_id)
    if isinstance(phase, Failed):
        return SubAgentOutcome("failure", phase.error, phase.kind, conversation_id)
    if isinstance(phase, Error):
        return SubAgentOutcome("failure", phase.message, phase.kind, conversation_id)
    return SubAgentOutcome(
        "failure",
        "The sub-agent stopped without submitting a result.",
        ErrorKind.UNKNOWN,
        conversation_id,
    )
