"""Run a function in a copy-on-write fork of the live kernel, confined, bounded, killable.

Why a fork: it is the only way to let code see every variable exactly as it
is now — a 4 GB DataFrame included — without copying or pickling it, and
without running anything in the kernel process. The child shares the
kernel's pages until it writes to them; whatever it changes dies with it.

What the child does before it runs anything of the job (order matters):

1. leaves the kernel's process group and session (`setsid`), so a kernel
   interrupt is not delivered to it and one `killpg` stops it and everything
   it started; asks for SIGKILL if the kernel's forking thread dies;
2. resets every signal handler to the default, unblocks all signals and
   removes the signal wakeup fd that `notebook/interrupt.py` installs in the
   kernel (docs/platform-facts.md: alarm-based timeouts otherwise stop working);
3. closes every inherited file descriptor except its own pipes: the kernel's
   ZMQ sockets, the event loop's epoll fd, the store's files are unreachable;
   fd 0 is /dev/null, fd 1 and 2 are pipes the kernel drains (bounded), so a C
   extension's output or a faulthandler trace reach the tool even if the
   child dies;
4. replaces `sys.stdout`/`sys.stderr` and lets the port reroute the kernel's
   display channels (`KernelPort.enter_child`): nothing is ever sent to the
   front end from a child;
5. replaces the environment with the same allowlisted one bash gets
   (`commands/environment.py`) and overwrites the process's initial environment
   block, which `/proc/self/environ` would still show, and makes every shared
   mapping private, whatever its protection (copy-on-write does not cover
   MAP_SHARED memory; `fork_memory.privatize_shared_mappings`);
6. for Restricted work, confines itself with the sandbox's documented entry
   point, `sandbox.confine_forked_child`, applying what the conversation's
   `CommandRunner` built in the kernel before the fork (`confine_fork`: the one
   recipe, shared with bash, keyword_search and MCP servers): the conversation's
   cgroup budget, fresh user/network/IPC/mount/PID namespaces (it forks once
   more: the process the kernel forked becomes a silent intermediate and the
   job runs as PID 1 of the new namespace), a capped tmpfs TMPDIR, credential
   paths hidden, rlimits, no capabilities, Landlock and seccomp — what a
   Restricted bash command gets. If any of it fails the job does not run.
   The address-space rlimit is the kernel's own size plus the sandbox's
   allowance: a fork already maps everything the kernel maps. Unconfined
   forks (summaries where no sandbox exists) get rlimits only;
7. overwrites, in its own memory, every value it must not show — the
   `SecretValues` the caller passes: provider keys, the kernel's session key
   and connection info, withheld environment values, secret-named variables
   and their copies in the history — and the port drops its references to
   the session's key (`fork_memory.scrub_secrets`, `KernelPort.enter_child`).
   Last, in the process that runs the job, after confinement: nothing of the
   sandbox's own set-up (hidden paths, the environment it installs) is
   starred, and nothing runs between the scrub and the job.

Fork copies one thread. Locks other kernel threads held at the instant of the
fork stay held in the child; the child therefore only runs its job and writes
to its own pipes (never to the kernel's logging, ZMQ or IOPub machinery).
Code that needs another thread's lock, or a GPU context (CUDA does not
survive fork), hangs or fails in the child: the timeout kills it and the
tool says so. Cancel and timeout SIGKILL the child's process group at once and
reap the child; measured well within 100 ms (tests/tools/kernel/test_fork.py).

The job writes JSON lines to its result pipe as it goes, so a child killed
half-way still leaves the results it finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import gc
import io
import json
import logging
import math
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phoenix_nb import sandbox
from phoenix_nb.commands import CommandRunner, ForkConfinement
from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.sandbox import (
    numeric_buffers,
    privatize_shared_mappings,
    remove_tree,
    scrub_secrets,
)
from phoenix_nb.tools.kernel_port import KernelPort

log = logging.getLogger(__name__)

_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_EXIT_JOB_FAILED = 70
_EXIT_CONFINE_FAILED = 71

DONE = b'{"__phoenix_fork_done__":true}\n'
_SCRUB_KEY = "__phoenix_fork_scrub__"
Emit = Callable[[Mapping[str, Any]], None]
Job = Callable[[Emit, "ChildSink"], None]


@dataclass(frozen=True)
class ForkLimits:
    """Bounds of one fork: wall clock, what may come back, what it may use."""

    timeout: float = 30.0
    max_result_bytes: int = 16 << 20  # JSON lines from the job (images included)
    stream_head: int = 24 << 10  # stdout/stderr kept: head …
    stream_tail: int = 8 << 10  # … and tail
    extra_address_space: int = 4 << 30  # on top of the kernel's own mappings
    file_size: int = 1 << 30


@dataclass
class ForkOutcome:
    """How the child ended and what it sent."""

    records: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    result_truncated: bool = False
    completed: bool = False  # the job returned (its DONE line arrived)
    limits_hit: list[str] = field(default_factory=list)  # cgroup budgets the fork ran into
    elapsed: float = 0.0
    scrub: dict[str, Any] | None = None  # what the memory scrub did (when asked to report)

    @property
    def crashed(self) -> bool:
        return not self.timed_out and (self.signal is not None or self.exit_code not in (0, None))

    def failure(self) -> str | None:
        """A sentence for the model when the child did not end normally, else None."""
        if self.timed_out:
            return None
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            why = {
                "SIGSEGV": "a segmentation fault",
                "SIGBUS": "a bus error",
                "SIGABRT": "an abort",
                "SIGKILL": "being killed (out of memory or a limit)",
                "SIGXCPU": "its CPU time limit",
                "SIGXFSZ": "its file size limit",
            }.get(name, name)
            hit = (
                f"; it reached the sandbox's {' and '.join(self.limits_hit)} limit"
                if (self.limits_hit)
                else ""
            )
            return f"the forked process died of {why} ({name}){hit}"
        if self.exit_code == _EXIT_CONFINE_FAILED:
            return "the sandbox could not be applied to the forked process, so nothing ran"
        if self.exit_code not in (0, None):
            return f"the forked process exited with status {self.exit_code} before finishing"
        return None


class _Bounded:
    """Head and tail of a byte stream in bounded memory, with the cut counted."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if omitted <= 0:
            return head + tail
        return f"{head}\n… {omitted:,} bytes omitted …\n{tail}"


