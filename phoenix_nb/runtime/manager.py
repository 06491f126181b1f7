"""The Python API: open conversations, send messages, answer approvals.

`Phoenix` owns the store, the LLM provider and every live conversation of a
process (one per kernel in a notebook). It creates conversations with a fixed
working directory (REQ-BED-010), model and mode; finds them by id or slug;
restores them after a restart (REQ-BED-007: back to Idle, full history,
orphan tool_uses answered, a pending upgrade request answered as not
approved); and starts a new conversation from an exhausted one, seeded with
its summary and linked to it (REQ-BED-021).

A `Conversation` is the handle users and the notebook layer hold:

    phoenix = Phoenix()
    conv = phoenix.open("fix-tests", cwd="~/project")
    async for update in conv.send("Why does test_x fail?"):
        ...
    conv.approve()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phoenix_nb.checkpoints.recorder import Checkpoints
from phoenix_nb.commands import BackgroundJobs
from phoenix_nb.core import events as ev
from phoenix_nb.core.cycles import RecordHeader
from phoenix_nb.core.models import ModelInfo, supports
from phoenix_nb.core.prices import ModelTables
from phoenix_nb.core.states import (
    AwaitingModeApproval,
    ContextExhausted,
    ConvContext,
    ConvState,
    TurnBudget,
    from_persisted,
    persisted_fields,
)
from phoenix_nb.core.stored import StoredMessage
from phoenix_nb.core.tool_fields import ToolTraits
from phoenix_nb.core.transition import (
    RESTRICTED_UNAVAILABLE_MESSAGE,
    Rejection,
    initial_state,
    stopped_jobs_text,
)
from phoenix_nb.core.values import ImageData, Mode, SubAgentOutcome, Usage
from phoenix_nb.errors import PhoenixError, Rejected, UnknownConversation
from phoenix_nb.llm.model_limits import LimitsSource, ModelLimits
from phoenix_nb.runtime import child_spend, long_lived
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.claim import (
    Repaired,
    claim,
    discard_marker,
    left_working,
    release,
    repair,
)
from phoenix_nb.runtime.conversation import (
    ConversationRuntime,
    Services,
    is_paused,
    is_rest,
)
from phoenix_nb.runtime.gateway_link import GatewayLink
from phoenix_nb.runtime.pending import (
    CellEdits,
    ModeApprovals,
    PendingRequests,
    WaitingApproval,
)
from phoenix_nb.runtime.ports import LlmProvider
from phoenix_nb.runtime.settings import DEMO_MODEL, PROVIDERS, Server, Settings
from phoenix_nb.runtime.snapshot import RecordSnapshot, StoredRecord
from phoenix_nb.runtime.subagents import SubAgentSpawner
from phoenix_nb.sandbox import SandboxPolicy, detect_sandbox
from phoenix_nb.store import Store, store_problem
from phoenix_nb.tools.kernel import outcome_note
from phoenix_nb.tools.kernel_port import KernelPort

if TYPE_CHECKING:
    from phoenix_nb.mcp import McpHub
    from phoenix_nb.mcp import Server as McpServer
    from phoenix_nb.tools.base import Tool

__all__ = [
    "Conversation",
    "Phoenix",
    "PhoenixError",  # re-exported: callers of the manager catch it
    "UnknownConversation",
    "check_unchanged",
]

log = logging.getLogger(__name__)


def _sandbox_policy(s: Settings, store_root: Path) -> SandboxPolicy:
    """The sandbox policy of a Phoenix: its limits and deny list; its store always hidden."""
    return SandboxPolicy.build(s.sandbox, s.deny_read, (store_root,))


def _context_for(
    record: Mapping[str, Any],
    sandbox_available: bool,
    info: ModelInfo | None = None,
    tables: ModelTables | None = None,
) -> ConvContext:
    return ConvContext(
        tables=tables or ModelTables(),
        conversation_id=record["id"],
        cwd=record["cwd"],
        model=record["model"],
        is_sub_agent=not record.get("user_initiated", True),
        sandbox_available=sandbox_available,
        model_info=info,
    )


class Conversation:
    """A handle on one conversation; all methods are safe to call from the kernel's loop."""

    def __init__(self, phoenix: Phoenix, runtime: ConversationRuntime) -> None:
        self._phoenix = phoenix
        self.runtime = runtime

    # -- what it is -----------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.runtime.id

    @property
    def slug(self) -> str:
        return self.runtime.slug

    def audit(self, event: str, **fields: Any) -> None:
        """Report a decision on this conversation to the hub gateway's audit trail (if any)."""
        self._phoenix.audit(event, self.slug, **fields)

    @property
    def state(self) -> ConvState:
        return self.runtime.state

    @property
    def mode(self) -> Mode:
        return self.runtime.state.mode

    @property
    def cwd(self) -> str:
        return self.runtime.context.cwd

    @property
    def model(self) -> str:
        return self.runtime.context.model

    @property
    def record(self) -> dict[str, Any]:
        return dict(self.runtime.record)

    def history(self) -> list[dict[str, Any]]:
        """Every stored message as its row (docs/stored-messages.md): O(messages), for
        whole-history work and for callers outside the package."""
        return [message.row() for message in self.runtime.history]

    def history_since(self, start: int) -> list[StoredMessage]:
        """The stored messages from position `start` on (what one turn added)."""
        return self.runtime.history[max(0, start) :]

    def message_count(self) -> int:
        return len(self.runtime.history)

    def cycle_count(self) -> int:
        """Cycles of the record so far (a turn's record starts after them)."""
        return self.runtime.projection().cycle_count

    async def prepare(self) -> None:
        """Build the history's caches off the event loop if this conversation was just
        loaded, so that `payload` and the next request cost only what is new."""
        await self.runtime.warm()

    def payload(self, since_cycle: int = 0) -> dict[str, Any]:
        """The conversation record (docs/record-format.md) as it stands now; with
        `since_cycle`, only the cycles from that one on (a cell shows its own turn).

        Incremental: what the record costs depends on the cycles returned, not on
        the history's length (the whole record copies every cycle)."""
        runtime = self.runtime
        projection = runtime.projection()
        header = self._header(projection.child_ids)
        return projection.record(runtime.state, header, since_cycle=since_cycle)

    def record_snapshot(self) -> RecordSnapshot:
        """The whole record as it stands now, to be built off the event loop (in a child
        process or a worker thread: `RecordSnapshot`). Call it after `prepare`: the
        child ids come from the live projection."""
        runtime = self.runtime
        return RecordSnapshot(
            history=list(runtime.history),
            model=runtime.context.model,
            state=runtime.state,
            header=self._header(runtime.projection().child_ids),
        )

    def _header(self, child_ids: Sequence[str]) -> RecordHeader:
        runtime = self.runtime
        server = self._phoenix.server_of(runtime.record)
        return self._phoenix.record_header(
            runtime.slug, runtime.context, child_ids, server, tools=runtime.traits
        )

    def spending(self) -> dict[str, Any]:
        """The record's `usage` (this turn's and the conversation's spend), kept
        incrementally: no cycle is copied."""
        runtime = self.runtime
        projection = runtime.projection()
        return projection.spending(self._phoenix.sub_agent_usage(projection.child_ids))

    def usage(self) -> dict[str, Any]:
        return self.runtime.usage_summary()

    def context_usage(self) -> up.ContextUsage:
        """`usage()` typed, as the USAGE update carries it."""
        return self.runtime.context_usage()

    def __repr__(self) -> str:
        return f"<Conversation {self.slug} {self.state.name} {self.mode.value}>"

    # -- talking ------------------------------------------------------------------------
    def subscribe(self) -> up.Subscription:
        return self.runtime.hub.subscribe()

    async def post_message(self, text: str, images: Sequence[ImageData] = ()) -> None:
        """Send a user message; raises PhoenixError when the core rejects it (busy …).

        What the user did with the agent's proposed cell edits since it last heard
        goes first, as a system note (`tools.kernel.outcome_note`)."""
        await self._phoenix.refresh_limits(self.runtime)
        await self.runtime.warm()  # a long history loaded from the store: off the loop
        self._report_cell_edits()
        await self._submit(ev.UserMessage(self.seeded_message(text), tuple(images)))

    def _report_cell_edits(self) -> None:
        kernel = self._phoenix.kernel
        if kernel is None or not is_rest(self.runtime.state):
            return
        note = outcome_note(kernel, self.id)
        if note:
            self.runtime.annotate(note)

    async def send(self, text: str, images: Sequence[ImageData] = ()) -> AsyncIterator[up.Update]:
        """Send a message and iterate the updates until the agent rests or asks for approval."""
        sub = self.subscribe()
        try:
            await self.post_message(text, images)
        except BaseException:
            sub.close()
            raise
        return _until_settled(self.runtime, sub)

    async def run(self, text: str, images: Sequence[ImageData] = ()) -> ConvState:
        """Send a message and wait until the agent rests or asks for approval."""
        await self.post_message(text, images)
        return await self.runtime.wait_settled()

    async def wait(self) -> ConvState:
        return await self.runtime.wait_settled()

    async def _submit(self, event: Any, *, urgent: bool = False) -> Any:
        try:
            return await self.runtime.submit(event, urgent=urgent)
        except Rejected as exc:
            raise PhoenixError(str(exc)) from None

    # -- controls (REQ-BED-005, 015, 016, 023) ---------------------------------------------
    async def cancel(self) -> None:
        """Cancel whatever the agent does; jumps the queue (REQ-BED-005).

        Returns once the cancelled request or tool has really stopped, so no
        process of the turn outlives the call.
        """
        await self._submit(ev.UserCancel(), urgent=True)
        await self.runtime.aborted_work_stopped()

    async def annotate(self, text: str) -> None:
        """Add a system note the agent and the record will see (while the agent waits)."""
        try:
            self.runtime.annotate(text)
        except Rejected as exc:
            raise PhoenixError(str(exc)) from None

    async def approve(self) -> None:
        """Grant the agent's request for write access, unless the admin's policy
        forbids Unrestricted mode (PolicyRefusal; the request stays to be denied)."""
        policy = self._phoenix.settings.policy
        if policy is not None:
            try:
                policy.check_mode(Mode.UNRESTRICTED.value)
            except PhoenixError as exc:
                self._phoenix.audit("policy_refusal", self.slug, reason=str(exc))
                raise
        await self._submit(ev.UserApproveUpgrade())
        self._phoenix.audit("approval", self.slug, mode=Mode.UNRESTRICTED.value)

    async def deny(self) -> None:
        await self._submit(ev.UserDenyUpgrade())
        self._phoenix.audit("denial", self.slug)

    async def restrict(self) -> list[str]:
        """Back to Restricted at once, without asking the agent (REQ-BED-016).

        "At once" includes what already runs with write access in the background:
        those jobs are stopped before the mode changes, and the note that tells
        the agent and the record about the change names them. A job started by a
        tool call already under way when the mode changed is stopped right after.
        Returns the commands of the jobs it stopped.
        """
        if not self._phoenix.sandbox.available:
            raise PhoenixError(RESTRICTED_UNAVAILABLE_MESSAGE)
        jobs = self._phoenix.jobs
        stopped = await jobs.stop_unrestricted(self.id)
        await self._submit(ev.UserRequestDowngrade(stopped_jobs=tuple(stopped)))
        self._phoenix.audit("mode_change", self.slug, mode=Mode.RESTRICTED.value)
        late = await jobs.stop_unrestricted(self.id)
        await self._phoenix.park_granted_mcp()
        if late:
            try:
                self.runtime.annotate(stopped_jobs_text(late))
            except Rejected:
                log.warning("stopped background jobs after restrict, unannounced: %s", late)
        return stopped + late

    async def trigger_continuation(self) -> None:
        """Ask for a continuation summary now (REQ-BED-023), ending this conversation."""
        await self._submit(ev.UserTriggerContinuation())

    async def continue_in_new(self, *, slug: str | None = None) -> Conversation:
        """A new conversation seeded with this one's summary and linked to it (REQ-BED-021),
        on the server new conversations start on (the summary is asked of this one's, or
        of the current one, with its model, when this one's can no longer be used here).

        The summary stays in this conversation's state; the new one's first message
        reads it from there (`seeded_message`), so the link survives restarts.
        """
        phoenix = self._phoenix
        if not isinstance(self.state.phase, ContextExhausted):
            summariser = phoenix.summariser(self.runtime.record)
            if summariser is not None:
                self.runtime.reconfigure(replace(self.runtime.services, provider=summariser))
            await self.trigger_continuation()
            state = await self.wait()
            if not isinstance(state.phase, ContextExhausted):
                raise PhoenixError(f"could not summarise {self.slug}: it is {state.name}")
        # The new conversation starts on the current server; this one's model goes with
        # it only when that is still this one's server (another server has other names).
        same = phoenix.server_of(self.runtime.record) == phoenix.settings.server
        return phoenix.create(
            slug=slug,
            cwd=self.cwd,
            model=self.model if same else None,
            mode=None,
            seed_from=self.id,
        )

    def seeded_message(self, text: str) -> str:
        """The first message of a seeded conversation carries its source's summary."""
        source_id = self.runtime.record.get("seeded_from")
        if not source_id or self.runtime.history:
            return text
        source = self._phoenix.store.get_conversation(source_id)
        phase = from_persisted(source).phase if source else None
        if source is None or not isinstance(phase, ContextExhausted):
            return text
        return (
            f"This conversation continues {source['slug']}, summarised so the work can go on "
            f"in a fresh context. Its summary:\n\n{phase.summary}\n\n---\n\n{text}"
        )


