"""One live conversation: the loop where the pure core meets the world.

One asyncio task per conversation takes events from a queue, calls
`transition`, persists the new state, and only then dispatches the effects
(REQ-BED-007): messages to the store, work to the executors (`executors.py`
for LLM requests, tools and retry timers, `subagents.py` for sub-agents),
notifications to the watchers (`updates.py`). Executors run their work as
their own tasks and come back as events, so the loop is always free to take
the next event: a cancel is put at the head of the queue (REQ-BED-005) and
reaches `transition` while the work it cancels is still running; `AbortLlm` /
`AbortTool` then cancel that work. Anything a cancelled task still manages to
post finds a phase that no longer waits for it, and the core ignores it — late
results never add a second answer.

Before a user's event makes it work, the conversation is claimed (`claim.py`:
its lease, a fresh read of the store, and a restore if another kernel left it
mid-work); it is released when it rests again.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from phoenix_nb.commands import BackgroundJobs, CommandRunner
from phoenix_nb.core import effects as fx
from phoenix_nb.core import events as ev
from phoenix_nb.core.codec import CodecError
from phoenix_nb.core.cycles import Projection
from phoenix_nb.core.prices import ModelTables
from phoenix_nb.core.requests import RequestHistory, continuation_messages
from phoenix_nb.core.restore import restore
from phoenix_nb.core.states import (
    CONTINUATION_THRESHOLD,
    WARNING_THRESHOLD,
    AwaitingContinuation,
    AwaitingModeApproval,
    ConvContext,
    ConvState,
    Failed,
    LlmRequesting,
    TurnBudget,
    context_fraction,
    persisted_fields,
)
from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.core.tool_fields import ToolTraits
from phoenix_nb.core.transition import Outcome, Rejection, continuation_prompt, transition
from phoenix_nb.core.values import ErrorKind, Mode, SubAgentOutcome, ToolResult, Usage
from phoenix_nb.errors import ConversationBusy, Rejected
from phoenix_nb.llm.provider import LlmRequest
from phoenix_nb.runtime import long_lived
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.claim import claim, release, since_last_answer
from phoenix_nb.runtime.executors import LlmExecutor, RetryTimers, ToolExecutor, Work
from phoenix_nb.runtime.lease import lease_for
from phoenix_nb.runtime.ports import LlmProvider, SubAgents, ToolRunner, WorkTreeRecorder
from phoenix_nb.runtime.prompts import system_prompt
from phoenix_nb.runtime.turn_pool import PoolGate, TurnPool
from phoenix_nb.sandbox import SandboxInfo, SandboxPolicy
from phoenix_nb.store import Store, StoreError
from phoenix_nb.tools.base import Tool, ToolContext
from phoenix_nb.tools.kernel_port import KernelPort

log = logging.getLogger(__name__)

_CHECKPOINTS: set[asyncio.Task[None]] = set()  # checkpoint tasks started by the loop
# Messages the history's caches may lag behind before `warm` builds them off the loop.
WARM_AFTER = 200

# Events only a user sends; the kernel sending one must hold the conversation's lease.
# Events after which the core may decide to ask the model again: the turn budget
# (sub-agents' rounds and spend included) is brought up to date before each.
BUDGET_EVENTS = (ev.UserMessage, ev.LlmResponse, ev.SubAgentResult, ev.ToolComplete)
USER_EVENTS = (
    ev.UserMessage,
    ev.UserCancel,
    ev.UserApproveUpgrade,
    ev.UserDenyUpgrade,
    ev.UserRequestDowngrade,
    ev.UserTriggerContinuation,
)


@dataclass(frozen=True)
class BusyElsewhere(Rejection):
    """Refused: another kernel holds the conversation's lease."""


def is_rest(state: ConvState) -> bool:
    """The agent is not working and waits for nobody but the user."""
    return not state.busy


def is_paused(state: ConvState) -> bool:
    """The agent waits for the human's answer to an upgrade request (REQ-BED-015)."""
    return isinstance(state.phase, AwaitingModeApproval)


