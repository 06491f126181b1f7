"""The kernel's phoenix session: configuration and the notebook's conversation.

Configuration comes from traitlets (`c.Phoenix.model = …` in an IPython
profile's config) with environment variables as defaults, so the same kernel
works offline (demo model) and with a key. One `Phoenix` manager lives per
kernel, created lazily on the kernel's event loop; the notebook has a
"current" conversation, created on first use in the kernel's working directory
(the notebook's folder). When the kernel knows its notebook (`JPY_SESSION_NAME`),
that choice is kept in the store (`binding.py`), so a restarted kernel or a new
one for the same notebook continues the same conversation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

from phoenix_nb.errors import PhoenixError
from phoenix_nb.notebook.binding import NotebookBindings, notebook_key
from phoenix_nb.notebook.ipython_kernel import IPythonKernel
from phoenix_nb.notebook.options import CellOptions
from phoenix_nb.policy import Policy, PolicyRefusal, load_policy
from phoenix_nb.runtime.settings import DEMO_MODEL, Settings, default_model
from phoenix_nb.sandbox import DEFAULT_DENY_READ

if TYPE_CHECKING:  # the runtime is imported on first use, not at %load_ext
    from phoenix_nb.runtime.manager import Conversation, Phoenix


# Trait defaults are the settings' own, written once in their dataclasses.
_DEFAULT = Settings(model=DEMO_MODEL)  # `model`'s default reads the environment: not used
_SANDBOX = _DEFAULT.sandbox
_SUB_AGENTS = _DEFAULT.sub_agents
_CHECKPOINTS = _DEFAULT.checkpoints


class PhoenixConfig(Configurable):
    """Settings read from `c.Phoenix.*` (the class is registered under that name)."""

    model = Unicode(help="Model for new conversations; 'demo' is the offline demo.").tag(
        config=True
    )
    home = Unicode("", help="Store folder (default $PHOENIX_HOME or Jupyter's data dir).").tag(
        config=True
    )
    provider = CaselessStrEnum(
        ("anthropic", "bedrock", "vertex", "openai"),
        "anthropic",
        help="Who serves the model: anthropic (incl. compatible servers at base_url), "
        "bedrock, vertex, or openai (Chat Completions). README 'Models'.",
    ).tag(config=True)
    base_url = Unicode(
        "", help="The provider's base URL (default $ANTHROPIC_BASE_URL for anthropic)."
    ).tag(config=True)
    mcp_servers = Dict(
        {},
        help="MCP servers whose tools the agent may use: {name: {command, args, env, cwd, "
        "network, write, timeout, memory} | {url, headers}} (README 'Tools from MCP servers').",
    ).tag(config=True)
    mcp_defer_above = Int(
        _DEFAULT.mcp_defer_above,
        help="Above this many MCP tools, send their names up front and schemas on demand.",
    ).tag(config=True)
    models = Dict(
        help="Models the registry and the server do not describe: {name: {context_window, "
        "max_output, prices: {input, output, ...}, supports: {thinking, caching, images}}}."
    ).tag(config=True)
    helper_model = Unicode("", help="Small model keyword_search asks to rank files.").tag(
        config=True
    )
    wait_for_approval = CaselessStrEnum(
        ("auto", "always", "never"),
        "auto",
        help="Show Approve/Deny and keep the turn waiting for them: auto = when the front "
        "end can answer (the cell ends meanwhile; its record keeps updating).",
    ).tag(config=True)
    # Write access is a grant to one session with the person who gave it: a restart (a
    # crash, a kernel someone else restarted, a notebook reopened days later) should not
    # silently carry it on, so the default takes it back and the agent asks again.
    restrict_on_restart = Bool(
        True,
        help="After a kernel restart, continue the notebook's conversation Restricted "
        "(False: it keeps the mode it had, e.g. Unrestricted).",
    ).tag(config=True)
    retry_delay_scale = Float(
        _DEFAULT.retry_delay_scale, help="Multiply retry backoff delays (tests)."
    ).tag(config=True)
    sub_agent_timeout = Float(
        _SUB_AGENTS.timeout, help="Seconds before a sub-agent is stopped."
    ).tag(config=True)
    max_parallel_sub_agents = Int(_SUB_AGENTS.max_parallel, help="Sub-agents running at once.").tag(
        config=True
    )
    display_min_interval = Float(0.1, help="Seconds between streaming display updates.").tag(
        config=True
    )
    show_thinking = Bool(True, help="Show the model's reasoning in the record.").tag(config=True)
    # Restricted-mode budgets and hidden paths (README "Security model").
    sandbox_memory = Int(
        _SANDBOX.memory, help="Bytes one conversation's Restricted commands may use together."
    ).tag(config=True)
    sandbox_max_procs = Int(
        _SANDBOX.max_procs, help="Processes one conversation may run at once."
    ).tag(config=True)
    sandbox_tmp_bytes = Int(
        _SANDBOX.tmp_bytes, help="Size cap of a Restricted command's TMPDIR."
    ).tag(config=True)
    sandbox_tmp_inodes = Int(_SANDBOX.tmp_inodes, help="File-count cap of that TMPDIR.").tag(
        config=True
    )
    deny_read = List(
        Unicode(),
        default_value=list(DEFAULT_DENY_READ),
        help="Paths Restricted commands cannot read (append to extend, assign to trim).",
    ).tag(config=True)
    cache_ttl = CaselessStrEnum(
        ("1h", "5m", "off"),
        _DEFAULT.cache_ttl or "off",
        help="Prompt-cache lifetime: 1h (default: pauses between cells outlast 5 minutes), "
        "5m (cheaper writes for fast back-to-back work) or off.",
    ).tag(config=True)
    env_allow = List(
        Unicode(),
        help="More environment variables commands may see (names or patterns like MYAPP_*).",
    ).tag(config=True)
    kernel_access = CaselessStrEnum(
        ("on", "off"),
        _DEFAULT.kernel_access,
        help="Let the agent read the kernel (variables, history, a sandboxed fork); off: "
        "its kernel tools answer with an error.",
    ).tag(config=True)
    checkpoints = Bool(
        _CHECKPOINTS.enabled,
        help="Checkpoint the folder while the agent can write, so %phoenix revert works.",
    ).tag(config=True)
    checkpoint_max_file_size = Int(
        _CHECKPOINTS.max_file_size,
        help="Bytes; larger files are recorded by hash only (not restorable).",
    ).tag(config=True)
    checkpoint_keep_days = Float(
        _CHECKPOINTS.keep_days,
        help="Days before old checkpoints may be pruned (never the latest turn's).",
    ).tag(config=True)
    checkpoint_max_bytes = Int(
        _CHECKPOINTS.max_bytes, help="Bytes per conversation's store before the oldest go."
    ).tag(config=True)

    stall_timeout = Float(
        _DEFAULT.stall_timeout, help="Seconds without data before a response counts as stalled."
    ).tag(config=True)
    sub_agent_timeout_max = Float(
        _SUB_AGENTS.timeout_max,
        help="The longest timeout a spawn_agents call may ask for, seconds.",
    ).tag(config=True)
    thinking = Dict(
        help='Extended thinking for requests, e.g. {"type": "enabled", "budget_tokens": 2000}.'
    ).tag(config=True)
    secret_patterns = List(
        Unicode(),
        help="Name patterns kept out of commands' environments and the store (empty: defaults).",
    ).tag(config=True)
    # The turn budget (defaults in runtime/settings.py Settings).
    max_turn_rounds = Int(
        Settings.max_turn_rounds,
        allow_none=True,
        help="Model responses for one message before the turn stops (None or 0: no limit).",
    ).tag(config=True)
    max_turn_cost = Float(
        Settings.max_turn_cost,
        allow_none=True,
        help="Dollars one turn may spend before it stops (None: no limit; priced models).",
    ).tag(config=True)
    max_conversation_cost = Float(
        Settings.max_conversation_cost,
        allow_none=True,
        help="Dollars a conversation may spend in all (None: no limit; priced models).",
    ).tag(config=True)

    def _model_default(self) -> str:
        return default_model()


# traitlets reads `c.Phoenix.*` for a class named Phoenix.
PhoenixConfig.__name__ = "Phoenix"


class ShownTurn(Protocol):
    """A turn as its cell shows it now: running, or detached once its cell ended at a
    request (notebook/cell.py's TurnView with live controls)."""

    @property
    def cell_id(self) -> str | None:
        """The asking cell's id as its front end sent it (None: none was sent)."""
        ...

    @property
    def execution_count(self) -> int | None:
        """The asking cell's execution count (None: unknown)."""
        ...

    def outputs(self) -> list[dict[str, Any]]:
        """The cell's outputs now, as nbformat output dicts (display_data)."""
        ...


class Session:
    """The kernel-wide state of phoenix_nb."""

    def __init__(
        self,
        config: PhoenixConfig,
        *,
        cwd: Path | None = None,
        kernel: IPythonKernel | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.config = config
        self.policy = policy  # the admin's, read once when the extension loaded
        self.kernel = kernel  # the kernel tools' port onto this kernel (None outside IPython)
        self.cwd = cwd or Path.cwd()
        self._phoenix: Phoenix | None = None
        self._current: str | None = None  # slug of the notebook's conversation
        self._looked_up: str | None = None  # notebook whose stored binding was read
        self.resumed: str | None = None  # picked up from the store, not yet announced
        self._shown: dict[str, tuple[int, int]] = {}
        self._observing = False  # the config observer is added once, with the first Phoenix
        self._current_watchers: list[Callable[[str | None], None]] = []
        # Conversations whose waiting turn a detached cell view still shows (cell.py): an
        # answer from elsewhere goes on there rather than in the answering cell.
        self.watching: set[str] = set()
        # The turns shown in a cell with live controls, by conversation, for a front end
        # that never had their outputs (a notebook reopened before it was saved, outputs
        # cleared): pending_comm.py.
        self.shown_turns: dict[str, ShownTurn] = {}
        self._settled: set[str] = set()  # resumed conversations restrict_on_restart saw
        self._restricted_on_restart: set[str] = set()

    @property
    def notebook(self) -> str | None:
        """The notebook's path when the kernel knows it (read each time: it may be set by hand)."""
        return notebook_key(os.environ, self.cwd)

    def _bindings(self) -> NotebookBindings:
        return NotebookBindings(self.phoenix.store.root)

    @property
    def current(self) -> str | None:
        """The notebook's conversation: this kernel's choice, else the one stored for the
        notebook by an earlier kernel (a restart), else None."""
        if self._current is None:
            key = self.notebook
            if key is not None and key != self._looked_up:
                self._looked_up = key
                slug = self._bindings().get(key)
                if slug and self.phoenix.store.get_conversation(slug) is not None:
                    self._current = slug
                    self.resumed = slug
        return self._current

    @current.setter
    def current(self, slug: str | None) -> None:
        changed = slug != self._current
        self._current = slug
        key = self.notebook
        if slug is not None and key is not None:
            self._looked_up = key
            self._bindings().set(key, slug)
        if changed:
            for watcher in list(self._current_watchers):
                watcher(slug)

    def watch_current(self, watcher: Callable[[str | None], None]) -> Callable[[], None]:
        """Call `watcher(slug)` whenever the notebook's conversation changes (`%phoenix use`,
        `--new`, Continue): the side panel follows it. Returns the unsubscribe."""
        self._current_watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._current_watchers:
                self._current_watchers.remove(watcher)

        return unwatch

    def shown(self, slug: str) -> tuple[int, int] | None:
        """How much of `slug` the notebook's records show: (last cycle, its steps)."""
        if slug in self._shown:
            return self._shown[slug]
        key = self.notebook
        return self._bindings().shown(key, slug) if key is not None else None

    def mark_shown(self, slug: str, record: Mapping[str, Any]) -> None:
        """Remember that the notebook now shows `record` (whole, or its last cycles: each
        cycle carries its `index` in the whole record)."""
        cycles = record.get("cycles") or []
        if not cycles:
            return
        last = cycles[-1]
        index = last.get("index")
        mark = (
            index if isinstance(index, int) else len(cycles) - 1,
            len(last.get("steps") or []),
        )
        self._shown[slug] = mark
        key = self.notebook
        if key is not None:
            self._bindings().set_shown(key, slug, mark)

    async def settle_resumed(self) -> None:
        """After a restart, before the first command or turn: a conversation picked up
        Unrestricted becomes Restricted when `restrict_on_restart` says so (and the host
        can sandbox), so write access never outlives its kernel unannounced."""
        _ = self.current  # reads the notebook's stored conversation, if any
        slug = self.resumed
        if slug is None or slug in self._settled or not self.config.restrict_on_restart:
            return
        self._settled.add(slug)
        await self.phoenix.load(slug)
        conv = self.current_conversation(slug)
        if conv.mode.value == "unrestricted" and self.phoenix.sandbox.available:
            await conv.restrict()
            self._restricted_on_restart.add(slug)

    def take_resumed_note(self) -> str | None:
        """'continuing SLUG …' once, for the first output after the conversation was
        picked up from the store: with its mode, and how to leave Unrestricted."""
        slug, self.resumed = self.resumed, None
        if slug is None:
            return None
        head = f"continuing {slug}, this notebook's conversation (picked up after a restart)"
        mode = self.current_conversation(slug).mode.value
        if slug in self._restricted_on_restart:
            return (
                f"{head}, now Restricted: write access ended with the old kernel "
                "(c.Phoenix.restrict_on_restart); the agent asks again if it needs it"
            )
        if mode == "unrestricted":
            return (
                f"{head}, still Unrestricted: the agent can write files; "
                "`%phoenix restrict` makes it read-only"
            )
        return f"{head}, {mode.capitalize()}"

    def settings(self) -> Settings:
        """The settings `c.Phoenix.*` says now (Settings.from_config: the one place),
        inside the admin's policy (PolicyRefusal names the bound a setting passes)."""
        c = self.config
        settings = Settings.from_config({n: getattr(c, n) for n in c.trait_names(config=True)})
        return settings.with_policy(self.policy)

    @property
    def phoenix(self) -> Phoenix:
        if self._phoenix is None:
            from phoenix_nb.runtime.manager import Phoenix  # loads the runtime: first use only

            self._phoenix = Phoenix(self.settings(), kernel=self.kernel)
            if not self._observing:
                self._observing = True
                self.config.observe(
                    self._config_changed, names=list(self.config.trait_names(config=True))
                )
        return self._phoenix

    def _config_changed(self, change: Mapping[str, Any]) -> None:
        """`%config Phoenix.X = …` after `%load_ext` applies from the next request or tool
        call, like profile config. A new `home` is another store: the next use opens it
        (the old one is closed) and looks the notebook's conversation up there."""
        phoenix = self._phoenix
        if phoenix is None:
            return  # not built yet: the first use reads the config as it is then
        try:
            settings = self.settings()
        except PolicyRefusal:
            # the change is refused, not kept: the session goes on with what it had
            self.config.set_trait(change["name"], change["old"])
            raise
        if settings.store_root() != Path(phoenix.store_root):
            self._phoenix = None
            self._current = self._looked_up = self.resumed = None
            self._shown.clear()
            _close_soon(phoenix)
            return
        phoenix.reconfigure(settings)

    def conversation_for(self, opts: CellOptions) -> Conversation:
        """The conversation a cell talks to, honouring --new / --name and creation options."""
        from phoenix_nb.runtime.manager import check_unchanged

        phoenix = self.phoenix
        if opts.new:
            conv = phoenix.create(cwd=opts.cwd or self.cwd, model=opts.model, mode=opts.mode)
        elif opts.name:
            existing = phoenix.store.get_conversation(opts.name)
            if existing is None:
                conv = phoenix.create(
                    slug=opts.name, cwd=opts.cwd or self.cwd, model=opts.model, mode=opts.mode
                )
            else:
                conv = phoenix.get(opts.name)
                check_unchanged(conv, cwd=opts.cwd, model=opts.model)
                _check_mode_option(conv, opts.mode)
        elif self.current is not None:
            conv = phoenix.get(self.current)
            check_unchanged(conv, cwd=opts.cwd, model=opts.model)
            _check_mode_option(conv, opts.mode)
        else:
            conv = phoenix.create(cwd=opts.cwd or self.cwd, model=opts.model, mode=opts.mode)
        self.current = conv.slug
        return conv

    def current_conversation(self, slug: str | None = None) -> Conversation:
        return self.phoenix.get(self.conversation_name(slug))

    def conversation_name(self, slug: str | None = None) -> str:
        """`slug`, else the notebook's conversation; without either, says what to do."""
        name = slug or self.current
        if name is None:
            raise PhoenixError(
                "No conversation yet in this notebook: run a %%phoenix cell first "
                "(or `%phoenix use SLUG`)."
            )
        return name

    def current_conversation_or_new(self) -> Conversation:
        if self.current is None:
            conv = self.phoenix.create(cwd=self.cwd)
            self.current = conv.slug
            return conv
        return self.phoenix.get(self.current)


def _close_soon(phoenix: Phoenix) -> None:
    """Close a Phoenix left behind by a new `home`, on the kernel's loop when one runs."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop (plain Python): its files close with the process
    task = loop.create_task(phoenix.aclose())
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


_CLOSING: set[Any] = set()


def _check_mode_option(conv: Conversation, mode: str | None) -> None:
    if mode is not None and mode != conv.mode.value:
        raise PhoenixError(
            f"--mode applies when a conversation is created; {conv.slug} is {conv.mode.value}. "
            "Use `%phoenix restrict` to tighten it, or let the agent ask for write access."
        )


_session: Session | None = None


def get_session(shell: Any = None) -> Session:
    """The kernel's session, configured from the shell's traitlets config."""
    global _session
    if _session is None:
        policy = load_policy()  # once: the spawner's environment names it
        config = PhoenixConfig(config=getattr(shell, "config", None))
        kernel = IPythonKernel(shell) if getattr(shell, "user_ns", None) is not None else None
        _session = Session(config, kernel=kernel, policy=policy)
    return _session


def reset_session() -> None:
    """Forget the session (tests, and `%reload_ext`)."""
    global _session
    if _session is not None and _session.kernel is not None:
        _session.kernel.close()
    _session = None
