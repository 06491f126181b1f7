"""The kernel's handle on the launcher process, and the commands it starts.

The launcher (``child/launcher.py``) is a process: one per kernel, started on
first use, so `launcher()` returns the one handle this process has. That is
the only process-wide state here and it is a real per-process resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from phoenix_nb.sandbox.errors import SandboxError
from phoenix_nb.sandbox.protocol import ExitReport, Hello, ProtocolError, Started
from phoenix_nb.sandbox.rundir import owner, run_dir
from phoenix_nb.sandbox.runspec import RunSpec

__all__ = ["LauncherHandle", "Process", "launcher", "read_some", "start_process"]

_LAUNCHER_SCRIPT = Path(__file__).with_name("child") / "launcher.py"
_HELLO_TIMEOUT = 30.0
# Bound on waiting for a supervisor to take a request (its first status line). A
# spare takes it at once when one is ready; one being prepared bounds its own set-up
# (the launcher's _SETUP_TIMEOUT) and then answers, if only with a refusal. So this
# only ends a wait on a launcher that can no longer answer at all: the request is
# abandoned (its status pipe closed), and a spare that takes it later drops it.
_START_WAIT = 30.0
# Bound on waiting for a killed command's report. The supervisor reports only once
# the whole tree is gone, and dies (closing the pipe: read as killed) if it cannot;
# this bounds only a supervisor that is itself stuck. Generous, because a saturated
# machine (a CI run beside other jobs) can take seconds to schedule a kill's steps.
_STOP_WAIT = 60.0
# The output pipe's capacity. The default 64 KiB stalls a command printing more
# (a search's hits) until the kernel's event loop next runs: one scheduling delay
# per 64 KiB, which on a loaded machine is milliseconds each. Pages are only
# taken as output is written, so a quiet command costs nothing more.
_OUTPUT_PIPE_BYTES = 1 << 20


class Process:
    """A command started by the launcher: its output fd and its supervisor.

    The caller owns `output_fd` (read end of the combined stdout/stderr pipe);
    `wait()` returns the exit report; `kill()` stops the whole tree. A spec with
    ``stdin`` gives `stdin_fd` (the write end of the command's stdin, non-blocking),
    one with ``separate_stderr`` gives `stderr_fd` (the read end of its stderr);
    the caller owns and closes those too.
    """

    def __init__(self, output_fd: int, status_fd: int) -> None:
        self.output_fd = output_fd
        self.stdin_fd = -1
        self.stderr_fd = -1
        self._status_fd = status_fd
        self._status_buf = b""
        self.supervisor_pid = 0
        self.pgid = 0  # the group to kill: the command's bash, or its namespace's PID 1
        self.tmpdir = ""  # a Restricted command's TMPDIR (gone when it ends)
        self._pidfd: int | None = None
        self._group_pidfd: int | None = None  # pgid's process: the end a lost report waits for
        self.result: ExitReport | None = None
        self._wait_task: asyncio.Future[ExitReport] | None = None

    async def _read_line(self) -> bytes:
        loop = asyncio.get_running_loop()
        while b"\n" not in self._status_buf:
            chunk = await read_some(loop, self._status_fd)
            if not chunk:
                line, self._status_buf = self._status_buf, b""
                return line
            self._status_buf += chunk
        line, _, self._status_buf = self._status_buf.partition(b"\n")
        return line

    async def started(self) -> None:
        self._parse_started(await self._read_line())

    def abandon(self) -> None:
        """Stop a command whose start failed, without waiting for it.

        The supervisor writes the pids before the command may run, so a line
        already in the pipe names what to kill now; closing the status pipe
        then makes the supervisor kill whatever it started (it watches for
        that). A cancelled start does not come here: it must not return before
        the tree is gone, so `start_process` reads the pids and `stop`s it.
        """
        if not self.supervisor_pid:
            with contextlib.suppress(OSError, SandboxError):
                self._status_buf += os.read(self._status_fd, 65536)
                if b"\n" in self._status_buf:
                    self._parse_started(self._status_buf.partition(b"\n")[0])
        self.kill()
        self._close_status()

    def _parse_started(self, line: bytes) -> None:
        try:
            first = Started.parse(line)
        except ProtocolError as exc:
            raise SandboxError(str(exc)) from exc
        self.supervisor_pid, self.pgid, self.tmpdir = first.pid, first.pgid, first.tmpdir
        if self.supervisor_pid > 0:
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(self.supervisor_pid)
        if self.pgid > 0:
            # Opened now, while the supervisor still holds it unreaped (it writes this
            # line before the command may run): never a stranger that reused the pid.
            with contextlib.suppress(OSError):
                self._group_pidfd = os.pidfd_open(self.pgid)

    async def wait(self) -> ExitReport:
        """How the command ended (a missing or damaged report reads as killed).

        One task reads the report however many callers wait; cancelling a
        caller does not cancel the read.
        """
        return await asyncio.shield(self._report())

    async def stop(self) -> ExitReport | None:
        """Kill the whole tree and return once the supervisor reported it gone.

        The report comes only after the supervisor's last sweep (or, if the
        supervisor died, as the pipe's end), so when this returns a report no
        process of the command is left. Cancelling the caller meanwhile does not
        cut the wait short (a cancelled tool must not say its command is gone
        while it still runs); the cancellation is raised once the wait is over.
        None: no report within _STOP_WAIT (the supervisor itself is stuck).
        """
        self.kill()
        if self.result is None and await _settle(self._report(), _STOP_WAIT):
            raise asyncio.CancelledError
        return self.result

    def _report(self) -> asyncio.Future[ExitReport]:
        """The one task reading the report (however many wait for it)."""
        if self._wait_task is None:
            self._wait_task = asyncio.ensure_future(self._read_report())
        return self._wait_task

    async def _read_report(self) -> ExitReport:
        line = await self._read_line()
        if not line:
            await self._lost_supervisor()
        report = self.result = ExitReport.parse(line)
        self._close_status()
        return report

    async def _lost_supervisor(self) -> None:
        """The status pipe ended without a report: the supervisor was killed (from
        outside, by the OOM killer). Its namespace's PID 1 dies with it (its parent-death
        signal), but the namespace's teardown runs on after the pipe has closed, so the
        pipe's end says nothing about the tree. Kill the group (PID 1, or an Unrestricted
        command's group) and wait until that process has ended: PID 1 ends only once every
        process of its namespace is gone. Bounded by _STOP_WAIT."""
        if self.pgid > 0:
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, signal.SIGKILL)
        if self._group_pidfd is None:
            return
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        loop.add_reader(self._group_pidfd, _set_ready, ended)
        try:
            await asyncio.wait((ended,), timeout=_STOP_WAIT)
        finally:
            loop.remove_reader(self._group_pidfd)

    def kill(self) -> None:
        """SIGKILL the command's process group now, then have the supervisor sweep.

        The group goes first, from here, because it is one syscall and needs
        no other process to be scheduled: under load that is what keeps
        cancel within 100 ms (REQ-BED-005). The supervisor's SIGTERM handler
        then kills whatever left the group (``setsid``) and reports. The pgid
        is the command's pid; it could name a stranger only if, between the
        supervisor reaping the command and this side reading its report, the
        pid space wrapped around and a new group leader got that number.
        """
        if self.result is not None:
            return
        if self.pgid > 0:
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, signal.SIGKILL)
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGTERM)
            elif self.supervisor_pid > 0:
                os.kill(self.supervisor_pid, signal.SIGTERM)
        except OSError:
            pass

    def _close_status(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._status_fd)
        for pidfd in (self._pidfd, self._group_pidfd):
            if pidfd is not None:
                with contextlib.suppress(OSError):
                    os.close(pidfd)
        self._pidfd = self._group_pidfd = None


async def read_some(loop: asyncio.AbstractEventLoop, fd: int, size: int = 65536) -> bytes:
    """Read what is available on a non-blocking fd, waiting with the event loop."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            pass
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _set_ready, ready)
        try:
            await ready
        finally:
            loop.remove_reader(fd)


