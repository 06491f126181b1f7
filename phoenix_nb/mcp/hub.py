"""The MCP servers of one `Phoenix`: their states, their one worker thread, their calls.

One thread with its own event loop runs every server's client (a task each),
started at the first use of a configured server: the SDK is imported there
(`sdk.py`), never at ``%load_ext`` and never on the kernel's event loop, and a
server that hangs blocks only its own task. The kernel's side only reads the
servers' states and awaits calls through `asyncio.wrap_future`, so cancelling
a tool call (Cancel, interrupt, restrict) cancels the worker's task, and the SDK
abandons the request with ``notifications/cancelled``.

Every stdio server starts through `CommandRunner.serve` in the Restricted
sandbox, whatever the conversation's mode: read-only files, its own network
namespace, hidden credential paths, an environment of the SDK's safe names plus
only the ``env`` its entry names, a cgroup budget of its own (``memory``,
default 1 GiB). A server granted ``network`` or ``write`` (user config only)
stays in that sandbox with exactly its grants lifted (the host's network; a
writable mount and Landlock rule for each ``write`` directory) and its tools
are write tools (`McpTool.writes`). No server outlives the kernel: its
supervisor kills the tree when the kernel's end of the status pipe closes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import hashlib
import logging
import os
import shutil
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from phoenix_nb.commands import CommandRunner
from phoenix_nb.errors import PhoenixError
from phoenix_nb.mcp.approvals import Approvals
from phoenix_nb.mcp.bounds import McpBounds
from phoenix_nb.mcp.config import (
    PROJECT_FILE,
    McpConfigError,
    ServerConfig,
    ToolSpec,
    parse_project_file,
    tools_digest,
)
from phoenix_nb.sandbox import SandboxInfo, SandboxPolicy

if TYPE_CHECKING:
    from phoenix_nb.mcp.sdk import CallOutcome

__all__ = ["INSTALL_HINT", "McpHub", "Server", "ServerState"]

log = logging.getLogger(__name__)
T = TypeVar("T")

INSTALL_HINT = "MCP servers need the mcp extra: pip install 'phoenix_nb[mcp]'"
# The SDK's own list of variables safe to inherit (mcp.client.stdio); the
# entry's `env` adds to it, and nothing else of the kernel's environment passes.
SAFE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


class McpError(PhoenixError):
    """An MCP server or call failed; the message is for the model and the user."""


class ServerState(enum.StrEnum):
    PENDING = "pending approval"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass
class Server:
    """One configured server and what phoenix knows of it now."""

    config: ServerConfig
    state: ServerState = ServerState.STOPPED
    why: str = ""  # failed: the error and stderr tail; pending: what changed
    tools: tuple[ToolSpec, ...] = ()
    instructions: str = ""
    restricted: bool = True  # ran in the Restricted sandbox
    # Stopped because nothing may use it now (`McpHub.park`): keeps its pinned tools,
    # so conversations keep offering them, and starts again at its next call only.
    parked: bool = False
    # Worker-side handles (only the worker thread touches them).
    _client: Any = field(default=None, repr=False)
    _stop: asyncio.Event | None = field(default=None, repr=False)
    _task: concurrent.futures.Future[None] | None = field(default=None, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)  # ready or ended
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)  # ended
    _tail: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def awaiting(self) -> bool:
        """Waiting for a person's Approve or Deny (a denied one was answered)."""
        return self.state == ServerState.PENDING and self.why != "denied"

    @property
    def request_id(self) -> str:
        """Its id as a pending request (`Phoenix.pending`): a digest of where it comes
        from, what it would run and (when that is what changed) its tool list, so an
        answer given to one entry can never approve the entry that replaced it."""
        cfg = self.config
        tools = tools_digest(self.tools) if self.why.startswith("tool list") else ""
        key = f"{cfg.source}|{cfg.project_dir}|{cfg.name}|{cfg.digest()}|{tools}"
        return "mcp-" + hashlib.sha256(key.encode()).hexdigest()[:12]


Decided = Callable[[Server, str], None]  # (server, "approve" | "deny")