@dataclass
class Services:
    """What a conversation needs from the world, shared by all conversations."""

    store: Store
    provider: LlmProvider
    sandbox: SandboxInfo
    tools_for: Callable[[bool], Sequence[Tool]]
    run_tool: ToolRunner
    api_tool_specs: Callable[[Sequence[Tool]], list[dict[str, Any]]]
    # What the tools declare for the record (group, summary field): the registry's table.
    tool_traits: Callable[[Sequence[Tool]], ToolTraits]
    retry_delay_scale: float = 1.0
    helper_model: str | None = None
    secret_patterns: tuple[str, ...] | None = None
    env_allow: tuple[str, ...] = ()
    kernel: KernelPort | None = None  # the Jupyter kernel (notebook layer), for the kernel tools
    kernel_access: Callable[[], bool] = lambda: True  # read per call: %config may change it
    thinking: Mapping[str, Any] | None = None
    spawner: SubAgents | None = None  # set by the manager
    worktree: WorkTreeRecorder | None = None  # checkpoints (phoenix_nb.checkpoints), if on
    # The turn budget's limits (its spent figures are filled in per conversation), and the
    # finished sub-agents' responses by their conversation ids (the manager reads them).
    budget: TurnBudget = field(default_factory=TurnBudget)
    sub_agent_usage: Callable[[Sequence[str]], tuple[tuple[str, Usage], ...]] = lambda ids: ()
    # What the Phoenix's providers hold now (keys, tokens their SDKs made): forks scrub it.
    live_credentials: Callable[[], tuple[str, ...]] = lambda: ()
    sandbox_policy: SandboxPolicy = field(default_factory=SandboxPolicy)  # the Phoenix's
    tables: ModelTables = field(default_factory=ModelTables)  # the Phoenix's models, prices
    jobs: BackgroundJobs = field(default_factory=BackgroundJobs)  # the Phoenix's
    # Headers every model request of a conversation carries, given its slug: on a
    # JupyterHub, the gateway's conversation tag (Settings.request_headers).
    request_headers: Callable[[str], Mapping[str, str]] = lambda slug: {}