# ------------------------------------------------------------------------ confinement


def sandbox_ready() -> bool:
    """Whether forks can be confined here (Restricted mode's pieces exist)."""
    return sandbox.detect_sandbox().available


# ------------------------------------------------------------------------------ child


class ChildSink:
    """The child's view of its own output: text streams and captured displays."""

    def __init__(self, out: io.TextIOBase, err: io.TextIOBase) -> None:
        self.out, self.err = out, err
        self.displays: list[dict[str, Any]] = []

    def write(self, stream: str, text: str) -> None:
        (self.err if stream == "stderr" else self.out).write(text)

    def display(self, data: Mapping[str, Any]) -> None:
        if len(self.displays) < 64:
            self.displays.append(dict(data))


def _text_stream(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )


def _wipe_initial_environment() -> None:
    """Zero the environment block the kernel was started with (seen in /proc/self/environ)."""
    try:
        fields = Path("/proc/self/stat").read_bytes().rsplit(b")", 1)[1].split()
        # Fields after the command name start at field 3; env_start/env_end are 50 and 51.
        start, end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return
    if 0 < start < end and end - start < (1 << 24):
        ctypes.memset(start, 0, end - start)


def _own_rlimits(limits: ForkLimits) -> None:
    """Rlimits of an unconfined fork: no core dumps, CPU, file size, address space."""
    vsize = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    for which, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, math.ceil(limits.timeout) + 2),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_AS, vsize + limits.extra_address_space),
    ):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def _scrub_line(report: Any) -> bytes:
    fields = dataclasses.asdict(report)
    return (json.dumps({_SCRUB_KEY: fields}) + "\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _child(
    job: Job,
    port: KernelPort | None,
    pipes: tuple[int, int, int],
    env: Mapping[str, str],
    cwd: str,
    tmpdir: str,
    confined: ForkConfinement | None,
    limits: ForkLimits,
    memory_forms: tuple[tuple[bytes, bytes], ...],
    report_scrub: bool,
) -> None:
    """Runs in the forked child; never returns."""
    result_w, out_w, err_w = pipes
    code = _EXIT_JOB_FAILED
    try:
        os.setsid()
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        for sig in signal.valid_signals():
            if sig in (signal.SIGKILL, signal.SIGSTOP):
                continue
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe is an error, not a death
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        keep = sorted({0, 1, 2, result_w})
        low = 3
        for fd in keep:
            if fd >= low:
                os.closerange(low, fd)
                low = fd + 1
        os.closerange(low, 1 << 20)
        out, err = _text_stream(1), _text_stream(2)
        sink = ChildSink(out, err)
        if port is not None:
            port.enter_child(sink)  # first: the port still sees the kernel's own streams
        sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the child
        sys.stdout = out
        sys.stderr = err
        setattr(sys, "__stdout__", out)  # noqa: B010 - Final in typeshed, a plain attribute here
        setattr(sys, "__stderr__", err)  # noqa: B010
        # The kernel's running loop is not running here: asyncio forgets it in a
        # forked child (by pid on 3.11, by an at-fork hook from 3.12), so a job may
        # call asyncio.run (tests/tools/kernel/test_fork.py).
        gc.freeze()  # leave the kernel's objects untouched: no collection walks them
        privatize_shared_mappings()  # before confinement: files are still all reachable
        tempfile.tempdir = tmpdir
        pagemap: int | None = None  # the confined process's own, opened while it may
        if confined is not None:
            code = _EXIT_CONFINE_FAILED
            pagemap = sandbox.confine_forked_child(
                confined.policy
            )  # forks: PID 1 of the new namespaces
            code = _EXIT_JOB_FAILED
        else:
            os.environ.clear()
            os.environ.update(env)
            _own_rlimits(limits)
        os.chdir(cwd)
        _wipe_initial_environment()
        if memory_forms:
            namespace = port.user_namespace() if port is not None else {}
            report = scrub_secrets(memory_forms, numeric_buffers(namespace), pagemap)
            del namespace
            if report_scrub:
                _write_all(result_w, _scrub_line(report))
        elif pagemap is not None:
            os.close(pagemap)

        def emit(record: Mapping[str, Any]) -> None:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
            _write_all(result_w, line.encode("utf-8", "backslashreplace"))

        job(emit, sink)
        sys.stdout.flush()
        sys.stderr.flush()
        _write_all(result_w, DONE)  # after every output byte: the parent may stop reading here
        code = 0
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            what = "sandbox" if code == _EXIT_CONFINE_FAILED else "job"
            os.write(2, f"phoenix fork: {what} failed: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(code)


# ----------------------------------------------------------------------------- parent


def _dead(pid: int) -> tuple[int | None, int | None] | None:
    """(exit code, signal) once the child is reaped, None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return (None, None)
    if done == 0:
        return None
    if os.WIFSIGNALED(status):
        return (None, os.WTERMSIG(status))
    return (os.waitstatus_to_exitcode(status), None)


# The sandbox's intermediate process relays its child's death by a signal as
# exit status (256 - signal) & 0xFF; these are the deaths worth naming.
_FATAL = frozenset(
    int(s)
    for s in (
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGABRT,
        signal.SIGKILL,
        signal.SIGXCPU,
        signal.SIGXFSZ,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGSYS,
        signal.SIGTERM,
    )
)


def _relayed(code: int | None, sig: int | None) -> tuple[int | None, int | None]:
    if sig is None and code is not None and code > 128 and (256 - code) in _FATAL:
        return None, 256 - code
    return code, sig


def _kill(pid: int, pidfd: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)  # the child and all it started (they cannot setsid)
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # in case setsid had not run yet


def _reap_later(
    loop: asyncio.AbstractEventLoop, pid: int, pidfd: int, then: Callable[[], None]
) -> None:
    """Reap a killed child whenever it exits, then clean up; nobody awaits this."""

    def reap() -> None:
        if _dead(pid) is not None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            then()

    try:
        loop.add_reader(pidfd, reap)
    except (RuntimeError, ValueError, OSError):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(pidfd)
        then()


async def run_in_fork(
    job: Job,
    *,
    port: KernelPort | None,
    env: Mapping[str, str],
    cwd: str | Path,
    confine: CommandRunner | None,
    limits: ForkLimits | None = None,
    secrets: SecretValues | None = None,
    report_scrub: bool = False,
) -> ForkOutcome:
    """Fork the kernel, run `job(emit, sink)` in the child, collect what it emitted.

    `confine`: the conversation's `CommandRunner`, which builds the fork's
    confinement (`CommandRunner.confine_fork`: its policy, hidden paths, limits,
    cgroup budget) as it builds a Restricted command's; None: an unconfined fork
    (rlimits only, for summaries where no sandbox exists).

    `secrets`: the values the child overwrites in its memory before the job
    (see the module docstring, step 7). `report_scrub`: the child reports
    what the scrub did as `ForkOutcome.scrub` (benchmarks and tests).

    A fork whose confinement failed ran nothing, so it is tried once more:
    the one failure seen here is a cgroup removed between its creation and
    the child joining it (another kernel's launcher sweeping "stale" groups).
    """
    forms = secrets.memory_forms() if secrets else ()
    run = (job, port, env, cwd, confine, limits, forms, report_scrub)
    outcome = await _run_once(*run)
    if confine is not None and outcome.exit_code == _EXIT_CONFINE_FAILED and not outcome.records:
        log.warning("phoenix: confining a fork failed, retrying once: %s", outcome.stderr.strip())
        outcome = await _run_once(*run)
    return outcome


async def _run_once(
    job: Job,
    port: KernelPort | None,
    env: Mapping[str, str],
    cwd: str | Path,
    confine: CommandRunner | None,
    limits: ForkLimits | None,
    memory_forms: tuple[tuple[bytes, bytes], ...] = (),
    report_scrub: bool = False,
) -> ForkOutcome:
    """One fork (see `run_in_fork`).

    A `confine` runner requires the sandbox (`sandbox_ready()`; raises
    `sandbox.SandboxError` otherwise); the fork then counts against the
    conversation's cgroup budget. Cancelling the awaiting task kills the
    child's process group and reaps it before CancelledError propagates.

    A job that finishes writes a last line (`DONE`) after all its output: the
    caller gets its answer then, without waiting for the namespaces to be torn
    down; the fork is killed, reaped and cleaned up (cgroup, TMPDIR) in the
    background.
    """
    limits = limits or ForkLimits()
    loop = asyncio.get_running_loop()
    confined: ForkConfinement | None = None
    if confine is not None:
        tmpdir = tempfile.mkdtemp(prefix="py-", dir=sandbox.run_dir())
        try:
            cpu = math.ceil(limits.timeout) + 2
            confined = confine.confine_fork(str(cwd), env, tmpdir, cpu)
        except BaseException:
            remove_tree(tmpdir)
            raise
        env = confined.policy.env
    else:
        # In the kernel's run dir too: a fork still running when the loop closes
        # is never cleaned up here, and the launcher sweeps a gone kernel's run dir.
        tmpdir = tempfile.mkdtemp(prefix="py-", dir=sandbox.run_dir())
        env = {**env, "TMPDIR": tmpdir}

    def clean_up() -> None:
        if confined is not None:
            confined.release()
        remove_tree(tmpdir)

    result_r, result_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    started = time.monotonic()
    try:
        pid = os.fork()
    except BaseException:
        for fd in (result_r, result_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        clean_up()
        raise
    if pid == 0:  # pragma: no cover - the child never returns
        _child(
            job,
            port,
            (result_w, out_w, err_w),
            env,
            str(cwd),
            tmpdir,
            confined,
            limits,
            memory_forms,
            report_scrub,
        )
    for fd in (result_w, out_w, err_w):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    outcome = ForkOutcome()
    result = _Bounded(limits.max_result_bytes, 0)
    streams = {
        out_r: _Bounded(limits.stream_head, limits.stream_tail),
        err_r: _Bounded(limits.stream_head, limits.stream_tail),
        result_r: result,
    }
    open_fds = set(streams)
    finished = loop.create_future()  # DONE seen, or every pipe closed

    def finish() -> None:
        if not finished.done():
            finished.set_result(None)

    def drain(fd: int) -> bool:
        """Read what is there; False at end of file."""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                return False
            streams[fd].feed(chunk)
            if fd == result_r:
                if result.total > limits.max_result_bytes:
                    outcome.result_truncated = True
                    _kill(pid, pidfd)
                elif result.head.endswith(DONE):
                    outcome.completed = True
                    finish()

    def on_readable(fd: int) -> None:
        if not drain(fd):
            loop.remove_reader(fd)
            open_fds.discard(fd)
            if not open_fds:
                finish()

    for fd in streams:
        os.set_blocking(fd, False)
        loop.add_reader(fd, on_readable, fd)
    reaped = False
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                await asyncio.shield(finished)
        except TimeoutError:
            outcome.timed_out = True
        if outcome.completed:
            for fd in list(open_fds):
                drain(fd)  # output written before DONE is in the pipes already
            outcome.exit_code = 0
        _kill(pid, pidfd)
        if not outcome.completed:
            # Crashed, exited early, timed out or too much output: wait for its status.
            exited = loop.create_future()

            def on_exit() -> None:
                if not exited.done():
                    exited.set_result(None)

            loop.add_reader(pidfd, on_exit)
            try:
                async with asyncio.timeout(5):
                    await asyncio.shield(exited)
            finally:
                loop.remove_reader(pidfd)
            for fd in list(open_fds):
                drain(fd)
            status = _dead(pid)
            reaped = status is not None
            if status is not None:
                code, sig = _relayed(*status) if confined is not None else status
                outcome.exit_code, outcome.signal = code, sig
                if outcome.timed_out and sig == signal.SIGKILL:
                    outcome.signal = None  # our own kill, reported as the timeout
    except BaseException:
        _kill(pid, pidfd)  # cancelled: the group dies now
        raise
    finally:
        for fd in list(open_fds):
            loop.remove_reader(fd)
        for fd in streams:
            os.close(fd)
        if reaped:
            os.close(pidfd)
            if confined is not None:
                outcome.limits_hit = confined.limits_hit()
            clean_up()
        else:
            _reap_later(loop, pid, pidfd, clean_up)
        outcome.elapsed = time.monotonic() - started
    outcome.stdout = streams[out_r].text()
    outcome.stderr = streams[err_r].text()
    records = _parse_records(bytes(result.head))
    for record in records:
        if _SCRUB_KEY in record and outcome.scrub is None:
            outcome.scrub = dict(record[_SCRUB_KEY])
    outcome.records = [r for r in records if _SCRUB_KEY not in r]
    return outcome


def _parse_records(data: bytes) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if isinstance(value, dict) and "__phoenix_fork_done__" not in value:
            records.append(value)
    return records