async def _until_settled(
    runtime: ConversationRuntime, sub: up.Subscription
) -> AsyncIterator[up.Update]:
    try:
        if is_rest(runtime.state) or is_paused(runtime.state):
            # Settled before we started iterating (e.g. rejected or instant).
            for update in sub.pending():
                yield update
            return
        async for update in sub:
            yield update
            if update.kind in (up.REST, up.APPROVAL) and (
                is_rest(runtime.state) or is_paused(runtime.state)
            ):
                for rest in sub.pending():
                    yield rest
                return
    finally:
        sub.close()


class Phoenix:
    """Every conversation of this process, with the services they share."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        provider: LlmProvider | None = None,
        kernel: KernelPort | None = None,
    ) -> None:
        self.settings = settings or Settings()
        # c.Phoenix.models, checked once: given to this Phoenix's readers (limits,
        # providers, every conversation's context), never installed process-wide.
        self.tables = self.settings.model_tables()
        self.kernel = kernel  # the Jupyter kernel this runs in (the notebook layer's adapter)
        # The store is opened on first use: start-up touches it only when a
        # conversation was left mid-work, so it costs the same for 10 or 10,000.
        self._store = store
        self.store_root = store.root if store is not None else self.settings.store_root()
        # Each server's own figures (one file, keyed by server), by `Server.key`.
        self._limits: dict[str, ModelLimits] = {}
        # Finished sub-agents' spend, by conversation id: (usages, their own children).
        self._child_spend: dict[str, child_spend.ChildSpend] = {}
        self._sub_usage: dict[tuple[str, ...], tuple[tuple[str, Usage], ...]] = {}
        self.sandbox = detect_sandbox()  # the host's, probed once per process
        self.sandbox_policy = _sandbox_policy(self.settings, self.store_root)
        self.jobs = BackgroundJobs()  # its conversations' detached commands
        self._mcp: McpHub | None = None  # its MCP servers, made at first use (`mcp`)
        self._mcp_told: dict[str, set[str]] = {}  # conversation id -> servers announced
        self._providers: dict[str, LlmProvider] = {}
        self._retired: list[LlmProvider] = []  # replaced by `reconfigure`, closed by `aclose`
        self._provider = provider
        self._runtimes: dict[str, ConversationRuntime] = {}
        self.spawner = SubAgentSpawner(self, self.settings.sub_agents, self.sandbox.available)
        self.worktree = self._checkpoints()
        self._reports: set[asyncio.Task[bool]] = set()  # audit events on their way
        # Whatever waits for a person, answerable by id from any front end (pending.py);
        # made before restoring, as a restored runtime's state changes tell it.
        # `front_end_detail` is what the layer showing a conversation's turn says a front
        # end needs to find its request (slug -> its cell's id, its outputs' display ids;
        # notebook/cell.py).
        self.front_end_detail: dict[str, dict[str, str]] = {}
        self.pending = PendingRequests(
            [ModeApprovals(self._waiting_approvals, lambda s: self.front_end_detail.get(s, {}))]
        )
        if kernel is not None:  # the agent's proposed cell edits, decided on their cells
            book = kernel.cell_edits()
            self.pending.add_source(CellEdits(book, self._slug_of))
            book.on_change(self.pending.changed)
        self.restored = self._restore_all()

    @property
    def gateway(self) -> GatewayLink | None:
        """The JupyterHub gateway the admin's policy names, reached with the Hub token."""
        policy = self.settings.policy
        if policy is None or policy.gateway_url is None:
            return None
        return GatewayLink(policy.gateway_url, self.settings.api_key)

    def audit(self, event: str, conversation: str, **fields: Any) -> None:
        """Report what the user decided to the gateway's audit trail, in the background
        (nothing without a gateway; a gateway that does not answer loses the event)."""
        link = self.gateway
        if link is None:
            return
        report = link.report({"event": event, "conversation": conversation, **fields})
        try:
            task = asyncio.get_running_loop().create_task(report)
        except RuntimeError:
            report.close()
            link.report_now({"event": event, "conversation": conversation, **fields})
            return
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)

    @property
    def mcp(self) -> McpHub:
        """The MCP servers of this Phoenix (phoenix_nb.mcp), made at first use: the
        package (not the SDK, which only its worker thread imports) loads then."""
        if self._mcp is None:
            from phoenix_nb.mcp import Approvals, McpBounds, McpConfigError, McpHub, parse_servers
            from phoenix_nb.runtime.mcp_requests import McpRequests

            problem = ""
            try:
                configured = parse_servers(self.settings.mcp_servers)
            except McpConfigError as exc:
                configured, problem = (), str(exc)
            self._mcp = McpHub(
                Approvals(Path(self.store_root)),
                self.sandbox,
                self.sandbox_policy,
                configured,
                bounds=McpBounds.from_policy(self.settings.policy),
                on_pending=self.pending.changed,
                on_decision=self._mcp_decided,
            )
            if problem:
                self._mcp.config_problem = problem
            # Servers awaiting approval join what waits for a person (the panel,
            # `%phoenix approve ID`), answered like `%phoenix mcp approve NAME`.
            self.pending.add_source(McpRequests(self._mcp))
        return self._mcp

    def _mcp_decided(self, server: McpServer, answer: str) -> None:
        """A person approved or denied an MCP server: the gateway's audit trail hears
        what was decided and what it runs (a process-wide decision: no conversation)."""
        cfg = server.config
        self.audit(
            "mcp_approval",
            "",
            decision="approved" if answer == "approve" else "denied",
            mcp_server=cfg.name,
            source=cfg.source,
            project_file=f"{cfg.project_dir}/.mcp.json" if cfg.project_dir else "",
            runs=cfg.describe(),
            digest=cfg.digest(),
        )

    def mcp_servers_missing(self, conv: Conversation) -> list[str]:
        """Ready MCP servers whose tools ``conv`` does not have (it started before they
        were ready), each named once per conversation: announced, then left alone."""
        if self._mcp is None:
            return []
        from phoenix_nb.mcp import mcp_tools

        have = {tool.name for tool in conv.runtime.tools}
        call = next((t for t in conv.runtime.tools if t.name == "mcp_call"), None)
        listed = call.description if call is not None else ""
        told = self._mcp_told.setdefault(conv.id, set())
        new = []
        for server in self._mcp.ready_servers():
            names = [t.name for t in mcp_tools(self._mcp, [server], len(server.tools))]
            present = any(n in have or f"- {n}:" in listed for n in names)
            if names and not present and server.name not in told:
                new.append(server.name)
        told.update(new)
        return sorted(new)

    async def park_granted_mcp(self) -> list[str]:
        """Stop every running granted MCP server (network or write) when a conversation
        is restricted: "at once" includes what runs with a grant in the background (as
        for background jobs). Its tools answer only in Unrestricted mode, so a parked
        server keeps them in every tool list and starts again at its next call, which
        only an Unrestricted conversation makes (another one pays a restart). Returns
        the names stopped."""
        if self._mcp is None:
            return []
        hub = self._mcp
        why = "stopped at `%phoenix restrict` (its grants idle); it starts at its next use"
        loop = asyncio.get_running_loop()
        parked = []
        for server in hub.ready_servers():
            if server.config.granted and await loop.run_in_executor(None, hub.park, server, why):
                parked.append(server.name)
        return parked

    def mcp_counts(self) -> dict[str, int] | None:
        """MCP servers by state; None when no MCP server was ever looked at here."""
        return None if self._mcp is None else self._mcp.counts()

    def mcp_tools(self) -> tuple[Tool, ...]:
        """The tools of the MCP servers ready now: a conversation takes them at its start
        and keeps them (REQ-BED-017: the tool list never changes within a conversation)."""
        if self._mcp is None:
            return ()
        from phoenix_nb.mcp import mcp_tools

        return mcp_tools(self._mcp, self._mcp.ready_servers(), self.settings.mcp_defer_above)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.store_root)
        return self._store

    # -- services ---------------------------------------------------------------------
    def server_of(self, record: Mapping[str, Any]) -> Server:
        """The server a stored conversation was started on (the current setting's for
        one stored before conversations kept theirs)."""
        return Server.of_record(record, self.settings.server)

    def limits_for(self, server: Server) -> ModelLimits:
        """The model limits where `server` serves (DESIGN decision 22): its own API's
        figures, cached under its name, and for a model nobody describes the stated
        default of that server (not of the current setting): two conversations on
        different servers with the same model name each see their own."""
        limits = self._limits.get(server.key)
        if limits is None:
            limits = self._limits[server.key] = ModelLimits(
                self.store_root,
                None,
                conservative=server.off_anthropic,
                scope=server.limits_scope,
                specs=self.tables.specs,
            )
        return limits

    @property
    def limits(self) -> ModelLimits:
        """The model limits of the server new conversations start on."""
        return self.limits_for(self.settings.server)

    def provider_for(self, model: str, server: Server | None = None) -> LlmProvider:
        """The provider for `model` on `server` (None: the server new conversations
        start on); one per server, built on first use."""
        if self._provider is not None:
            return self._provider
        server = server or self.settings.server
        if model == DEMO_MODEL and not server.base_url:
            return self._demo_provider()
        if server.key not in self._providers:
            if server == self.settings.server:
                self._providers[server.key] = self._make_provider(self.settings, self.tables)
            else:
                self._providers[server.key] = self._own_server_provider(server)
        return self._providers[server.key]

    def _own_server_provider(self, server: Server) -> LlmProvider:
        """The provider of a conversation that stays on a server the settings no longer
        name: built on first use like the others, after the checks the settings had
        when it was chosen (its kind is one this version speaks, the admin's policy
        allows it), and any reason it cannot be used is one line naming the
        conversation's server and how to go on (`%phoenix continue`)."""
        from phoenix_nb.llm.lazy import LazyProvider
        from phoenix_nb.llm.providers import ProviderUnavailable, make_provider

        settings, tables = self.settings, self.tables
        policy = settings.policy

        def build() -> Any:
            if server.provider not in PROVIDERS:
                raise ProviderUnavailable(
                    f"this version of phoenix_nb does not speak {server.provider!r} "
                    f"(only {', '.join(PROVIDERS)})"
                )
            if policy is not None:
                try:
                    policy.check_provider(server.provider, server.base_url)
                except PhoenixError as exc:
                    raise ProviderUnavailable(str(exc)) from None
            s = replace(settings, provider=server.provider, base_url=server.base_url)
            return make_provider(
                s.provider,
                api_key=s.api_key,
                base_url=s.base_url,
                stall_timeout=s.stall_timeout,
                cache_ttl=s.cache_ttl,
                specs=tables.specs,
            )

        def explain(reason: str) -> str:
            why = " ".join(reason.split()).rstrip(".")
            return (
                f"This conversation is on {server.describe()}, which cannot be used here "
                f"now: {why}. New conversations start on {self.settings.server.describe()}: "
                "`%phoenix continue` carries this one on there, summarised"
            )

        return LazyProvider(build, name=server.provider, explain=explain)

    def unusable(self, server: Server) -> str | None:
        """Why `server` was last found unusable here (its provider could not be built,
        or it refused the credentials); None when nothing said so yet. Builds nothing."""
        from phoenix_nb.llm.lazy import LazyProvider

        provider = self._providers.get(server.key)
        return provider.unusable if isinstance(provider, LazyProvider) else None

    def summariser(self, record: Mapping[str, Any]) -> LlmProvider | None:
        """Who summarises a stored conversation that moves to the current server (None:
        its own provider, as for any request). Its own server, which has seen the
        history, unless that server cannot be used here: known already (its last
        request said so) or found by this very request (it cannot be built, or it
        refuses the credentials); then the current server, with the current model."""
        from phoenix_nb.llm.lazy import LazyProvider, Rerouted, UnlessUnusable

        server = self.server_of(record)
        if server == self.settings.server or self._provider is not None:
            return None
        own = self.provider_for(str(record.get("model", "")), server)
        if not isinstance(own, LazyProvider):
            return None
        model = self.settings.model
        current = Rerouted(self.provider_for(model), model)
        return current if own.unusable is not None else UnlessUnusable(own, current)

    @staticmethod
    def _make_provider(s: Settings, tables: ModelTables) -> LlmProvider:
        """The provider the settings name, without importing its SDK here.

        Conversations are made (or looked up) also by commands that never call the
        model (`%phoenix status`, `list`, `history`), and on the event loop: an
        AnthropicProvider builds its client on a worker thread at its first request;
        the other providers' SDKs are imported as they are built, so they are built
        by a LazyProvider on a worker thread at their first request (a missing extra
        is then that request's error, shown in the turn's record)."""
        from functools import partial

        from phoenix_nb.llm.providers import make_provider

        build = partial(
            make_provider,
            s.provider,
            api_key=s.api_key,
            base_url=s.base_url,
            stall_timeout=s.stall_timeout,
            cache_ttl=s.cache_ttl,
            specs=tables.specs,
        )
        if s.provider == "anthropic":
            provider: LlmProvider = build()
            return provider
        from phoenix_nb.llm.lazy import LazyProvider

        return LazyProvider(build, name=s.provider)

    def lacks(self, model: str, server: Server | None = None) -> tuple[str, ...]:
        """The optional features `model` is known to lack where it is served (`server`,
        None: the current setting's): described so in c.Phoenix.models, refused by its
        server, or absent from its wire format.

        Asks only a provider already built: a record or `%phoenix status` must not load
        an SDK (or fail on a missing extra) just to say this."""
        s = server or self.settings.server
        built = self._provider or self._providers.get(s.key)
        built = getattr(built, "built", built)  # a LazyProvider's real one, once made
        lacks = getattr(built, "lacks", None)
        if callable(lacks):
            return tuple(lacks(model))
        said = supports(model, self.tables.specs).lacks()
        return ("thinking", *said) if s.provider == "openai" and "thinking" not in said else said

    def record_header(
        self,
        slug: str,
        context: ConvContext,
        child_ids: Sequence[str],
        server: Server | None = None,
        tools: ToolTraits | None = None,
    ) -> RecordHeader:
        """The facts a conversation's record states that its history does not carry;
        `server` is the conversation's own (None: the current setting's), `tools` what
        its tools declare (None: what a conversation started now would have)."""
        server = server or self.settings.server
        return RecordHeader(
            conversation_id=context.conversation_id,
            slug=slug,
            model=context.model,
            cwd=context.cwd,
            sandbox_available=self.sandbox.available,
            context_window=context.window,
            sub_agent_usage=self.sub_agent_usage(tuple(child_ids)),
            provider=server.provider,
            lacks=self.lacks(context.model, server),
            prices=dict(self.tables.prices),
            tools=tools if tools is not None else self.tool_traits(),
        )

    def tool_traits(self) -> ToolTraits:
        """What the tools a conversation started now would declare for its record (a
        parent's and a sub-agent's, and the ready MCP servers'): the table a record of
        a conversation not open here is projected with."""
        from phoenix_nb.tools import registry

        tools = {
            t.name: t
            for t in (
                *registry.tools_for(is_sub_agent=True),
                *registry.tools_for(is_sub_agent=False),
                *self.mcp_tools(),
            )
        }
        return registry.tool_traits(tools.values())

    def sub_agent_usage(self, child_ids: Sequence[str]) -> tuple[tuple[str, Usage], ...]:
        """(created_at, usage) of every response of the finished sub-agents named
        (a history's spawn_agents results), nested ones included; read once per child,
        as a finished child's history no longer changes. The same ids give the same
        tuple object, so a record's spend sums it only when it changes."""
        key = tuple(child_ids)
        if not key:
            return ()
        known = self._sub_usage.get(key)
        if known is not None:
            return known
        found = self._sub_usage[key] = child_spend.sub_agent_usage(
            self.store, key, self._child_spend
        )
        while len(self._sub_usage) > 64:  # one entry per conversation shown lately
            del self._sub_usage[next(iter(self._sub_usage))]
        return found

    async def refresh_limits(self, runtime: ConversationRuntime) -> None:
        """The model's real limits from the Models API (asked at most once a week per
        store, cached in it); a conversation at rest takes them for its next request."""
        model, server = runtime.context.model, self.server_of(runtime.record)
        provider = self.provider_for(model, server)
        source = provider if isinstance(provider, LimitsSource) else None
        info = await self.limits_for(server).resolve(model, source)
        if info != runtime.context.model_info and not runtime.state.busy:
            runtime.context = replace(runtime.context, model_info=info)

    def _demo_provider(self) -> LlmProvider:
        """The offline demo model, started on first use (it serves on loopback)."""
        if DEMO_MODEL not in self._providers:
            from phoenix_nb.demo import DemoProvider

            self._providers[DEMO_MODEL] = DemoProvider()
        return self._providers[DEMO_MODEL]

    def _checkpoints(self) -> Checkpoints:
        """Working-tree checkpoints of every conversation, in the store's folder."""
        # The store's own files are never checkpointed (nor reverted), even under a cwd.
        root = Path(self.store_root)
        return Checkpoints(root / "checkpoints", self.settings.checkpoints, exclude=(root,))

    def reconfigure(self, settings: Settings) -> None:
        """New settings (`%config Phoenix.…` after `%load_ext`), in effect from the next
        request or tool call of every conversation.

        `Settings.from_config` built them; this hands them to what reads them: the
        sandbox policy, sub-agent limits, checkpoints, the API clients (rebuilt on next
        use when their options changed) and each conversation's services. The store
        folder is fixed for a Phoenix (`store_root`): a new `home` needs a new Phoenix.
        """
        self.tables = settings.model_tables()
        for limits in self._limits.values():
            limits.specs = self.tables.specs
        old, self.settings = self.settings, settings
        self.sandbox_policy = _sandbox_policy(settings, self.store_root)
        self.spawner.set_limits(settings.sub_agents)
        self.worktree.reconfigure(settings.checkpoints)
        if self._mcp is not None:
            from phoenix_nb.mcp import McpConfigError, parse_servers

            try:
                configured = parse_servers(settings.mcp_servers)
                self._mcp.config_problem = ""
            except McpConfigError as exc:
                configured, self._mcp.config_problem = (), str(exc)
            self._mcp.reconfigure(configured, self.sandbox_policy)
        client = ("api_key", "provider", "base_url", "stall_timeout", "cache_ttl", "models")
        if any(getattr(old, f) != getattr(settings, f) for f in client):
            keep = {k: p for k, p in self._providers.items() if k == DEMO_MODEL}
            self._retired += [p for k, p in self._providers.items() if k not in keep]
            self._providers = keep
        for runtime in self._runtimes.values():
            if not runtime.closed:
                model = runtime.context.model
                runtime.reconfigure(self._services(model, self.server_of(runtime.record)))

    def _services(self, model: str, server: Server) -> Services:
        from phoenix_nb.tools import registry  # the tools load with the first conversation

        s = self.settings
        return Services(
            store=self.store,
            provider=self.provider_for(model, server),
            sandbox=self.sandbox,
            tools_for=lambda is_sub_agent: (
                *registry.tools_for(is_sub_agent=is_sub_agent),
                *self.mcp_tools(),
            ),
            run_tool=registry.run_tool,
            api_tool_specs=registry.api_tool_specs,
            tool_traits=registry.tool_traits,
            retry_delay_scale=s.retry_delay_scale,
            helper_model=s.helper_model if model != DEMO_MODEL else None,
            secret_patterns=s.secret_patterns,
            env_allow=s.env_allow,
            kernel=self.kernel,
            kernel_access=lambda: self.settings.kernel_access != "off",
            thinking=s.thinking,
            spawner=self.spawner,
            worktree=self.worktree,
            budget=TurnBudget(
                max_rounds=s.max_turn_rounds or None,
                max_turn_cost=s.max_turn_cost,
                max_conversation_cost=s.max_conversation_cost,
            ),
            sub_agent_usage=self.sub_agent_usage,
            live_credentials=self.live_credentials,
            sandbox_policy=self.sandbox_policy,
            jobs=self.jobs,
            tables=self.tables,
            request_headers=s.request_headers,
        )

    # -- restore (REQ-BED-007) ------------------------------------------------------------
    def _restore_all(self) -> list[str]:
        """Bring every conversation left mid-work back to rest; returns their slugs.

        Only conversations whose work marker is still there are looked at
        (claim.py), so start-up does not grow with the store. One another live
        kernel holds the lease of is left alone: it is not left mid-work, it is
        working there.
        """
        restored: list[str] = []
        root = self.store_root
        for conversation_id in left_working(root):
            record = self.store.get_conversation(conversation_id)
            if record is None:  # a marker outliving its store entry: nothing to restore
                discard_marker(root, conversation_id)
                continue
            try:
                claimed = claim(
                    self.store,
                    conversation_id,
                    is_sub_agent=not record.get("user_initiated", True),
                    starting_up=True,
                )
            except PhoenixError as exc:  # damaged, or a store that cannot be written:
                log.info("phoenix: %s left mid-work, not restored: %s", record["slug"], exc)
                continue  # the others start; this one says why when it is used
            if claimed is None:
                continue
            try:
                if claimed.restored:
                    restored.append(record["slug"])
            finally:
                release(root, conversation_id, claimed.lease)
        if restored:
            log.info("phoenix: restored %d conversation(s) to rest", len(restored))
        return restored

    def _slug_of(self, conversation_id: str) -> str:
        """A conversation's slug by its id (a pending cell edit names its conversation's id)."""
        runtime = self._runtimes.get(conversation_id)
        if runtime is not None:
            return runtime.slug
        record = self.store.get_conversation(conversation_id)
        return str(record["slug"]) if record is not None else conversation_id

    def _approval_changes(self, runtime: ConversationRuntime) -> Callable[[up.Update], None]:
        """The one place a conversation starts or stops waiting for an upgrade answer (its
        state changes): the process's pending requests tell their watchers (a panel's list)."""
        waiting = [is_paused(runtime.state)]

        def on_update(update: up.Update) -> None:
            if isinstance(update.data, up.StateChanged) and is_paused(runtime.state) != waiting[0]:
                waiting[0] = not waiting[0]
                self.pending.changed()

        return on_update

    def _waiting_approvals(self) -> list[WaitingApproval]:
        """The open user conversations that wait for an upgrade answer (sub-agents ask
        through their parent, never the user)."""
        out: list[WaitingApproval] = []
        for runtime in list(self._runtimes.values()):
            phase = runtime.state.phase
            if (
                not runtime.closed
                and runtime.on_parent is None
                and isinstance(phase, AwaitingModeApproval)
            ):
                out.append(WaitingApproval(Conversation(self, runtime), phase))
        return out

    # -- finding and creating -------------------------------------------------------------------
    def _runtime_for(
        self,
        record: Mapping[str, Any],
        on_parent: Callable[[SubAgentOutcome], None] | None = None,
        history: list[StoredMessage] | None = None,
    ) -> ConversationRuntime:
        runtime = self._runtimes.get(record["id"])
        if runtime is not None and not runtime.closed:
            return runtime
        runtime = ConversationRuntime(
            record=record,
            context=_context_for(
                record,
                self.sandbox.available,
                self.limits_for(self.server_of(record)).cached(record["model"]),
                self.tables,
            ),
            state=from_persisted(record),
            history=history if history is not None else self.store.stored_messages(record["id"]),
            services=self._services(record["model"], self.server_of(record)),
            on_parent=on_parent,
        )
        self._runtimes[record["id"]] = runtime
        if on_parent is None:  # sub-agents ask their parent, never the user
            runtime.hub.add_callback(self._approval_changes(runtime))
        return runtime

    async def load(self, id_or_slug: str) -> None:
        """Read a stored conversation's history in a worker thread and open its runtime,
        so the first use of a long conversation (after a restart) does not stall the
        event loop reading thousands of messages; nothing happens for an unknown name
        or a runtime already open."""
        record = self.store.get_conversation(id_or_slug)
        if record is None:
            return
        known = self._runtimes.get(record["id"])
        if known is not None and not known.closed:
            return
        with long_lived.reading():  # thousands of messages: no full collection meanwhile
            history = await asyncio.to_thread(self.store.stored_messages, record["id"])
        record = self.store.get_conversation(record["id"]) or record  # fresh after the wait
        self._runtime_for(record, history=history)  # no-op if opened meanwhile

    def stored_record(self, id_or_slug: str) -> StoredRecord:
        """A conversation's whole record, to be built from the store elsewhere (in a
        child process: `StoredRecord`). One this process has open is shown as it holds
        it now; one it has not opened (a long conversation after a restart) is not read
        here at all: reading thousands of messages into the kernel would stall its loop."""
        record = self.store.get_conversation(id_or_slug)
        if record is None:
            raise UnknownConversation(
                f"No conversation named {id_or_slug!r}. `%phoenix list` shows the existing ones."
            )
        runtime = self._runtimes.get(record["id"])
        count: int | None = None
        if runtime is not None and not runtime.closed:
            record, state, context = runtime.record, runtime.state, runtime.context
            count = len(runtime.history)
        else:
            state = from_persisted(record)
            info = self.limits_for(self.server_of(record)).cached(record["model"])
            context = _context_for(record, self.sandbox.available, info, self.tables)
        slug = str(record.get("slug") or record["id"])
        return StoredRecord(
            store_root=str(self.store.root),
            conversation_id=context.conversation_id,
            count=count,
            model=context.model,
            state=state,
            header=self.record_header(slug, context, (), self.server_of(record)),
        )

    def open_child(
        self, record: Mapping[str, Any], on_parent: Callable[[SubAgentOutcome], None]
    ) -> ConversationRuntime:
        """A sub-agent's runtime (the sub-agent executor's `ChildHost` port)."""
        return self._runtime_for(record, on_parent)

    def get(self, id_or_slug: str) -> Conversation:
        record = self.store.get_conversation(id_or_slug)
        if record is None:
            raise UnknownConversation(
                f"No conversation named {id_or_slug!r}. `%phoenix list` shows the existing ones."
            )
        return Conversation(self, self._runtime_for(record))

    def create(
        self,
        *,
        slug: str | None = None,
        cwd: str | Path | None = None,
        model: str | None = None,
        mode: Mode | str | None = None,
        seed_from: str | None = None,
    ) -> Conversation:
        model = model or self.settings.model
        policy = self.settings.policy
        if policy is not None:  # `--model`, `--mode` inside the admin's bounds
            try:
                policy.check_model(model)
                if mode is not None:
                    policy.check_mode(Mode(mode).value)
            except PhoenixError as exc:
                self.audit("policy_refusal", slug or "", reason=str(exc))
                raise
        directory = Path(cwd).expanduser() if cwd is not None else Path.cwd()
        if not directory.is_dir():
            raise PhoenixError(f"Working directory {str(directory)!r} does not exist.")
        requested = Mode(mode) if mode is not None else None
        probe = ConvContext("new", str(directory.resolve()), model, False, self.sandbox.available)
        state = initial_state(probe, requested)
        if isinstance(state, Rejection):
            raise PhoenixError(state.message)
        record = self.store.create_conversation(
            slug=slug,
            cwd=str(directory.resolve()),
            model=model,
            seed_from=seed_from,
            server=self.settings.server.as_json(),
            **persisted_fields(state),
        )
        if requested is Mode.UNRESTRICTED:
            self.audit("mode_change", record["slug"], mode=Mode.UNRESTRICTED.value)
        return Conversation(self, self._runtime_for(record))

    def open(
        self,
        slug: str | None = None,
        *,
        cwd: str | Path | None = None,
        model: str | None = None,
        mode: Mode | str | None = None,
    ) -> Conversation:
        """The conversation named `slug`, created if missing; creation-only options must agree."""
        record = self.store.get_conversation(slug) if slug else None
        if record is None:
            return self.create(slug=slug, cwd=cwd, model=model, mode=mode)
        conv = Conversation(self, self._runtime_for(record))
        check_unchanged(conv, cwd=cwd, model=model)
        return conv

    def list(self) -> list[dict[str, Any]]:
        """User conversations, newest first (sub-agents excluded, REQ-BED-009)."""
        return self.store.list_conversations()

    @property
    def store_problem(self) -> str | None:
        """One line saying why the store cannot be written now, or None (store.py)."""
        return store_problem(self.store_root)

    async def repair(self, id_or_slug: str) -> Repaired:
        """Make a damaged conversation usable again (claim.repair); its runtime is reopened
        from the rewritten store on next use."""
        record = self.store.get_conversation(id_or_slug)
        if record is None:
            raise UnknownConversation(
                f"No conversation named {id_or_slug!r}. `%phoenix list` shows the existing ones."
            )
        runtime = self._runtimes.get(record["id"])
        if runtime is not None and not runtime.closed:
            if runtime.state.busy:
                raise PhoenixError(f"{runtime.slug} is working; cancel it before repairing it.")
            await runtime.close()
            del self._runtimes[record["id"]]
        return repair(self.store, record["id"], is_sub_agent=not record.get("user_initiated", True))

    def forget(self, conversation_id: str) -> None:
        """Drop a closed runtime (finished sub-agents) so a long session does not pile them up."""
        runtime = self._runtimes.get(conversation_id)
        if runtime is not None and runtime.closed:
            del self._runtimes[conversation_id]

    def live_credentials(self) -> tuple[str, ...]:
        """What every provider this Phoenix has made holds now (`LlmProvider.
        live_credentials`), retired ones included: their clients are still in the
        kernel's memory, so every fork of the kernel scrubs them."""
        found: list[str] = []
        given = [self._provider] if self._provider is not None else []
        for provider in [*given, *self._providers.values(), *self._retired]:
            try:
                found += provider.live_credentials()
            except Exception:  # a provider's bug must not stop the scrub of the others
                log.exception("phoenix: live_credentials failed for %r", provider)
        return tuple(dict.fromkeys(found))

    async def aclose(self) -> None:
        await self.spawner.close()
        if self._mcp is not None:  # every server's tree is killed by its supervisor
            await asyncio.get_running_loop().run_in_executor(None, self._mcp.close)
        for runtime in list(self._runtimes.values()):
            await runtime.close()
        for provider in [*self._providers.values(), *self._retired]:
            await provider.aclose()
        if self._store is not None:
            self._store.close()


def check_unchanged(conv: Conversation, *, cwd: str | Path | None, model: str | None) -> None:
    """Creation-only options cannot change later (REQ-BED-010)."""
    if cwd is not None and str(Path(cwd).expanduser().resolve()) != conv.cwd:
        raise PhoenixError(
            f"Conversation {conv.slug} works in {conv.cwd}; its directory cannot change. "
            "Start a new conversation with --new --cwd …"
        )
    if model is not None and model != conv.model:
        raise PhoenixError(
            f"Conversation {conv.slug} uses model {conv.model}; start a new conversation "
            "(--new --model …) to use another."
        )