class ConversationRuntime:
    """The event loop of one conversation and the dispatcher of its effects."""

    def __init__(
        self,
        *,
        record: Mapping[str, Any],
        context: ConvContext,
        state: ConvState,
        history: list[StoredMessage],
        services: Services,
        on_parent: Callable[[SubAgentOutcome], None] | None = None,
    ) -> None:
        self.record = dict(record)
        self.context = context
        self.state = state
        # The history's caches (`projection`, `requests`), fed each stored message once.
        self._history = history
        self._projection: Projection | None = None
        self._requests: RequestHistory | None = None
        self._generation = 0  # bumped when the history is replaced, not extended
        self.services = services
        self._commands: CommandRunner | None = None  # made on first use (`commands`)
        self.on_parent = on_parent
        self.hub = up.UpdateHub()
        self.tools: tuple[Tool, ...] = tuple(services.tools_for(context.is_sub_agent))
        # The record's view of these tools; fixed with them for the conversation.
        self.traits: ToolTraits = services.tool_traits(self.tools)
        self._queue: collections.deque[tuple[ev.Event, asyncio.Future[Outcome]]] = (
            collections.deque()
        )
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._work = Work(self.slug)
        self._llm = LlmExecutor(services.provider, self.hub, self.post, self._work)
        self._tools = ToolExecutor(self.tools, self._run_tool, self.hub, self.post, self._work)
        self._timers = RetryTimers(self.post, self._work, lambda: self.services.retry_delay_scale)
        self._lease: FileLock | None = None
        self._settled = asyncio.Event()
        self._update_settled()
        self._saving = False  # a step's saves are being made durable (`_step`)
        self.closed = False
        # The turn's sub-agent budget (`turn_pool`): a conversation's for its current
        # turn, made at its first spawn; a sub-agent's is its parent turn's.
        self.turn_pool: TurnPool | None = None

    # ---- identity -------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def slug(self) -> str:
        return str(self.record.get("slug") or self.id)

    # ---- the history and what is derived from it ----------------------------------
    @property
    def history(self) -> list[StoredMessage]:
        """The stored messages, in order (append-only while this runtime lives)."""
        return self._history

    @history.setter
    def history(self, value: list[StoredMessage]) -> None:
        old = self._history
        extended = len(value) >= len(old) and (
            not old or (value[0] is old[0] and value[len(old) - 1] is old[-1])
        )
        if not extended:  # read afresh from the store: the caches start over
            self._projection = self._requests = None
            self._generation += 1
        self._history = value

    def projection(self) -> Projection:
        """The record's projection, brought up to the last stored message."""
        projection = self._projection
        if projection is None:
            prices = self.context.tables.prices
            projection = self._projection = Projection(
                self.context.model, prices=prices, tools=self.traits
            )
        if projection.count < len(self._history):
            projection.extend(self._history[projection.count :])
        return projection

    def request_history(self) -> RequestHistory:
        """The history's API form, brought up to the last stored message."""
        requests = self._requests
        if requests is None:
            requests = self._requests = RequestHistory()
        if requests.count < len(self._history):
            requests.extend(self._history[requests.count :])
        return requests

    def budget(self) -> TurnBudget:
        """The turn budget's limits with what this turn and the conversation have spent
        (sub-agents included), from the record's running sums."""
        projection = self.projection()
        spent = projection.spent(self.services.sub_agent_usage(projection.child_ids))
        turn, total = spent if spent is not None else (None, None)
        pool, rounds = self.turn_pool, 0
        if pool is not None:  # children still running or not yet in the record
            rounds = pool.rounds
            extra = pool.spent_outside(projection.child_ids)
            turn = None if turn is None else turn + extra
            total = None if total is None else total + extra
        return replace(
            self.services.budget,
            turn_spent=turn,
            conversation_spent=total,
            sub_agent_rounds=rounds,
        )

    def pool_for_spawn(self) -> TurnPool:
        """This turn's sub-agent pool (made at its first spawn), told what the turn has
        spent so far (`TurnPool.at_spawn`)."""
        budget = self.budget()
        if self.turn_pool is None:
            self.turn_pool = TurnPool(
                model=self.context.model,
                max_rounds=budget.max_rounds,
                max_cost=budget.max_turn_cost,
                parent_rounds=lambda: self.state.turn_rounds,
            )
        self.turn_pool.at_spawn(budget.turn_spent)
        return self.turn_pool

    def join_pool(self, pool: TurnPool | None) -> None:
        """A sub-agent: every request it makes is reserved from its parent turn's pool."""
        self.turn_pool = pool
        self._llm.gate = PoolGate(pool, self.id) if pool is not None else None

    async def warm(self) -> None:
        """Build the history's caches in a worker thread when they lag far behind (a
        conversation just loaded from the store), so the event loop never walks a long
        history; afterwards each new message costs its own conversion only."""
        count = len(self._history)
        behind = [
            cache is None or cache.count + WARM_AFTER < count
            for cache in (self._projection, self._requests)
        ]
        if count < WARM_AFTER or not any(behind):
            return
        generation, snapshot, model = self._generation, self._history[:count], self.context.model
        prices, traits = self.context.tables.prices, self.traits

        def build() -> tuple[Projection, RequestHistory]:
            projection = Projection(model, prices=prices, tools=traits)
            requests = RequestHistory()
            projection.extend(snapshot)
            requests.extend(snapshot)
            return projection, requests

        try:
            with long_lived.reading():  # no full collection walks what is half built
                projection, requests = await asyncio.to_thread(build)
        except (CodecError, ValueError, KeyError, TypeError):
            return  # an unreadable message: the caller meets the same error where it reads
        if generation != self._generation:
            return  # replaced while we built: the next reader starts over
        if self._projection is None or self._projection.count < projection.count:
            self._projection = projection
        if self._requests is None or self._requests.count < requests.count:
            self._requests = requests

    # ---- posting events ---------------------------------------------------------
    def post(self, event: ev.Event, *, urgent: bool = False) -> asyncio.Future[Outcome]:
        """Queue an event; the future resolves to the Transition or Rejection."""
        if self.closed:
            raise RuntimeError(f"conversation {self.slug} is closed")
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        if urgent:
            self._queue.appendleft((event, future))
        else:
            self._queue.append((event, future))
        self._settled.clear()
        self._wakeup.set()
        self._ensure_loop()
        return future

    async def submit(self, event: ev.Event, *, urgent: bool = False) -> Outcome:
        """Post and wait for the core's answer; a rejection raises `Rejected`."""
        outcome = await self.post(event, urgent=urgent)
        if isinstance(outcome, Rejection):
            if isinstance(outcome, BusyElsewhere):
                raise ConversationBusy(outcome.message)
            raise Rejected(outcome.message)
        return outcome

    def _ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(
                self._run(), name=f"phoenix-conversation-{self.slug}"
            )

    async def _run(self) -> None:
        while not self.closed:
            if not self._queue:
                self._update_settled()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            event, future = self._queue.popleft()
            outcome: Outcome
            try:
                outcome = await self._step(event)
            except asyncio.CancelledError:  # closed while the step's saves were made
                if not future.done():
                    future.set_result(Rejection("the conversation was closed"))
                raise
            except Exception as exc:  # a bug: keep the loop alive and tell the user
                log.exception("phoenix: failed to process %r", event)
                self.hub.publish(up.NoticeText(f"Internal error while handling an event: {exc}"))
                outcome = Rejection(f"internal error: {exc}")
            if not future.done():
                future.set_result(outcome)

    async def _step(self, event: ev.Event) -> Outcome:
        """queue → transition → persist → dispatch.

        The step's saves (its new state, then the messages its effects persist before
        any other effect) are made durable in a worker thread: each is an fdatasync,
        1-30 ms on a busy disk, and the loop serves the cell's buttons meanwhile. Only
        once they are durable does anything change in memory: the state, the history,
        the updates and the effects, in one go, so nothing on the loop ever sees a
        state whose messages are missing, and nothing acts on an unsaved message."""
        if isinstance(event, USER_EVENTS) and not self._holds_lease():
            try:
                refused = self._claim()
            except StoreError as exc:  # full, read-only or damaged: nothing has started
                return Rejection(str(exc))
            if refused is not None:
                return refused
        if isinstance(event, BUDGET_EVENTS) and not self.context.is_sub_agent:
            self.context = replace(self.context, budget=self.budget())
        outcome = transition(self.state, self.context, event)
        if isinstance(outcome, Rejection):
            self._release_if_rest()
            return outcome
        if isinstance(event, ev.UserMessage) and not self.context.is_sub_agent:
            self.turn_pool = None  # a new turn: its sub-agents draw from a new pool
        previous = self.state
        state = outcome.state
        effects = list(outcome.effects)
        leading = 0  # the messages persisted before any other effect: saved with the state
        while leading < len(effects) and isinstance(effects[leading], fx.PersistMessage):
            leading += 1
        batch = [m for m in effects[:leading] if isinstance(m, fx.PersistMessage)]
        fields = persisted_fields(state) if state != previous else None
        try:
            record, saved = await self._saving_off_the_loop(fields, batch)
        except StoreError as exc:
            self.state = state
            return self._stop_unsaved(previous, exc)
        self.state = state
        try:
            if record is not None:
                self.record = record
            self._saved(saved)
            self._checkpoint_if_writes_begin(previous, event)
            self._dispatch(effects[leading:])
        except StoreError as exc:
            return self._stop_unsaved(previous, exc)
        if self.state != previous:
            self._publish_state()
        self._release_if_rest()
        return outcome

    async def _saving_off_the_loop(
        self, fields: dict[str, Any] | None, batch: Sequence[fx.PersistMessage]
    ) -> tuple[dict[str, Any] | None, list[StoredMessage]]:
        """`_save` in a worker thread (nothing to save: no thread). A close meanwhile
        waits for the saves to finish, so no write outlives the runtime's lease."""
        if fields is None and not batch:
            return None, []
        self._saving = True
        save = asyncio.ensure_future(asyncio.to_thread(self._save, fields, batch))
        try:
            return await asyncio.shield(save)
        except asyncio.CancelledError:
            await asyncio.wait([save])
            raise
        finally:
            self._saving = False

    def _stop_unsaved(self, previous: ConvState, exc: StoreError) -> Rejection:
        """A save failed (disk full, read-only, I/O): stop the turn where the store stands.

        Effects after the failed save never ran, so nothing unsaved reached the model
        (REQ-BED-007); work already started is aborted. The conversation rests as restore
        would bring it back from what was saved (calls left open are answered when it is
        next claimed, once saving works again), and the user reads the store's one line.
        A sub-agent ends Failed with that line and tells its parent at once, so the parent
        neither waits for it nor reads "a kernel restart" as the cause.
        """
        self._llm.abort()
        self._timers.abort()
        for task in self._tools.live():
            task.cancel()
        tail = since_last_answer(self.history)
        self.state = restore(self.state, tail, is_sub_agent=self.context.is_sub_agent)[0]
        if self.context.is_sub_agent and isinstance(self.state.phase, Failed):
            stopped = Failed(f"The sub-agent stopped because its save failed: {exc}")
            self.state = replace(self.state, phase=stopped)
        kept = False
        try:
            self.record = self.services.store.update_conversation(
                self.id, **persisted_fields(self.state)
            )
        except StoreError:
            kept = True  # the stored state is still busy: the marker makes start-up restore it
        self.hub.publish(up.NoticeText(str(exc)))
        self._publish_state()
        phase = self.state.phase
        if self.on_parent is not None and isinstance(phase, Failed):
            self.on_parent(SubAgentOutcome("failure", phase.error, ErrorKind.UNKNOWN))
        if self._lease is not None and self._lease.is_locked:
            release(self.services.store.root, self.id, self._lease, keep_marker=kept)
        return Rejection(str(exc))

    # ---- two kernels, one store -----------------------------------------------------
    def _claim(self) -> Rejection | None:
        """Take the conversation before it starts working, fresh from the store.

        Another kernel may have used this conversation since we loaded it: its
        messages and state are read back first, so our history never diverges;
        one another kernel left mid-work when it died is restored, as at start-up.
        """
        if self._lease is None:
            self._lease = lease_for(self.services.store.root, self.id)
        claimed = claim(
            self.services.store,
            self.id,
            is_sub_agent=self.context.is_sub_agent,
            lease=self._lease,
            known_history=self.history,
        )
        if claimed is None:
            return BusyElsewhere(
                f"Conversation {self.slug} is working in another kernel. Wait for it to "
                "finish there (or cancel it there), or use another conversation."
            )
        self.record, self.state, self.history = claimed.record, claimed.state, claimed.history
        for message in claimed.repairs:
            self.hub.publish(up.MessageSaved(message))
        return None

    def _holds_lease(self) -> bool:
        return self._lease is not None and self._lease.is_locked

    def _release_if_rest(self) -> None:
        if self._lease is not None and self._lease.is_locked and is_rest(self.state):
            release(self.services.store.root, self.id, self._lease)

    def annotate(self, text: str) -> None:
        """Record a system note (e.g. an answer given in advance) while the agent waits.

        Only at rest or paused, so it never lands between a tool_use and its result.
        """
        if not (is_rest(self.state) or is_paused(self.state)) or self._saving:
            raise Rejected("notes can only be added while the agent waits")
        self._persist([fx.PersistMessage(MessageKind.SYSTEM, {"text": text})])

    # ---- dispatch -------------------------------------------------------------------
    def _dispatch(self, effects: Sequence[fx.Effect]) -> None:
        batch: list[fx.PersistMessage] = []
        for effect in effects:
            if isinstance(effect, fx.PersistMessage):
                batch.append(effect)
                continue
            if batch:
                self._persist(batch)
                batch = []
            self._run_effect(effect)
        if batch:
            self._persist(batch)

    def _persist(self, batch: Sequence[fx.PersistMessage]) -> None:
        self._saved(self._append(batch))

    def _append(self, batch: Sequence[fx.PersistMessage]) -> list[StoredMessage]:
        """Durable when this returns (`Store.append_messages`)."""
        if not batch:
            return []
        items = [StoredMessage(m.kind, m.content, m.display, m.usage) for m in batch]
        return self.services.store.append_messages(self.id, items)

    def _save(
        self, fields: dict[str, Any] | None, batch: Sequence[fx.PersistMessage]
    ) -> tuple[dict[str, Any] | None, list[StoredMessage]]:
        """A step's saves, in a worker thread: its state (if it changed), then its
        messages, as the step made them in place (a crash between leaves what restore
        handles: a state committed before its messages)."""
        record = None
        if fields is not None:
            record = self.services.store.update_conversation(self.id, **fields)
        return record, self._append(batch)

    def _saved(self, saved: Sequence[StoredMessage]) -> None:
        """Messages now durable: into the history, and told to whoever watches."""
        self.history.extend(saved)
        for message in saved:
            self.hub.publish(up.MessageSaved(message))

    def _run_effect(self, effect: fx.Effect) -> None:
        match effect:
            case fx.RequestLlm():
                self._llm.start(self.build_request(), self._attempt(), continuation=False)
            case fx.RequestContinuation(rejected_calls=rejected):
                prompt = continuation_prompt(rejected)

                def as_continuation(request: LlmRequest) -> LlmRequest:
                    # every call and result as text: the whole history, in a worker thread
                    messages = continuation_messages(request.messages, prompt)
                    return replace(request, messages=messages)

                request = self.build_request(prompt, whole=False)
                self._llm.start(
                    request, self._attempt(), continuation=True, prepare=as_continuation
                )
            case fx.ExecuteTool(call=call):
                self._tools.start(call, self.tool_context())
            case fx.ScheduleRetry(delay=delay, attempt=attempt):
                self._timers.schedule(delay, attempt)
            case fx.AbortLlm():
                self._llm.abort()
                self._timers.abort()  # a pending retry is part of the request
            case fx.AbortTool(tool_use_id=tool_use_id):
                self._tools.abort(tool_use_id)
            case fx.SpawnSubAgents():
                self._require_spawner().spawn(self, effect)
            case fx.CancelSubAgents(agent_ids=agent_ids):
                # The children's tasks count as aborted work: cancel() returns only
                # once their runtimes and processes are gone.
                for task in self._require_spawner().cancel(self, agent_ids):
                    self._work.follow(task)
            case fx.Notify(kind=kind, data=data):
                self.hub.notify(kind, data)
            case fx.NotifyParent(outcome=outcome):
                if self.on_parent is not None:
                    self.on_parent(outcome)
            case _:
                raise TypeError(f"unknown effect {effect!r}")

    def _require_spawner(self) -> SubAgents:
        if self.services.spawner is None:
            raise RuntimeError("sub-agents need a manager (no spawner configured)")
        return self.services.spawner

    async def aborted_work_stopped(self, timeout: float = 5.0) -> None:
        """Wait until cancelled requests and tools have really stopped (processes reaped)."""
        await self._work.stopped(timeout)

    # ---- what the executors are given -------------------------------------------------
    def _attempt(self) -> int:
        phase = self.state.phase
        if isinstance(phase, LlmRequesting | AwaitingContinuation):
            return phase.attempt
        return 1

    def build_request(self, continuation: str | None = None, *, whole: bool = True) -> LlmRequest:
        """The request for the current history; a continuation asks for a summary, no tools.

        `whole=False` leaves a continuation's messages as a tool request's (calls not yet
        turned into text: `continuation_messages` does that, off the loop)."""
        offered = {tool.name for tool in self.tools}
        info = self.context.model_info
        history = self.request_history()
        return LlmRequest(
            model=self.context.model,
            system=system_prompt(cwd=self.context.cwd, is_sub_agent=self.context.is_sub_agent),
            messages=history.messages(offered, continuation if whole else None),
            tools=[] if continuation is not None else self.services.api_tool_specs(self.tools),
            max_tokens=info.max_output if info is not None else 4096,
            thinking=self.services.thinking if continuation is None else None,
            headers=self.services.request_headers(self.slug),
        )

    def reconfigure(self, services: Services) -> None:
        """Services built from new settings: the next request and tool call use them
        (new model and price tables too: the record's spend is summed again)."""
        if services.tables != self.context.tables:
            self.context = replace(self.context, tables=services.tables)
            self._projection = None
        self.services = services
        self._llm.provider = services.provider
        self._commands = None

    @property
    def commands(self) -> CommandRunner:
        """How this conversation's processes start: one `CommandRunner`, made from the
        Phoenix's policy, sandbox, environment settings, jobs and live credentials
        (again after a reconfigure), with the conversation's own cgroup budget."""
        if self._commands is None:
            s = self.services
            kwargs: dict[str, Any] = {}
            if s.secret_patterns is not None:
                kwargs["secret_patterns"] = s.secret_patterns
            self._commands = CommandRunner(
                policy=s.sandbox_policy,
                group=self.id or "default",
                info=s.sandbox,
                env_allow=s.env_allow,
                jobs=s.jobs,
                live_credentials=s.live_credentials,
                **kwargs,
            )
        return self._commands

    def tool_context(self) -> ToolContext:
        return ToolContext(
            cwd=Path(self.context.cwd),
            mode=self.state.mode,
            commands=self.commands,
            conversation_id=self.id,
            helper_llm=self._helper_llm if self.services.helper_model else None,
            kernel=self.services.kernel,
            kernel_access=self.services.kernel_access(),
        )

    async def _helper_llm(self, system: str, prompt: str) -> str:
        model = self.services.helper_model or self.context.model
        request = LlmRequest(
            model=model,
            system=system,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1024,
        )
        return await self.services.provider.complete_text(request)

    async def _run_tool(
        self, tools: Any, name: str, input: Any, ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        """The tool executor's runner: the registry's, through checkpoints when they are on."""

        async def run() -> ToolResult:
            return await self.services.run_tool(tools, name, input, ctx, tool_use_id)

        worktree = self.services.worktree
        if worktree is None:
            return await run()
        # checkpoints around a call that can write; the result says what it changed
        return await worktree.around_tool(
            conversation_id=self.id,
            cwd=self.context.cwd,
            mode=ctx.mode,
            tool=name,
            tool_use_id=tool_use_id,
            run=run,
            # the tool's own trait; a tool that does not say (a test's stand-in) can write
            writes=next((getattr(t, "writes", True) for t in tools if t.name == name), True),
        )

    def _checkpoint_if_writes_begin(self, previous: ConvState, event: ev.Event) -> None:
        """Checkpoint the working tree at approval and when a turn begins Unrestricted.

        Started before the transition's effects run, so it is taken (the
        recorder's lock orders them) before any tool of this turn can write.
        """
        worktree = self.services.worktree
        if worktree is None or self.state.mode != Mode.UNRESTRICTED:
            return
        if previous.mode != Mode.UNRESTRICTED:
            reason: Literal["approval", "turn"] = "approval"
        elif isinstance(event, ev.UserMessage):
            reason = "turn"
        else:
            return
        task = self._work.start(
            worktree.writes_possible(self.id, self.context.cwd, reason), "phoenix-cp"
        )
        _CHECKPOINTS.add(task)  # referenced until done; never cancelled with a request
        task.add_done_callback(_CHECKPOINTS.discard)

    # ---- watchers ------------------------------------------------------------------------
    def context_usage(self) -> up.ContextUsage:
        window = self.context.window
        usage = self.state.last_usage
        used = usage.context_tokens if usage is not None else 0
        fraction = context_fraction(usage, window)
        return up.ContextUsage(
            used=used,
            window=window,
            fraction=fraction,
            warning=fraction >= WARNING_THRESHOLD,
            limit_reached=fraction >= CONTINUATION_THRESHOLD,
        )

    def usage_summary(self) -> dict[str, Any]:
        """`context_usage()` as the JSON-style dict `Conversation.usage()` has always returned."""
        return asdict(self.context_usage())

    def _publish_state(self) -> None:
        self.hub.publish(up.StateChanged(self.state))
        if self.state.last_usage is not None:
            self.hub.publish(self.context_usage())
        if is_paused(self.state):
            phase = self.state.phase
            assert isinstance(phase, AwaitingModeApproval)
            self.hub.publish(up.ApprovalNeeded(phase.reason, phase.tool_use_id))
        if is_rest(self.state):
            self.hub.publish(up.Rested(self.state))
        self._update_settled()

    def _update_settled(self) -> None:
        if (is_rest(self.state) or is_paused(self.state)) and not self._queue:
            self._settled.set()
        else:
            self._settled.clear()

    async def wait_settled(self) -> ConvState:
        """Wait until the agent rests or waits for the human; returns that state."""
        while True:
            await self._settled.wait()
            if not self._queue and (is_rest(self.state) or is_paused(self.state)):
                return self.state
            self._settled.clear()

    # ---- lifecycle -------------------------------------------------------------------------
    def live_tasks(self) -> list[asyncio.Task[Any]]:
        return [*self._llm.live(), *self._tools.live(), *self._timers.live()]

    async def close(self) -> None:
        """Stop the loop and every task it started; processes die with their tool tasks."""
        self.closed = True
        tasks = self.live_tasks()
        if self._loop_task is not None and not self._loop_task.done():
            tasks.append(self._loop_task)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for _event, future in self._queue:
            if not future.done():
                future.set_result(Rejection("the conversation was closed"))
        self._queue.clear()
        if self._lease is not None and self._lease.is_locked:
            self._lease.release(force=True)