class McpHub:
    """Every MCP server of one Phoenix (config ones, and project files seen in its folders)."""

    def __init__(
        self,
        approvals: Approvals,
        sandbox: SandboxInfo,
        policy: SandboxPolicy,
        configured: Sequence[ServerConfig] = (),
        *,
        bounds: McpBounds | None = None,
        on_pending: Callable[[], None] | None = None,
        on_decision: Decided | None = None,
    ) -> None:
        """`bounds`: the admin policy's [mcp] section. `on_pending()` is called (on
        whichever thread noticed) when the set of servers awaiting approval changed;
        `on_decision(server, answer)` when a person approved or denied one (the audit
        trail). Neither may raise or block."""
        self.approvals = approvals
        self.sandbox = sandbox
        self.policy = policy
        self.bounds = bounds or McpBounds()
        self._on_pending = on_pending
        self._on_decision = on_decision
        self._awaiting: frozenset[str] = frozenset()
        self.refused: list[str] = []  # the policy's refusals of configured servers
        self._servers: dict[tuple[str, str, str], Server] = {}
        self._configured: tuple[ServerConfig, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.problems: list[str] = []  # project-file errors, for the user
        self.config_problem = ""  # why c.Phoenix.mcp_servers could not be used
        self.reconfigure(configured, policy)

    # ---- configuration ----------------------------------------------------------------
    def reconfigure(self, configured: Sequence[ServerConfig], policy: SandboxPolicy) -> None:
        """New ``c.Phoenix.mcp_servers``: entries that changed are stopped (and restart on use).
        Under a policy's ``servers`` bound only the policy's servers are kept; the user's
        others are refused (`refused` says so, naming the policy's line)."""
        self.policy = policy
        bounds = self.bounds
        self.refused = [bounds.problem] if bounds.problem else []
        if bounds.servers is None:
            self._configured = tuple(configured)
        else:
            allowed = {s.name for s in bounds.servers}
            for cfg in configured:
                self.refused.append(
                    bounds.replaced(cfg) if cfg.name in allowed else bounds.server_refused(cfg)
                )
            self._configured = bounds.servers
        keep: dict[tuple[str, str, str], ServerConfig] = {
            (s.source, "", s.name): s for s in self._configured
        }
        for key, server in list(self._servers.items()):
            if key[0] == "project":
                continue
            new = keep.get(key)
            if new is None or new.digest() != server.config.digest():
                self._stop_soon(server)
                del self._servers[key]
        for key, cfg in keep.items():
            self._servers.setdefault(key, Server(cfg))
        self._notify()

    def _project(self, cwd: Path) -> None:
        """Read ``cwd/.mcp.json`` (only reading): its servers join as pending or approved.
        Under a policy that turns project files off it is not read at all; under a
        ``servers`` bound its servers are refused (the policy's own run instead)."""
        folder = str(cwd)
        found: tuple[ServerConfig, ...] = ()
        if not self.bounds.project_files:
            if (cwd / PROJECT_FILE).exists():
                self.problems.append(self.bounds.project_file_refused(f"{folder}/{PROJECT_FILE}"))
        else:
            try:
                found = parse_project_file(cwd)
            except McpConfigError as exc:
                self.problems = [str(exc)]
                return
        names = {s.name for s in self._configured}
        seen = set()
        for cfg in found:
            if self.bounds.servers is not None and cfg.name not in names:
                self.problems.append(self.bounds.server_refused(cfg))
                continue
            if cfg.name in names:
                self.problems.append(
                    f"{cfg.name} in {folder}/.mcp.json is ignored: "
                    + (
                        "the admin's policy configures a server of that name"
                        if self.bounds.servers is not None
                        else "your config has a server of that name"
                    )
                )
                continue
            key = ("project", folder, cfg.name)
            seen.add(key)
            old = self._servers.get(key)
            if old is not None and old.config.digest() == cfg.digest():
                continue
            if old is not None:  # the file changed: the old command stops, the new waits
                self._stop_soon(old)
            self._servers[key] = Server(cfg)
        for key in [k for k in self._servers if k[0] == "project" and k[1] == folder]:
            if key not in seen:
                self._stop_soon(self._servers.pop(key))

    def servers(self, cwd: Path | None = None) -> list[Server]:
        """The servers in force for a conversation in ``cwd`` (config first), states current."""
        if cwd is not None:
            self.problems = []
            self._project(cwd)
        out = []
        for key, server in list(self._servers.items()):
            if key[0] == "project" and cwd is not None and key[1] != str(cwd):
                continue
            self._refresh(server)
            out.append(server)
        self._notify()
        return out

    def awaiting(self) -> list[Server]:
        """Every server of this process waiting for Approve or Deny (any folder seen)."""
        return [s for s in self.servers() if s.awaiting]

    def _notify(self) -> None:
        """Tell `on_pending` when the servers awaiting approval are no longer the same."""
        now = frozenset(s.request_id for s in list(self._servers.values()) if s.awaiting)
        with self._lock:
            if now == self._awaiting:
                return
            self._awaiting = now
        if self._on_pending is not None:
            self._on_pending()

    def _decided(self, server: Server, answer: str) -> None:
        self._notify()
        if self._on_decision is not None:
            self._on_decision(server, answer)

    def _refresh(self, server: Server) -> None:
        cfg = server.config
        if server.state in (ServerState.STOPPED, ServerState.PENDING):
            if cfg.source != "project" and not self.approvals.config_approved(cfg):
                # written by the user or the admin: approved by being written
                self.approvals.approve(cfg)
            approved = self.approvals.config_approved(cfg)
            if not approved:
                server.state = ServerState.PENDING
                if not server.why:
                    server.why = "not approved yet"
            elif server.state == ServerState.PENDING and not server.why.startswith("tool list"):
                server.state, server.why = ServerState.STOPPED, ""

    def find(self, name: str, cwd: Path | None) -> Server:
        for server in self.servers(cwd):
            if server.name == name:
                return server
        raise McpError(f"No MCP server named {name!r} here (see %phoenix mcp).")

    # ---- approval ---------------------------------------------------------------------
    def approve(self, server: Server) -> None:
        """Approve the entry as it is now, and (if its tool list changed) the new list."""
        if server.why.startswith("tool list") and server.tools:
            self.approvals.approve_tools(server.config, tools_digest(server.tools))
        else:
            self.approvals.approve(server.config)
        server.state, server.why = ServerState.STOPPED, ""
        self._decided(server, "approve")

    def deny(self, server: Server) -> None:
        self.approvals.deny(server.config)
        self._stop_soon(server)
        server.state, server.why, server.tools = ServerState.PENDING, "denied", ()
        self._decided(server, "deny")

    # ---- the worker thread ------------------------------------------------------------
    def _worker(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="phoenix-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._worker())  # type: ignore[arg-type]

    async def prepare(self, cwd: Path, *, pending_lines: bool = True) -> list[str]:
        """Start the approved servers of ``cwd`` that are not running; wait (at most
        its ``startup_timeout``) until each is ready or failed. Returns lines for the user: what is
        pending approval (unless `pending_lines` is False: the caller shows its own
        prompt), what failed and why. Nothing starts for a pending server."""
        servers = self.servers(cwd)
        for server in servers:
            if server.state == ServerState.STOPPED and not server.parked:
                self._start(server)
        started = [s for s in servers if s.state == ServerState.STARTING]
        if started:
            loop = asyncio.get_running_loop()
            waits = [
                loop.run_in_executor(None, s._done.wait, s.config.startup_timeout + 5)
                for s in started
            ]
            await asyncio.gather(*waits)
        said = [f"c.Phoenix.mcp_servers: {self.config_problem}"] if self.config_problem else []
        return [
            *said,
            *self.refused,
            *self.problems,
            *(line for s in servers if pending_lines or not s.awaiting for line in _lines(s)),
        ]

    def start(self, server: Server) -> None:
        """Start an approved server that is not running (not waiting for it)."""
        self._refresh(server)
        if server.state == ServerState.STOPPED:
            self._start(server)

    def _start(self, server: Server) -> bool:
        if server.state not in (ServerState.STOPPED, ServerState.FAILED):
            return False
        server.state, server.why, server.parked = ServerState.STARTING, "", False
        server._done.clear()
        server._finished.clear()
        server._task = self._submit(self._run(server))
        return True

    def park(self, server: Server, why: str) -> bool:
        """Stop a ready server that nothing may use now (blocking: call it off the loop).
        Its tool list stays (pinned: a restart that lists other tools is pending again),
        so the conversations holding its tools keep them byte for byte, and the next
        call starts it again; `prepare` leaves it stopped. False if it was not ready."""
        if server.state != ServerState.READY:
            return False
        self._stop_now(server)
        if server.state == ServerState.STOPPED:
            server.parked, server.why = True, why
        return True

    def restart(self, server: Server) -> None:
        self._stop_now(server)
        if server.state != ServerState.PENDING:
            server.state = ServerState.STOPPED
            self._start(server)

    def _stop_soon(self, server: Server) -> None:
        if server._stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(server._stop.set)

    def _stop_now(self, server: Server, wait: float = 15.0) -> None:
        task = server._task
        self._stop_soon(server)
        if task is not None:
            with contextlib.suppress(Exception):
                task.result(wait)
        server._client = server._stop = None

    async def _run(self, server: Server) -> None:
        """Worker: start, list, serve until stopped. Every failure ends as FAILED with its why."""
        import anyio

        cfg = server.config
        server._stop = asyncio.Event()
        timed_out = False
        try:
            try:
                from phoenix_nb.mcp import sdk
            except ImportError as exc:
                raise McpError(f"{INSTALL_HINT} ({exc})") from exc
            server._tail = tail = sdk.StderrTail()
            gone = False

            def ended() -> None:
                nonlocal gone
                gone = True
                stop.set()

            stop = server._stop
            if cfg.stdio:
                process = await self._spawn(server)
                transport: Any = sdk.launcher_transport(process, tail, ended)
            else:
                transport = (cfg.url, cfg.headers)
            ready = anyio.Event()
            async with anyio.create_task_group() as tg:

                async def watchdog() -> None:
                    nonlocal timed_out
                    with anyio.move_on_after(cfg.startup_timeout):
                        await ready.wait()
                        return
                    timed_out = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watchdog)
                async with sdk.connect(transport, read_timeout=cfg.timeout) as (
                    client,
                    text,
                    listed,
                ):
                    ready.set()
                    specs = tuple(
                        ToolSpec(cfg.name, t.name, t.description, t.input_schema) for t in listed
                    )
                    if not self.approvals.check_tools(cfg, tools_digest(specs)):
                        server.tools = specs
                        server.state = ServerState.PENDING
                        server.why = (
                            "tool list changed since it was approved (names, descriptions or "
                            "schemas): its tools are not offered until you approve again"
                        )
                        self._notify()
                        return
                    server._client, server.tools, server.instructions = client, specs, text
                    server.state = ServerState.READY
                    server._done.set()
                    await stop.wait()
                    if gone:
                        raise McpError("the server exited")
                    server.state = ServerState.STOPPED
            if gone:
                raise McpError("the server exited before it listed its tools")
            if timed_out:
                raise McpError(f"no answer within {cfg.startup_timeout:g} s of starting")
        except BaseException as exc:
            if server.state != ServerState.PENDING:
                server.state = ServerState.FAILED
                server.why = _why(exc, server)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            server._client = None
            server._done.set()
            server._finished.set()

    async def _spawn(self, server: Server) -> Any:
        cfg = server.config
        cwd = Path(cfg.cwd or cfg.project_dir or os.getcwd()).expanduser()
        env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ} | dict(cfg.env)
        exe = shutil.which(cfg.command, path=env.get("PATH")) or (
            cfg.command if os.path.isabs(cfg.command) else None
        )
        if exe is None:
            raise McpError(f"command not found: {cfg.command}")
        # Without the sandbox: the same lesser tier as bash, the server still runs
        # under its supervisor with its budget; the list says so.
        server.restricted = self.sandbox.available
        writable = tuple(_grant_dir(path, cwd) for path in cfg.write)
        runner = CommandRunner(self.policy, group=f"mcp-{cfg.name}")
        limits = replace(self.policy.limits, memory=cfg.memory)
        return await runner.serve(
            (exe, *cfg.args),
            cwd,
            env,
            restricted=server.restricted,
            limits=limits,
            writable=writable,
            network=cfg.network,
        )

    # ---- calls --------------------------------------------------------------------------
    async def call(self, server: Server, tool: str, arguments: Mapping[str, Any]) -> CallOutcome:
        """One tool call from the kernel's loop; cancelling it cancels it on the wire."""
        future = self._submit(self._call(server, tool, dict(arguments)))
        return await asyncio.wrap_future(future)

    async def _call(self, server: Server, tool: str, arguments: dict[str, Any]) -> CallOutcome:
        from phoenix_nb.mcp import sdk

        if server.state in (ServerState.STOPPED, ServerState.FAILED):  # the next use restarts it
            self._start(server)
        if server.state == ServerState.STARTING:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server._done.wait, server.config.startup_timeout)
        client = server._client
        if server.state != ServerState.READY or client is None:
            raise McpError(f"MCP server {server.name} is {server.state.value}: {server.why}")
        timeout = server.config.timeout
        try:
            return await sdk.call(client, tool, arguments, timeout)
        except TimeoutError as exc:
            raise McpError(
                f"{server.name}.{tool} did not answer within {timeout:g} s; the call was "
                "cancelled (the server's `timeout` setting)"
            ) from exc
        except Exception as exc:
            # A server that died takes its connection with it: once its task has
            # noticed, the error names that and the server's last stderr lines.
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server._finished.wait, 2.0)
            if server.state != ServerState.READY or server._client is None:
                raise McpError(
                    f"MCP server {server.name} stopped during the call "
                    f"({server.why or 'stopped'}); it starts again at the next use"
                ) from exc
            raise McpError(f"{server.name}.{tool} failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Stop every server (kernel shutdown, Phoenix closed) and the worker thread."""
        for server in list(self._servers.values()):
            self._stop_now(server, wait=5.0)
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(5.0)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for server in self._servers.values():
            out[server.state.value] = out.get(server.state.value, 0) + 1
        return out

    def ready_servers(self) -> list[Server]:
        """The servers whose tools a conversation starting now takes: the ready ones and
        the parked ones (stopped while unused; they start again at their next call)."""
        return [
            s
            for s in self._servers.values()
            if s.state == ServerState.READY
            or (s.parked and s.state == ServerState.STOPPED and s.tools)
        ]


def _why(exc: BaseException, server: Server) -> str:
    if isinstance(exc, asyncio.CancelledError):
        text = "stopped"
    elif isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _why(inner, server)
    else:
        text = str(exc) or type(exc).__name__
    tail = server._tail.text() if server._tail is not None else ""
    return f"{text}; stderr: {tail[-600:]}" if tail else text


def _lines(server: Server) -> list[str]:
    cfg = server.config
    if server.state == ServerState.PENDING and not server.awaiting:
        return [f"MCP server {cfg.name} was denied: it does not run."]
    if server.state == ServerState.PENDING:
        where = f" (from {cfg.project_dir}/.mcp.json)" if cfg.source == "project" else ""
        return [
            f"MCP server {cfg.name}{where} is pending approval ({server.why}); it would run: "
            f"{cfg.describe()}. Approve with `%phoenix mcp approve {cfg.name}` "
            f"(or `%phoenix approve {server.request_id}`)."
        ]
    if server.state == ServerState.FAILED:
        return [f"MCP server {cfg.name} failed: {server.why}"]
    return []


def _grant_dir(path: str, cwd: Path) -> str:
    """A ``write`` grant as the sandbox takes it: an existing directory, absolute and
    with its symlinks resolved (``~`` expanded, relative to the server's ``cwd``),
    because the sandbox binds it writable and gives it a Landlock rule by path.
    McpError (the server does not start) for one that is missing or not a folder:
    a grant never widens to a parent."""
    real = (cwd / Path(path).expanduser()).resolve()
    if not real.is_dir():
        raise McpError(f"write grant {path!r} is not an existing folder ({real})")
    return str(real)
