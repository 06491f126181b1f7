"""Restricted mode's kernel sandbox, and the launcher that runs every command.

Binding, chosen deliberately: **landlockpy 0.2** for Landlock. It speaks ABI
1-11 with best-effort masking, so one ruleset covers filesystem rights, TCP
bind/connect and scoping (abstract unix sockets, signals) on whatever kernel
runs. The PyPI ``landlock`` package has filesystem rules only (no network, no
scoping) and a stale-errno bug (NOTES.md), so it cannot meet "no TCP". What
Landlock does not stop (chmod/chown/utime/xattr, UDP/raw/MPTCP/netlink/unix
sockets, ``setsid``, ``ptrace``, namespaces, module loading) is closed with
**pyseccomp** over the system libseccomp, returning EPERM so the command
prints the kernel's own error (REQ-BASH-008).

Where it is applied: never in the kernel process. A single-threaded launcher
(``_sandbox_child.py``) is started once per kernel, lazily; it keeps a spare
subreaper supervisor with a pre-forked command process waiting, which
restricts itself and execs ``bash -c`` when a request comes. Measured here
(``tests/benchmarks/bench_sandbox.py``, interleaved, 2 shared cores): `true`
costs ~8 ms Unrestricted and ~10 ms Restricted against ~2.5 ms for a direct
``subprocess.run``, where a Python exec wrapper costs ~50 ms and
``preexec_fn`` is unsafe in the threaded kernel. Unrestricted commands use
the same launcher without restrictions, so cancel reaches ``setsid``'d
descendants in both modes (REQ-BED-005).

Restricted commands run with no capability but CAP_DAC_READ_SEARCH: as root,
CAP_SYS_ADMIN/CAP_PERFMON let a read of ``/proc/<pid>/environ`` bypass the
LSM ptrace check (``mm_access``), which exposed the kernel's API key even
under Landlock's ptrace scoping. The kernel process is left dumpable: making
it non-dumpable would not stop a capable root reader and would get in the way
of profilers (py-spy) and core dumps; the capability drop closes the read.

Availability is detected once (``detect_sandbox``, cached): Landlock ABI from
``landlock_create_ruleset(NULL, 0, VERSION)`` and libseccomp loadable. Setting
``PHOENIX_SANDBOX=off`` forces "unavailable" so the degraded path
(REQ-BASH-009) can be exercised on a machine that has Landlock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from phoenix_nb.tools.base import SandboxInfo

log = logging.getLogger(__name__)

# Landlock ABI needed: 4 brings TCP bind/connect rules; without it Restricted
# mode could not keep its "no network" promise.
MIN_ABI = 4
SANDBOX_ENV = "PHOENIX_SANDBOX"
_CHILD_SCRIPT = Path(__file__).with_name("_sandbox_child.py")

KERNEL_REQUIREMENT = (
    "Restricted mode needs the Linux Landlock LSM with network rules "
    f"(ABI {MIN_ABI}+, Linux 6.7 or newer, 'landlock' in the lsm= boot list) and libseccomp."
)


def _probe() -> SandboxInfo:
    if os.environ.get(SANDBOX_ENV, "").lower() in ("off", "0", "false", "no"):
        return SandboxInfo(False, 0, f"sandbox disabled by {SANDBOX_ENV}=off. {KERNEL_REQUIREMENT}")
    if not sys.platform.startswith("linux"):
        return SandboxInfo(False, 0, f"not Linux. {KERNEL_REQUIREMENT}")
    try:
        import landlockpy

        abi = landlockpy.abi_version()
    except Exception as exc:
        return SandboxInfo(False, 0, f"Landlock probe failed ({exc}). {KERNEL_REQUIREMENT}")
    if abi < MIN_ABI:
        why = "Landlock is not enabled" if abi == 0 else f"Landlock ABI {abi} has no network rules"
        return SandboxInfo(False, abi, f"{why}. {KERNEL_REQUIREMENT}")
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    except Exception as exc:
        return SandboxInfo(False, abi, f"libseccomp unavailable ({exc}). {KERNEL_REQUIREMENT}")
    return SandboxInfo(
        True,
        abi,
        f"Landlock ABI {abi}: read-only filesystem except a private TMPDIR, no TCP, "
        "scoped signals and abstract sockets; seccomp blocks other sockets, "
        "chmod/chown/utime/xattr, setsid and ptrace; rlimits on memory, CPU, file size.",
    )


@functools.cache
def detect_sandbox() -> SandboxInfo:
    """Detect once per process whether Restricted mode can be enforced (REQ-BASH-009)."""
    info = _probe()
    if not info.available:
        log.warning(
            "phoenix: kernel sandbox unavailable, Restricted mode disabled: %s", info.reason
        )
    return info


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of a Restricted command (REQ-BASH-008).

    Address space bounds a memory bomb per process; CPU time bounds a spinning
    process even if the wall-clock timeout were lost; file size bounds one
    file in TMPDIR; ``max_procs`` is RLIMIT_NPROC (ignored by the kernel for
    root) and the pids cgroup limit where one can be created.
    """

    address_space: int = 4 << 30
    file_size: int = 1 << 30
    max_procs: int = 1024
    cpu_seconds: int | None = None  # None: the command's timeout, rounded up, plus 5