def _set_ready(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _settle(future: asyncio.Future[Any], timeout: float) -> bool:
    """Wait until `future` is done, at most `timeout` seconds, through any number of
    cancellations of the caller; whether there was one (the caller raises it after)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cancelled = False
    while not future.done() and (left := deadline - loop.time()) > 0:
        try:
            await asyncio.wait((future,), timeout=left)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


class LauncherHandle:
    """The kernel's handle on the launcher process; started on first use.

    Two sockets: Unrestricted requests and Restricted ones (each has its own
    pre-forked spare in the launcher). The launcher's first message on the
    Restricted socket describes the host (``hello``), cached here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._socks: tuple[socket.socket, socket.socket] | None = None
        self._hello: Hello | None = None
        self._pending: tuple[socket.socket, socket.socket] | None = None

    def spawn(self) -> None:
        """Start the launcher without waiting for it (its start-up overlaps the caller's)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start_locked()

    def _start_locked(self) -> None:
        self._socks = None
        plain_ours, plain_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r_ours, r_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PHOENIX_LAUNCHER_FD": str(plain_theirs.fileno()),
            "PHOENIX_LAUNCHER_RFD": str(r_theirs.fileno()),
            "PHOENIX_RUN_DIR": str(run_dir()),
            "PHOENIX_OWNER": owner(),
        }
        for name in ("PHOENIX_SANDBOX_NAMESPACES", "PHOENIX_LANDLOCK_ABI"):
            if name in os.environ:
                env[name] = os.environ[name]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", str(_LAUNCHER_SCRIPT)],
                stdin=subprocess.DEVNULL,
                pass_fds=(plain_theirs.fileno(), r_theirs.fileno()),
                start_new_session=True,
                env=env,
            )
        except OSError as exc:
            plain_ours.close()
            r_ours.close()
            raise SandboxError(f"cannot start the sandbox launcher: {exc}") from exc
        finally:
            plain_theirs.close()
            r_theirs.close()
        self._pending = (plain_ours, r_ours)

    def _ensure(self) -> tuple[socket.socket, socket.socket]:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None and self._socks is not None:
                return self._socks
            if self._proc is None or self._proc.poll() is not None or not self._pending:
                self._start_locked()
            assert self._pending is not None
            plain_ours, r_ours = self._pending
            self._pending = None
            r_ours.settimeout(_HELLO_TIMEOUT)
            try:
                hello = Hello.parse(r_ours.recv(1 << 16))
            except (OSError, ProtocolError) as exc:
                plain_ours.close()
                r_ours.close()
                raise SandboxError(f"the sandbox launcher did not start ({exc})") from exc
            r_ours.settimeout(None)
            self._hello = hello
            self._socks = (plain_ours, r_ours)
            return self._socks

    def hello(self) -> Hello:
        """What the launcher found on this host (namespaces, Landlock ABI, cgroups)."""
        self._ensure()
        assert self._hello is not None
        return self._hello

    def start(self, spec: RunSpec, output_w: int, extra: tuple[int, ...] = ()) -> tuple[int, int]:
        """Send one request; returns the status pipe's read end.

        ``extra``: the command's stdin read end and/or stderr write end, in that
        order, as the spec's ``stdin`` and ``separate_stderr`` say."""
        data = spec.to_request().to_wire()
        for attempt in range(2):
            sock = self._ensure()[1 if spec.restricted else 0]
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            try:
                socket.send_fds(sock, [data], [output_w, status_w, *extra])
                return status_r, attempt
            except OSError:
                os.close(status_r)
                self.close()
                if attempt:
                    raise
            finally:
                os.close(status_w)
        raise SandboxError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._socks is not None:
                for sock in self._socks:
                    sock.close()
                self._socks = None
            if self._proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=2)
                self._proc = None