@dataclass(frozen=True)
class RunSpec:
    """What the launcher should run."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    restricted: bool
    writable: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cpu_seconds: int = 3600
    linger: bool = False  # background: run until every descendant has exited

    def to_request(self) -> dict[str, Any]:
        rlimits: dict[str, int] = {"RLIMIT_CORE": 0}
        if self.restricted:
            rlimits |= {
                "RLIMIT_AS": self.limits.address_space,
                "RLIMIT_FSIZE": self.limits.file_size,
                "RLIMIT_NPROC": self.limits.max_procs,
                "RLIMIT_CPU": self.limits.cpu_seconds or self.cpu_seconds,
            }
        return {
            "argv": list(self.argv),
            "cwd": self.cwd,
            "env": dict(self.env),
            "restricted": self.restricted,
            "linger": self.linger,
            "writable": list(self.writable),
            "devices": list(self.devices),
            "rlimits": rlimits,
            "max_procs": self.limits.max_procs,
            "limits": asdict(self.limits),
        }


class SandboxError(RuntimeError):
    """The launcher could not be started or reached."""


class Process:
    """A command started by the launcher: its output fd and its supervisor.

    The caller owns `output_fd` (read end of the combined stdout/stderr pipe);
    `wait()` returns the exit report; `kill()` stops the whole tree.
    """

    def __init__(self, output_fd: int, status_fd: int) -> None:
        self.output_fd = output_fd
        self._status_fd = status_fd
        self._status_buf = b""
        self.supervisor_pid = 0
        self.pgid = 0  # the command's process group (its bash's pid)
        self._pidfd: int | None = None
        self.result: dict[str, Any] | None = None
        self._wait_task: asyncio.Future[dict[str, Any]] | None = None

    async def _read_line(self) -> bytes:
        loop = asyncio.get_running_loop()
        while b"\n" not in self._status_buf:
            chunk = await _read_some(loop, self._status_fd)
            if not chunk:
                line, self._status_buf = self._status_buf, b""
                return line
            self._status_buf += chunk
        line, _, self._status_buf = self._status_buf.partition(b"\n")
        return line

    async def started(self) -> None:
        self._parse_started(await self._read_line())

    def abandon(self) -> None:
        """Stop a command whose start was interrupted (cancel during `started`).

        The supervisor writes the pids before the command may run, so a line
        already in the pipe names what to kill now; closing the status pipe
        then makes the supervisor kill whatever it started (it watches for
        that), so nothing outlives an interrupted start.
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
            first = json.loads(line)
            self.supervisor_pid = int(first["pid"])
            self.pgid = int(first.get("pgid", 0))
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError(f"launcher gave no supervisor pid: {line!r}") from exc
        if self.supervisor_pid > 0:
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(self.supervisor_pid)

    async def wait(self) -> dict[str, Any]:
        """The exit report: {"exit": code|None, "signal": n|None, "killed": bool}.

        One task reads the report however many callers wait; cancelling a
        caller does not cancel the read.
        """
        if self._wait_task is None:
            self._wait_task = asyncio.ensure_future(self._read_report())
        return await asyncio.shield(self._wait_task)

    async def _read_report(self) -> dict[str, Any]:
        line = await self._read_line()
        try:
            self.result = json.loads(line)
        except ValueError:
            self.result = {"exit": None, "signal": None, "killed": True}
        self._close_status()
        return self.result

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
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


async def _read_some(loop: asyncio.AbstractEventLoop, fd: int, size: int = 65536) -> bytes:
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


class Launcher:
    """The kernel's handle on the launcher process; started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _ensure(self) -> socket.socket:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None and self._sock is not None:
                return self._sock
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", str(_CHILD_SCRIPT)],
                    stdin=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    env={
                        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                        "PHOENIX_LAUNCHER_FD": str(theirs.fileno()),
                    },
                )
            except OSError as exc:
                ours.close()
                raise SandboxError(f"cannot start the sandbox launcher: {exc}") from exc
            finally:
                theirs.close()
            self._sock = ours
            return ours

    def start(self, spec: RunSpec, output_w: int) -> tuple[int, int]:
        """Send one request; returns the status pipe's read end."""
        data = json.dumps(spec.to_request()).encode()
        for attempt in range(2):
            sock = self._ensure()
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            try:
                socket.send_fds(sock, [data], [output_w, status_w])
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
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=2)
                self._proc = None


_LAUNCHER = Launcher()


async def start_process(spec: RunSpec, output_fd: int | None = None) -> Process:
    """Start `spec` through the launcher.

    Output goes to `output_fd` when given (a log file; the caller keeps and
    closes its own copy), else to a new pipe whose non-blocking read end is
    `Process.output_fd` (the caller closes it).
    """
    if output_fd is None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
    else:
        out_r, out_w = -1, output_fd
    try:
        status_r, _ = _LAUNCHER.start(spec, out_w)
    except BaseException:
        if out_r >= 0:
            os.close(out_r)
        raise
    finally:
        if out_r >= 0:
            os.close(out_w)
    if out_r >= 0:
        os.set_blocking(out_r, False)
    os.set_blocking(status_r, False)
    proc = Process(out_r, status_r)
    try:
        await proc.started()
    except BaseException:
        proc.abandon()
        if out_r >= 0:
            os.close(out_r)
        raise
    return proc