_LAUNCHER = LauncherHandle()


def launcher() -> LauncherHandle:
    """This process's one handle on its launcher (a process: one per kernel)."""
    return _LAUNCHER


async def start_process(spec: RunSpec, output_fd: int | None = None) -> Process:
    """Start `spec` through the launcher.

    Output goes to `output_fd` when given (a log file; the caller keeps and
    closes its own copy), else to a new pipe whose non-blocking read end is
    `Process.output_fd` (the caller closes it).
    """
    if output_fd is None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # a system's lower limit keeps the default
            fcntl.fcntl(out_w, fcntl.F_SETPIPE_SZ, _OUTPUT_PIPE_BYTES)
    else:
        out_r, out_w = -1, output_fd
    ours: list[int] = []  # our ends of the stdin / stderr pipes, in the Process
    theirs: list[int] = []  # the command's ends, closed here once sent
    if spec.stdin:
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        ours.append(in_w)
        theirs.append(in_r)
    if spec.separate_stderr:
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        ours.append(err_r)
        theirs.append(err_w)
    try:
        status_r, _ = _LAUNCHER.start(spec, out_w, tuple(theirs))
    except BaseException:
        if out_r >= 0:
            os.close(out_r)
        for fd in ours:
            os.close(fd)
        raise
    finally:
        if out_r >= 0:
            os.close(out_w)
        for fd in theirs:
            os.close(fd)
    if out_r >= 0:
        os.set_blocking(out_r, False)
    os.set_blocking(status_r, False)
    proc = Process(out_r, status_r)
    for fd in ours:
        os.set_blocking(fd, False)
    if spec.stdin:
        proc.stdin_fd = ours.pop(0)
    if spec.separate_stderr:
        proc.stderr_fd = ours.pop(0)
    try:
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
            # that lands as the wait ends, and a cancelled start must raise (the tree
            # is stopped below before it does).
            async with asyncio.timeout(_START_WAIT):
                await proc.started()
        except TimeoutError:
            raise SandboxError(
                f"no sandbox supervisor took the command within {_START_WAIT:g} s "
                "(the launcher is stuck or cannot prepare one); it was not run"
            ) from None
    except asyncio.CancelledError:
        await _stop_interrupted(proc)
        _close_ends(proc)
        raise
    except BaseException:
        proc.abandon()
        _close_ends(proc)
        raise
    return proc


def _close_ends(proc: Process) -> None:
    """Close the caller's ends of a command that did not start."""
    for fd in (proc.output_fd, proc.stdin_fd, proc.stderr_fd):
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


async def _stop_interrupted(proc: Process) -> None:
    """End what a start cancelled while waiting for the pids started; return once it is gone.

    The request is already with the supervisor, which writes the pids and then
    lets the command run, so the command may be running now. Closing the status
    pipe would make the supervisor kill it, but later, after the caller had
    returned; instead the pids are read (the line is in flight) and the tree is
    stopped like any running command's: the caller returns when the report says
    it is gone. Every tool starting a command through `start_process` gets this.
    """
    reading = asyncio.ensure_future(proc.started())
    await _settle(reading, _STOP_WAIT)
    if reading.done() and not reading.cancelled() and reading.exception() is None:
        proc.kill()
        await _settle(proc._report(), _STOP_WAIT)
    else:  # no pids (the start failed, or the supervisor is stuck): the pipe's end stops it
        reading.cancel()
        proc.abandon()
