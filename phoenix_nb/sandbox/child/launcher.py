"""The launcher process: a small single-threaded process that starts commands.

Why a separate process: the Jupyter kernel is multi-threaded, so forking it to
run Python between fork and exec (``preexec_fn``) is unsafe, ``unshare
(CLONE_NEWUSER)`` refuses a threaded caller, and an exec wrapper pays Python
start-up (~50 ms) on every command. This launcher is started once per kernel
(lazily, by ``sandbox.launcher_client.LauncherHandle``), pays start-up once,
probes the host once
(namespaces, Landlock ABI, cgroups), prepares the seccomp BPF and Landlock
masks once, and then only forks.

Two sockets from the kernel: one for Unrestricted requests, one for
Restricted. For each it keeps ``SPARES`` *spare supervisors* forked ahead of
time, each a child subreaper (PR_SET_CHILD_SUBREAPER) with its command side
prepared; each serves exactly one request (the socket hands a message to one
waiting reader), then the launcher forks its replacement once that request's
command is over (see ``serve``: preparing it meanwhile took CPU from the
command). Two, not one, so that calls in quick succession (a search tool's
passes, a benchmark's rounds) each find one ready while the one taken before
is still being replaced: a spare is prepared at low priority and, on a loaded
machine, can take longer than the gap between two commands.

* Unrestricted: one pre-forked command process in its own process group.
* Restricted: the process that will become the command's PID 1 has already
  been created in fresh user, network (loopback up), IPC, mount and PID
  namespaces, with its own /proc mounted and every mount made read-only
  (``confine.make_read_only``: writes and truncation fail with EROFS before
  Landlock is asked, so its ruleset need not handle truncation, which made the
  kernel walk every opened file's path up to "/"); the id maps are written by the
  spare from outside (a root launcher maps every id but ``HIDDEN_ID``). All of
  that (~3-6 ms) happens while the kernel is idle, off the path a tool call
  waits on. Where namespaces are unavailable, the spare prepares the plain
  command process and seccomp closes what the namespaces would have.

On a request the spare tells the launcher (which forks the next spare),
places the command side in the request's cgroup (one budget per
conversation), hands it the request, and supervises. The Restricted PID 1
mounts the size-capped tmpfs on TMPDIR and /dev/shm, binds unreadable
placeholders over the hidden credential paths, forks the command, which
sets rlimits, drops capabilities, applies Landlock and seccomp to itself and
execs ``bash -c``; PID 1 reaps, and when the command ends (or, for a
background job, when its last process does) kills whatever is left, reports
and exits, which tears the whole namespace down. Killing PID 1 from outside
(cancel, timeout) ends every process in the namespace in one syscall.

Background jobs write into a pipe; the supervisor (never the job) appends
that to the log file, so a job cannot truncate or rewrite its own log.

Protocol (SOCK_SEQPACKET): the launcher first sends one JSON message on the
Restricted socket describing the host (``hello``). Each request is one JSON
message with two file descriptors attached: the command's output and a
status pipe. The supervisor writes JSON lines to the status pipe: first
``{"pid": <supervisor>, "pgid": <group to kill>, "tmpdir": path}`` (before the
command may run), at the end ``{"exit", "signal", "killed", "limits": [...]}``.
Both sides use the same types (``sandbox/protocol.py``, standard library only,
loaded here by path): the spare parses each request once into a ``Request`` (a
malformed one is refused, and the caller reads why on its status pipe), and the
kernel side parses the answers once (``Hello``, ``Started``, ``ExitReport``).
The caller stops a command by SIGKILLing its process group and sending SIGTERM
to the supervisor; a caller that closes the status pipe early gets the same.

This file is run as a script (``python -I child/launcher.py``); it loads its
sibling modules ``confine``, ``cgroup`` and ``cleanup`` and the sandbox's
``protocol`` by file path and never imports the phoenix_nb package (an
import-linter contract holds the whole ``child`` package to the standard library
plus pyseccomp and landlockpy).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: at run time it is loaded by path, below
    from phoenix_nb.sandbox.protocol import Request


def _load(name: str, parent: bool = False) -> ModuleType:
    """A sibling module (``parent``: one of the sandbox package, beside ``child/``)."""
    if __package__:  # imported as phoenix_nb.sandbox.child.launcher (kernel side)
        package = __package__.rpartition(".")[0] if parent else __package__
        return importlib.import_module(f"{package}.{name}")
    full = f"_phoenix_{name}"
    if full in sys.modules:
        return sys.modules[full]
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        full, os.path.join(os.path.dirname(here) if parent else here, f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


confine: Any = _load("confine")
cgroups: Any = _load("cgroup")
cleanup: Any = _load("cleanup")
# The wire types, shared with the kernel (``sandbox/protocol.py``, standard library only).
protocol: Any = _load("protocol", parent=True)

_SWEEP_WAIT = 0.01  # seconds between kill rounds while killed processes exit
SPARES = 2  # spare supervisors kept ready per socket
_SETUP_TIMEOUT = 10.0  # seconds a spare waits for its namespaces to be ready


# ------------------------------------------------------------------ host plan


@dataclass(frozen=True)
class Restrictions:
    """Everything Restricted mode applies, prepared once per launcher."""

    landlock: Any  # confine.LandlockPlan
    seccomp: Any  # confine.CompiledFilter
    last_cap: int
    namespaces: Any = None  # confine.NamespacePlan
    cgroups: Any = None  # cgroup.CgroupSetup
    run_dir: str = ""
    placeholders: tuple[str, str] = ("", "")
    seccomp_profile: Any = None

    def hello(self) -> dict[str, Any]:
        ns = self.namespaces
        return {
            "landlock_abi": self.landlock.abi,
            "tcp_rules": bool(self.landlock.handled_net),
            "scoped": self.landlock.scoped,
            "userns": bool(ns and ns.user),
            "namespaces": bool(ns and ns.flags),
            "proc": bool(ns and ns.proc),
            "namespaces_why_not": ns.why_not if ns else "",
            "cgroup": self.cgroups.version if self.cgroups else 0,
            "cgroup_why_not": self.cgroups.why_not if self.cgroups else "",
            "hiding": bool(ns and ns.flags and self.placeholders[0]),
        }


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def prepare_restrictions(probe: bool = False) -> Restrictions | None:
    """Build what every Restricted command needs, once; None if impossible.

    ``probe``: also find which namespaces and cgroups this host allows (the
    launcher does; a caller that only needs the pieces does not).
    """
    try:
        abi = confine.landlock_abi()
        if abi < 1:
            raise OSError("Landlock is not enabled")
        cap = _env_int("PHOENIX_LANDLOCK_ABI")
        if cap is not None:
            abi = max(1, min(abi, cap))
        namespaces = (
            confine.probe_namespaces(
                os.environ.get("PHOENIX_SANDBOX_NAMESPACES", "").lower() in ("off", "0", "no")
            )
            if probe
            else confine.NamespacePlan()
        )
        profile = confine.SeccompProfile(
            netns=namespaces.net, ipcns=namespaces.net, truncate=abi < 3
        )
        plan = confine.LandlockPlan.build(abi, tcp_rules=not namespaces.net)
        run_dir = os.environ.get("PHOENIX_RUN_DIR", "")
        placeholders: tuple[str, str] = ("", "")
        setup = cgroups.CgroupSetup(why_not="not probed")
        if probe:
            owner = os.environ.get("PHOENIX_OWNER", str(os.getppid()))
            setup = cgroups.detect(owner)
            if run_dir:
                placeholders = confine.make_placeholders(os.path.join(run_dir, "hide"))
        return Restrictions(
            plan,
            confine.compile_seccomp_filter(profile),
            confine.last_cap(),
            namespaces,
            setup,
            run_dir,
            placeholders,
            profile,
        )
    except Exception as exc:
        sys.stderr.write(f"phoenix sandbox: Restricted mode unavailable: {exc}\n")
        return None


# ------------------------------------------------------------------ killing


def _descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from /proc (no cgroups needed)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _has_children() -> bool:
    """Whether anything is left: a subreaper with no child has no descendant."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def kill_tree(me: int, pgid: int | None, group: Any = None) -> None:
    """SIGKILL every descendant until none is left.

    Cheapest first: the process group (for a Restricted command that is its
    PID 1, whose death ends the whole namespace), the cgroup's member list
    (escape-proof), and only then a /proc scan for children of ours. Killed
    processes' children are re-parented to us (subreaper), so repeating
    converges even for a fork bomb. Between rounds it waits for SIGCHLD
    (bounded) so killed processes get the CPU to exit.
    """
    if pgid:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    if group is not None:
        _kill_all(group.members())
    _reap()
    while _has_children():
        pids = (group.members() if group is not None else []) or _descendants(me)
        if not pids:
            break
        _kill_all(pids)
        signal.sigtimedwait([signal.SIGCHLD], _SWEEP_WAIT)
        _reap()
    _reap()


# ------------------------------------------------------------------ the command


def _exec_command(
    req: Request,
    out_fd: int,
    restrictions: Restrictions | None,
    tmpdir: str | None,
    read_only: bool = False,
    extra: Sequence[int] = (),
) -> None:
    """Runs in the command process: set up, restrict self, exec. Never returns.

    stdout (and stderr, unless the request discards it) go to `out_fd`; a failure
    to start is written to stdout, so the caller reads why even when stderr is discarded.
    ``extra``: the caller's own stdin pipe (``req.stdin``) and then its own stderr
    pipe (``req.separate_stderr``), in that order, for a long-lived server that
    speaks a protocol on stdin/stdout (MCP); otherwise stdin is /dev/null.
    ``read_only``: every mount but the command's own TMPDIR and /dev/shm is
    read-only (``confine.make_read_only``), so truncation is the mounts' to refuse
    and Landlock's walk may stop at the working directory (``without_truncate``).
    """
    try:
        given = list(extra)
        stdin_fd = given.pop(0) if req.stdin and given else None
        stderr_fd = given.pop(0) if req.separate_stderr and given else None
        os.dup2(stdin_fd if stdin_fd is not None else os.open("/dev/null", os.O_RDONLY), 0)
        os.dup2(out_fd, 1)
        if stderr_fd is not None:
            os.dup2(stderr_fd, 2)
        elif req.discard_stderr:
            os.dup2(os.open("/dev/null", os.O_WRONLY), 2)
        else:
            os.dup2(out_fd, 2)
        os.closerange(3, 65536)
        if not req.restricted:
            os.chdir(req.cwd)
        for name, value in req.rlimits.items():
            limit = getattr(resource, name)
            resource.setrlimit(limit, (value, value))
        for sig in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        env = dict(req.env)
        if req.restricted:
            if restrictions is None:
                raise RuntimeError("seccomp is unavailable")
            ns = restrictions.namespaces
            writable = list(req.writable)
            if tmpdir:
                writable.append(tmpdir)
                env["TMPDIR"] = tmpdir
            if ns is not None and ns.flags:
                writable.append("/dev/shm")
            # CAP_DAC_READ_SEARCH keeps "read everywhere" for a root notebook; a
            # non-root one never had it (and inside its user namespace it would
            # open the placeholders it owns). Root without a user namespace
            # drops it too, so the placeholders stay closed.
            root = os.geteuid() == 0
            keep = (
                confine.CAP_DAC_READ_SEARCH
                if root and (ns is None or not ns.flags or ns.user)
                else None
            )
            confine.drop_capabilities(restrictions.last_cap, keep)
            # Only now: an ordinary user's placeholders over hidden folders are its
            # own (it cannot give them away), and with its namespace's capabilities
            # it could still have entered one as its working directory.
            os.chdir(req.cwd)
            plan = restrictions.landlock
            seccomp = restrictions.seccomp
            if req.network and not (ns is not None and ns.net):
                # The network grant without namespaces: the host's network is the
                # only one, so inet sockets (seccomp) and TCP (Landlock) are allowed.
                # Compiled here, once per granted command (an MCP server's start).
                plan = replace(plan, handled_net=0)
                profile = replace(restrictions.seccomp_profile, netns=True)
                seccomp = confine.compile_seccomp_filter(profile)
            if read_only:
                plan = plan.without_truncate()
                confine.apply_landlock(plan, writable, list(req.devices), near=[req.cwd])
            else:
                confine.apply_landlock(plan, writable, list(req.devices))
            seccomp.load()
        os.execve(req.argv[0], req.argv, env)
    except BaseException as exc:
        try:
            os.write(1, f"phoenix sandbox: cannot start command: {exc}\n".encode())
        finally:
            os._exit(126)


def _recv_request(chan: socket.socket, nfds: int) -> tuple[Request, list[int]]:
    """The request the supervisor passes on (it parsed it already: `spare`)."""
    data, fds, _flags, _addr = socket.recv_fds(chan, 1 << 20, nfds)
    if not data:
        os._exit(0)  # the supervisor went away without a request
    return protocol.Request.parse(data), fds


def _plain_command(chan: socket.socket, restrictions: Restrictions | None, tmpdir: str) -> None:
    """A pre-forked command process without namespaces: own group, then wait for work."""
    try:
        os.setpgid(0, 0)
        req, fds = _recv_request(chan, 3)
        if not fds:
            os._exit(126)
    except BaseException:
        os._exit(126)
    _exec_command(req, fds[0], restrictions, tmpdir if req.restricted else None, extra=fds[1:])


def _namespaced_side(
    chan: socket.socket, restrictions: Restrictions, tmpdir: str, flags: int | None = None
) -> None:
    """Runs in the spare's child: enter the namespaces, make PID 1, leave. Never returns.

    ``flags``: the namespaces to enter (default: the host plan's); a request with
    the ``network`` grant gets them without CLONE_NEWNET, the host's network.
    """
    ns = restrictions.namespaces
    flags = ns.flags if flags is None else flags
    try:
        if ns.user:
            # The spare writes this process's id maps from outside, and the /proc
            # files of a non-dumpable process (the launcher is one) belong to the
            # host's root: a non-root spare got EACCES there, and the set-up hung.
            # Dumpable only until the maps are written: this is a fork of the
            # launcher (nothing secret in it), and nothing runs in it meanwhile.
            confine.prctl(confine.PR_SET_DUMPABLE, 1)
        confine.unshare((confine.CLONE_NEWUSER if ns.user else 0) | flags)
        chan.send(b"U")
        if chan.recv(16) != b"M":
            os._exit(126)
        confine.prctl(confine.PR_SET_DUMPABLE, 0)
        confine.make_mounts_private()
        if flags & confine.CLONE_NEWNET:
            confine.loopback_up()
        init = os.fork()
        if init == 0:
            _namespace_init(chan, restrictions, tmpdir)
        chan.send(str(init).encode())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            chan.send(f"E{exc}".encode())
    os._exit(0)


def _namespace_init(chan: socket.socket, restrictions: Restrictions, tmpdir: str) -> None:
    """PID 1 of a Restricted command's namespace. Never returns.

    Forks the command process ahead of the request too (it takes the request
    itself), then reaps everything, ends the namespace when the command ends
    (or, for a background job, when nothing is left), and tells the
    supervisor how the command ended and whether TMPDIR filled up.
    """
    code = 126
    try:
        os.setpgid(0, 0)
        confine.prctl(confine.PR_SET_DUMPABLE, 0)
        if restrictions.namespaces.proc:
            confine.mount_proc()
        try:
            confine.make_read_only("/")  # before the command's own writable mounts
            read_only = True
        except OSError:
            read_only = False  # Landlock then refuses truncation itself
        ctl_r, ctl_w = os.pipe()
        command = os.fork()
        if command == 0:
            os.close(ctl_r)
            _namespace_command(chan, ctl_w, restrictions, tmpdir, read_only)
        os.close(ctl_w)
        # Only now may the supervisor place us in a cgroup: a budget that is
        # full at this moment must not stop the command process being forked.
        chan.send(b"R")
        with os.fdopen(ctl_r, "rb") as ctl:
            started = ctl.read()
        if not started:
            os._exit(0)  # no request came (the supervisor went away)
        confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
        told = json.loads(started)
        linger = told.get("linger", False)
        confine.drop_capabilities(restrictions.last_cap, None)
        exit_code: int | None = None
        exit_signal: int | None = None
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == command:
                if os.WIFEXITED(status):
                    exit_code = os.WEXITSTATUS(status)
                elif os.WIFSIGNALED(status):
                    exit_signal = os.WTERMSIG(status)
                if not linger:
                    with contextlib.suppress(OSError):
                        os.kill(-1, signal.SIGKILL)  # all but PID 1 in this namespace
        full = []
        with contextlib.suppress(OSError):
            st = os.statvfs(tmpdir)
            if st.f_bavail * st.f_frsize < 64 * 1024:
                full.append("tmp_bytes")
            if st.f_favail < 2:
                full.append("tmp_inodes")
        report = {"exit": exit_code, "signal": exit_signal, "limits": full}
        if told.get("refused"):
            report["refused"] = told["refused"]
        chan.send(json.dumps(report).encode())
        # Exiting now would tear the namespaces down (its mounts, the network)
        # on the CPU the supervisor was just woken on, ahead of its report to the
        # caller (~0.7 ms); the supervisor kills this process right after the report
        # (or its end of the channel closes first).
        with contextlib.suppress(OSError):
            chan.recv(1)
        code = 0
    except BaseException as exc:
        with contextlib.suppress(OSError):
            chan.send(json.dumps({"error": str(exc)}).encode())
    os._exit(code)


def _namespace_command(
    chan: socket.socket, ctl_w: int, restrictions: Restrictions, tmpdir: str, read_only: bool
) -> None:
    """The command process inside the namespaces, forked ahead. Never returns.

    Takes the request, mounts the capped tmpfs on TMPDIR and /dev/shm and the
    placeholders over the hidden paths (still holding the namespace's
    capabilities), tells PID 1 whether this is a background job, and execs.
    """
    req, fds = _recv_request(chan, 3)
    out_fd = fds[0]
    try:
        size, inodes = req.tmp_bytes, req.tmp_inodes
        confine.mount_tmpfs(tmpdir, size, inodes)
        confine.mount_tmpfs("/dev/shm", size, inodes)
        # Write grants: after the read-only remount, before the placeholders (a
        # hidden path below a granted one stays hidden).
        for path in req.writable:
            confine.bind_writable(path)
        if restrictions.placeholders[0]:
            failed = confine.hide_paths(list(req.hidden), restrictions.placeholders)
            if failed:
                raise OSError(f"could not hide {failed}")
    except BaseException as exc:
        why = (
            "the command's private TMPDIR, /dev/shm, writable or hidden paths could not be "
            f"mounted ({exc})"
        )
        with contextlib.suppress(OSError):
            os.write(out_fd, f"phoenix sandbox: {why}; it was not run\n".encode())
            os.write(ctl_w, json.dumps({"linger": False, "refused": why}).encode())
        os._exit(126)
    os.write(ctl_w, json.dumps({"linger": req.linger}).encode())
    os.close(ctl_w)
    chan.close()
    _exec_command(req, out_fd, restrictions, tmpdir, read_only, extra=fds[1:])


# ------------------------------------------------------------------ supervisor


def _wait_command(
    pid: int, status_fd: int, abandon: Any, pump: Any = None, report_fd: int | None = None
) -> str:
    """Wait until `pid` exits, or kill the tree if the caller goes away.

    The caller closing its end of the status pipe shows as POLLERR; the
    command must not outlive the one caller that could stop it. ``pump``
    (fd, log fd): a background job's output pipe, copied to its log here.
    ``report_fd``: PID 1's channel; its report means the command is over.
    Returns "abandoned", "exited" or "report".
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return "exited"
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(status_fd, 0)
    if pump is not None:
        poller.register(pump[0], select.POLLIN)
    if report_fd is not None:
        poller.register(report_fd, select.POLLIN)
    try:
        while True:
            ready = dict(poller.poll())
            if ready.get(status_fd):
                abandon()
                return "abandoned"
            if pump is not None and ready.get(pump[0]) and not _copy(pump):
                poller.unregister(pump[0])
            if report_fd is not None and ready.get(report_fd, 0) & select.POLLIN:
                return "report"
            if ready.get(pidfd):
                return "exited"
    finally:
        os.close(pidfd)


def _copy(pump: tuple[int, int]) -> bool:
    """Copy what is in the job's pipe to its log; False at EOF."""
    try:
        data = os.read(pump[0], 65536)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not data:
        return False
    with contextlib.suppress(OSError):
        os.write(pump[1], data)
    return True


def _drain(pump: tuple[int, int] | None) -> None:
    if pump is None:
        return
    os.set_blocking(pump[0], False)
    while _copy(pump):
        try:
            if not select.select([pump[0]], [], [], 0.05)[0]:
                break
        except OSError:
            break
    os.close(pump[0])


def _limit_report(group: Any, before: dict[str, int] | None) -> list[str]:
    if group is None or before is None:
        return []
    after = group.counters()
    return [name for name in ("memory", "pids") if after.get(name, 0) > before.get(name, 0)]


def _group_name(req: Request) -> str:
    name = req.group or "unrestricted"
    return "".join(c for c in name if c.isalnum() or c in "-_")[:64] or "unrestricted"


def _budget(req: Request) -> tuple[str, int | None, int | None]:
    """The cgroup a request's command goes in: (group, memory, pids); no limits Unrestricted."""
    if not req.restricted:
        return "unrestricted", None, None
    return _group_name(req), req.memory, req.max_procs


def _command_side(
    restrictions: Restrictions | None,
    namespaced: bool,
    tmpdir: str,
    close: Sequence[int],
    flags: int | None = None,
) -> tuple[socket.socket, int, str]:
    """Fork a command side and, ``namespaced``, wait until its namespaces are set up.

    Returns the channel to it, the process the request goes to (PID 1 or the
    command itself) and why the set-up failed ("" if it did not). ``close``: the
    spare's descriptors the child must not keep; ``flags``: see `_namespaced_side`.
    """
    ns = restrictions.namespaces if restrictions is not None else None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        if namespaced:
            _namespaced_side(theirs, restrictions, tmpdir, flags)  # type: ignore[arg-type]
        _plain_command(theirs, restrictions, tmpdir)
    theirs.close()
    target = pid  # the process the request goes to: PID 1 or the command itself
    setup_error = ""
    if namespaced:
        ours.settimeout(_SETUP_TIMEOUT)  # a set-up that dies silently must not hang the spare
        try:
            if ours.recv(16) != b"U":
                raise OSError("namespace set-up failed")
            if ns is not None and ns.user:
                confine.write_id_maps(pid, full=os.geteuid() == 0)
            ours.send(b"M")
            # Two messages, in either order: PID 1's host pid (from the
            # unsharing process) and "R" (from PID 1, once its command process
            # is forked); anything else is a failure report.
            got: list[bytes] = [ours.recv(256), ours.recv(256)]
            if b"" in got:
                raise OSError("its PID 1 ended during the set-up")
            if b"R" not in got:
                raise OSError(next((m for m in got if m != b"R"), b"E")[1:].decode())
            answer = next(m for m in got if m != b"R")
            if not answer.isdigit():
                raise OSError(answer[1:].decode() or "namespace set-up failed")
            target = int(answer)
        except TimeoutError:
            setup_error = (
                f"the command's namespaces were not set up within {_SETUP_TIMEOUT:g} s; "
                "it was not run"
            )
        except (OSError, ValueError) as exc:
            setup_error = (
                f"the command's namespaces could not be set up ({exc or type(exc).__name__}); "
                "it was not run"
            )
        ours.settimeout(None)
        if setup_error:
            # The unsharing side may wait for "M", PID 1 for its request: neither can
            # come now. Killed (and the channel closed, which ends a PID 1 already
            # forked), so the wait below cannot hang.
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            ours.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    else:
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
    return ours, target, setup_error


def spare(
    sock: socket.socket,
    taken_w: int,
    restrictions: Restrictions | None,
    restricted: bool,
    expect: tuple[str, int | None, int | None] | None = None,
) -> None:
    """A supervisor forked ahead of its request, with its command side prepared.

    ``expect``: the cgroup budget the previous request on this socket used.
    The command side is placed in it now, because moving a process between
    cgroups waits for an RCU grace period (~10 ms here): a request for the
    same conversation then pays nothing; another one is moved on request.
    """
    me = os.getpid()
    # Preparing a spare is background work: at a lower priority it does not
    # take the CPU from a command running now (2 shared cores here). Only
    # where the priority can be raised back on request (root), and only while
    # no request waits for it: in a burst (keyword_search starts one rg per
    # term at once) a starved spare would hold up the commands queued behind it.
    background = _BACKGROUND_NICE and not _request_waiting(sock) and _set_nice(0, _BACKGROUND_NICE)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGTERM)
    ns = restrictions.namespaces if (restricted and restrictions is not None) else None
    namespaced = bool(ns is not None and ns.flags)
    tmpdir = ""
    if restricted and restrictions is not None:
        base = restrictions.run_dir or tempfile.gettempdir()
        tmpdir = tempfile.mkdtemp(prefix="tmp-", dir=base)
    ours, target, setup_error = _command_side(
        restrictions, namespaced, tmpdir, (sock.fileno(), taken_w)
    )
    group = None
    setup = restrictions.cgroups if restrictions is not None else None
    if setup is not None and setup.version and not setup_error:
        if expect is None and not restricted:
            expect = ("unrestricted", None, None)
        if expect is not None:
            # Best effort, briefly: the request redoes and verifies whatever
            # did not take here, and this spare may be the next request's.
            with contextlib.suppress(OSError):
                group = cgroups.make_group(
                    setup, expect[0], str(me), *expect[1:], settle=_SPARE_SETTLE_SECONDS, ahead=True
                )
            if group is not None:
                try:
                    group.place(target)
                except OSError:
                    group.remove()
                    group = None
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
            break
        except InterruptedError:
            continue
    if not data:
        _discard(target, tmpdir, group)  # the kernel is gone
        os.write(taken_w, b"E")
        os._exit(0)
    try:
        out_fd, status_fd, *extra = fds
        req = protocol.Request.parse(data)
    except ValueError as exc:  # too few fds, or a malformed request (protocol.ProtocolError)
        if len(fds) >= 2 and isinstance(exc, protocol.ProtocolError):
            # The caller reads why from its status pipe, as for any refused command.
            why = f"the sandbox launcher refused a malformed request ({exc}); it was not run"
            with contextlib.suppress(OSError):
                _write_refusal(fds[1], why)
        for fd in fds:
            os.close(fd)
        os.write(taken_w, b"F")
        _discard(target, tmpdir, group)
        os._exit(0)
    os.write(taken_w, b"T" + json.dumps(_budget(req)).encode())
    if namespaced and req.network and not setup_error:
        # The network grant (an MCP server's, rare): this spare's namespaces include
        # a private network; the grant's command side gets every other namespace and
        # the host's network, set up now (~5 ms) rather than kept ready.
        _discard(target, "")
        ours.close()
        flags = ns.flags & ~confine.CLONE_NEWNET  # type: ignore[union-attr]
        ours, target, setup_error = _command_side(restrictions, namespaced, tmpdir, (), flags)
    if background:
        _set_nice(0, 0)
        for pid in _family(target):
            _set_nice(pid, 0)
    os.close(taken_w)
    sock.close()
    if not setup_error and _ended(target):
        # Killed while it waited (an OOM kill, a stray signal): handing it the
        # request would report the command as killed when it never ran.
        setup_error = (
            "the sandbox prepared for the command had ended before it came; it was not run"
        )
    if setup_error or (restricted and restrictions is None):
        why = setup_error or "Landlock or seccomp is unavailable"
        os.write(out_fd, f"phoenix sandbox: {why}\n".encode())
        _write_refusal(status_fd, why)
        _discard(target, tmpdir, group)
        os._exit(0)
    if setup is not None and setup.version:
        held = [group] if group is not None else []
        try:
            group = _bound(setup, held, _budget(req), target, str(me))
        except OSError as exc:
            if restricted:
                # Deny by default: a Restricted command never runs outside its budget.
                why = f"the command's cgroup budget could not be applied ({exc}); it was not run"
                os.write(out_fd, f"phoenix sandbox: {why}\n".encode())
                _write_refusal(status_fd, why)
                _discard(target, tmpdir)
                for stale in held:
                    stale.remove()
                os._exit(0)
            group = held[-1] if held else None  # Unrestricted: cgroups only measure
        for stale in held:
            if stale is not group:
                stale.remove()
    supervise(req, target, ours, out_fd, status_fd, me, namespaced, tmpdir, group, extra)


def _bound(
    setup: Any,
    held: list[Any],
    wanted: tuple[str, int | None, int | None],
    target: int,
    name: str,
) -> Any:
    """The command side in the cgroup of ``wanted`` (group, memory, pids), verified.

    ``held``: the groups the command side may be in, oldest first (the
    spare's, if it placed it); each group made here is appended, and the
    caller removes the ones not returned once the command side has left them
    (a cgroup with a member cannot be removed). The spare may have placed it
    in the previous request's group; another conversation's request moves
    it, the same one rewrites the limits (the budget may have changed). Read
    back afterwards: the group's limits and its member list must be the
    request's, whatever raced with us (a finishing command removing the
    empty group, another kernel's sweep). Raises OSError with the cause.
    """
    group_name, memory, pids = wanted
    group = held[-1] if held else None
    if group is not None and os.path.basename(group.group_dirs[0]) != group_name:
        group = None
    if group is not None:
        # The spare placed the command side in this group ahead: when the read-back
        # already shows the request's limits and members, there is nothing to write
        # (the usual case: the same conversation's next command, the same budget).
        with contextlib.suppress(OSError):
            cgroups.verify(group, _family(target), memory, pids)
            return group
    for attempt in range(3):
        if group is None:
            group = cgroups.make_group(setup, group_name, name, memory, pids)
            held.append(group)
        cgroups.ensure_limits(setup, group, memory, pids)  # waits out races itself
        try:
            if not group.holds(_family(target)):
                group.place(target)  # a move costs an RCU grace period: only when needed
            cgroups.verify(group, _family(target), memory, pids)
            return group
        except OSError:
            if attempt == 2:
                raise
            # The group may have been swept and made again without the
            # command side: start over in a fresh directory.
            group = None
    raise AssertionError("unreachable")


_BACKGROUND_NICE = 10 if os.geteuid() == 0 else 0
_SPARE_SETTLE_SECONDS = 0.5


def _request_waiting(sock: socket.socket) -> bool:
    """A request is already queued on the socket this spare will serve."""
    with contextlib.suppress(OSError, ValueError):
        return bool(select.select([sock], [], [], 0)[0])
    return False


def _set_nice(pid: int, value: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, value)
    except OSError:
        return False
    return True


def _family(pid: int) -> list[int]:
    """`pid` and its children (the namespace's PID 1 and its pre-forked command)."""
    found = [pid]
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY | os.O_CLOEXEC)
        try:
            found += [int(x) for x in os.read(fd, 4096).split()]
        finally:
            os.close(fd)
    return found


def _write_refusal(status_fd: int, why: str) -> None:
    """Both status lines for a command the sandbox did not run, and why."""
    report = {"exit": 126, "signal": None, "killed": False, "refused": why}
    os.write(status_fd, f'{{"pid": 0}}\n{json.dumps(report)}\n'.encode())


def _ended(pid: int) -> bool:
    """Whether our child `pid` (a prepared command side) has exited; it is not reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _discard(pid: int, tmpdir: str, group: Any = None) -> None:
    """Stop an unused prepared command side and remove its TMPDIR and cgroup."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    if tmpdir:
        cleanup.remove_tree(tmpdir)
    if group is not None:
        group.remove()


def supervise(
    req: Request,
    target: int,
    chan: socket.socket,
    out_fd: int,
    status_fd: int,
    me: int,
    namespaced: bool,
    tmpdir: str,
    group: Any,
    extra: Sequence[int] = (),
) -> None:
    """Runs in the supervisor: start the command, wait, kill what is left, report.

    ``extra``: the caller's stdin/stderr pipes, handed to the command and closed here."""
    state: dict[str, Any] = {"killed": False}
    before = group.counters() if group is not None else None

    def on_term(_signum: int, _frame: object) -> None:
        state["killed"] = True
        kill_tree(me, target, group)

    signal.signal(signal.SIGTERM, on_term)
    try:
        first = {"pid": me, "pgid": target, "tmpdir": tmpdir if req.restricted else ""}
        os.write(status_fd, (json.dumps(first) + "\n").encode())
    except OSError:
        _discard(target, tmpdir, group)
        os._exit(0)
    pump: tuple[int, int] | None = None
    command_out = out_fd
    if req.linger:
        # Background job: its output reaches the log through us, never directly.
        pipe_r, pipe_w = os.pipe()
        pump, command_out = (pipe_r, out_fd), pipe_w
        os.set_blocking(pipe_r, False)
    with contextlib.suppress(OSError):
        socket.send_fds(chan, [req.to_wire()], [command_out, *extra])
    for fd in extra:
        with contextlib.suppress(OSError):
            os.close(fd)
    if pump is not None:
        os.close(command_out)
    else:
        os.close(out_fd)
    ended = _wait_command(
        target, status_fd, lambda: on_term(0, None), pump, chan.fileno() if namespaced else None
    )
    code: int | None = None
    sig: int | None = None
    limits: list[str] = []
    refused = ""  # why the sandbox did not run the command (it never started)
    early = False
    # PID 1's report: it reaped every process of the namespace, so the tree is gone
    # and the caller hears now, not after the namespaces' teardown. The channel also
    # reads as ready at its end of file, when PID 1 was killed: its files close
    # before the kernel has killed the rest of its namespace, so that is no report
    # (a cancelled, SIGSTOPped rg outlived the report that way) and the wait below
    # for PID 1 itself, which ends only once its namespace is empty, decides.
    reported = _namespace_report(chan) if ended == "report" else None
    if reported is not None:
        early = True
        code, sig, more, refused = reported
        limits += more
    else:
        while True:
            try:
                done, status = os.waitpid(target, 0)
            except ChildProcessError:
                break
            if done == target:
                if os.WIFEXITED(status):
                    code = os.WEXITSTATUS(status)
                elif os.WIFSIGNALED(status):
                    sig = os.WTERMSIG(status)
                break
        if namespaced:
            chan.setblocking(False)
            reported = _namespace_report(chan)
            if reported is None:  # PID 1 was killed before it could report
                code, sig = None, signal.SIGKILL
            else:
                code, sig = reported[0], reported[1] or sig
                limits += reported[2]
                refused = reported[3]
        elif req.linger:
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_tree(me, target, group)
    _drain(pump)
    if pump is not None:
        os.close(out_fd)
    limits += _limit_report(group, before)
    if tmpdir and not namespaced:
        cleanup.remove_tree(tmpdir)  # the command's files: gone before the caller hears
    report = {"exit": code, "signal": sig, "killed": state["killed"], "limits": limits}
    if refused:
        report["refused"] = refused
    os.write(status_fd, (json.dumps(report) + "\n").encode())
    # After the report: nothing of the command is left to wait for.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if early:
        kill_tree(me, target, group)
    if tmpdir and namespaced:
        # Here only the empty mount point of the namespace's own tmpfs, where the
        # command's files were; removing it may wait for the kernel to detach that
        # mount (~0.3 ms), so it comes after the report.
        try:
            os.rmdir(tmpdir)
        except OSError:
            cleanup.remove_tree(tmpdir)
    if group is not None:
        group.remove()
    os._exit(0)


def _namespace_report(
    chan: socket.socket,
) -> tuple[int | None, int | None, list[str], str] | None:
    """PID 1's own report: how the command ended, which TMPDIR cap it hit and why the
    command was refused (its set-up failed; "" when it ran); None when there is none
    (the channel's end, nothing sent yet)."""
    try:
        report = json.loads(chan.recv(65536))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    if report.get("error"):
        return 126, None, [], f"the command's PID 1 failed: {report['error']}"
    refused = str(report.get("refused") or "")
    return report.get("exit"), report.get("signal"), list(report.get("limits", [])), refused


# -------------------------------------------------------------------- launcher


def _alive(owner: str) -> bool:
    """Whether the kernel named ``<pid>-<start time>`` still runs (an exited kernel
    its parent has not reaped yet, a zombie, does not)."""
    pid, _, start = owner.partition("-")
    start = start.split("-")[0]  # "<pid>-<start>-fork": the kernel's own fork cgroups
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            stat = fh.read()
    except (OSError, ValueError):
        return False
    fields = stat[stat.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return False
    return not start or fields[19].decode() == start


def remove_stale(restrictions: Restrictions | None) -> None:
    """Remove run directories and cgroups of kernels that are gone (any cause)."""
    run_dir = os.environ.get("PHOENIX_RUN_DIR", "")
    if run_dir:
        parent = os.path.dirname(run_dir)
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                path = os.path.join(parent, name)
                if path != run_dir and not _alive(name):
                    cleanup.remove_tree(path)
    if restrictions is not None and restrictions.cgroups is not None:
        cgroups.remove_stale(restrictions.cgroups, _alive)


_WIND_DOWN_SECONDS = 10.0
_REPLACE_AFTER = 5.0  # seconds a command may run before its spare is replaced anyway


def wind_down(restrictions: Restrictions | None) -> None:
    """The kernel closed its end: remove its run folder and cgroups once nothing uses them.

    Each supervisor kills its command's tree when its caller goes away, so
    once the launcher has no child left and the kernel itself has exited,
    nothing can use the folder (TMPDIR mount points, the placeholders bound
    over hidden paths, job logs, run_python scratch): removing it then cannot
    unhide a path from a command still running. A kernel that only closed its
    launcher to start another is still alive, and its folder stays. Bounded:
    whatever is not over within the limit is left to the next kernel's
    launcher, as after a crash.
    """
    deadline = time.monotonic() + _WIND_DOWN_SECONDS
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    _reap()
    while _has_children():
        left = deadline - time.monotonic()
        if left <= 0 or signal.sigtimedwait({signal.SIGCHLD}, left) is None:
            return
        _reap()
    owner = os.environ.get("PHOENIX_OWNER", "")
    if not _kernel_exited(owner, deadline):
        return
    run_dir = os.environ.get("PHOENIX_RUN_DIR", "")
    if run_dir and os.path.basename(run_dir) == owner:
        cleanup.remove_tree(run_dir)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(run_dir))  # only if no other kernel's folder is in it
    if restrictions is not None and restrictions.cgroups is not None:
        cgroups.remove_stale(restrictions.cgroups, _alive)


def _kernel_exited(owner: str, deadline: float) -> bool:
    """Wait (until `deadline`) for the kernel named `owner` to exit; whether it did."""
    if not owner or not _alive(owner):
        return bool(owner)
    try:
        pidfd = os.pidfd_open(int(owner.partition("-")[0]))
    except (OSError, ValueError):
        return not _alive(owner)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(max(0, int((deadline - time.monotonic()) * 1000)))
    finally:
        os.close(pidfd)
    return not _alive(owner)


def serve(plain: socket.socket, restricted_sock: socket.socket | None) -> None:
    """Keep SPARES spare supervisors per socket; replace each once its command is over.

    A taken spare's replacement is prepared only when its supervisor exits
    (after the exit report, so the command's whole tree is gone), not while
    the command runs: preparing a spare (a fork of this process, unshare,
    mounts, a PID 1 and its command process) takes several ms of CPU, and on
    2 shared cores that came straight out of the command's own time (a search's
    rg ran ~4 ms slower). The other spare serves the next request meanwhile.
    Two things prepare it sooner: a request waiting on the socket (a burst took
    every spare, so the caller waits for one anyway) and a command running
    longer than ``_REPLACE_AFTER`` (a long build or a background job must not
    leave its socket without a ready spare).
    """
    with contextlib.suppress(OSError):
        confine.prctl(confine.PR_SET_DUMPABLE, 0)
    restrictions = prepare_restrictions(probe=True)
    if restricted_sock is not None:
        hello = restrictions.hello() if restrictions is not None else {"error": "unavailable"}
        with contextlib.suppress(OSError):
            restricted_sock.send(json.dumps({"hello": hello}).encode())
    remove_stale(restrictions)  # after the hello: the kernel need not wait for it
    signal.signal(signal.SIGCHLD, lambda _s, _f: _reap())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    socks = [(plain, False)] + ([(restricted_sock, True)] if restricted_sock else [])
    pipes: dict[int, tuple[socket.socket, bool, int]] = {}  # taken_r -> (sock, kind, pid)
    # Replacements not prepared yet: the taken supervisor's pidfd ->
    # (socket, kind, expected budget, when to prepare it anyway).
    owed: dict[int, tuple[socket.socket, bool, Any, float]] = {}
    # The budget of the latest request on each socket: a replacement prepared
    # later is placed in the conversation most likely to ask next.
    latest: dict[int, Any] = {}
    failures = 0

    def fork_spare(
        sock: socket.socket, is_restricted: bool, expect: tuple[str, int | None, int | None] | None
    ) -> None:
        taken_r, taken_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(taken_r)
                for other_r in pipes:
                    os.close(other_r)
                for pidfd in owed:
                    os.close(pidfd)
                spare(sock, taken_w, restrictions, is_restricted, expect)
            finally:
                os._exit(1)
        os.close(taken_w)
        pipes[taken_r] = (sock, is_restricted, pid)

    def pay(pidfd: int) -> None:
        sock, is_restricted, expect, _ = owed.pop(pidfd)
        os.close(pidfd)
        fork_spare(sock, is_restricted, latest.get(sock.fileno(), expect))

    for _ in range(SPARES):
        for sock, is_restricted in socks:
            fork_spare(sock, is_restricted, None)
    while pipes or owed:
        if failures >= 6:
            break
        waiting = {entry[0].fileno() for entry in owed.values()}
        timeout = max(0.0, min((d for *_, d in owed.values()), default=0) - time.monotonic())
        try:
            ready, _, _ = select.select(
                [*pipes, *owed, *waiting],
                [],
                [],
                timeout if owed else None,
            )
        except InterruptedError:
            continue
        now = time.monotonic()
        # Both lists are taken before any fd is closed or opened here: a number
        # closed below can come back at once as another pipe or pidfd.
        ready_pipes = [fd for fd in ready if fd in pipes]
        for pidfd, (sock, _kind, _expect, due) in list(owed.items()):
            if pidfd in ready or sock.fileno() in ready or due <= now:
                pay(pidfd)
        for fd in ready_pipes:
            try:
                word = os.read(fd, 4096)
            except InterruptedError:
                continue
            sock, is_restricted, pid = pipes.pop(fd)
            os.close(fd)
            if word == b"E":
                wind_down(restrictions)  # the kernel closed its end
                return
            expect = None
            if word.startswith(b"T"):
                failures = 0
                with contextlib.suppress(ValueError, TypeError):
                    expect = tuple(json.loads(word[1:]))
                latest[sock.fileno()] = expect
                try:
                    owed[os.pidfd_open(pid)] = (sock, is_restricted, expect, now + _REPLACE_AFTER)
                    continue
                except OSError:
                    pass  # already gone: replace it now
            else:
                failures += 1
            fork_spare(sock, is_restricted, expect)


def main() -> None:
    plain = socket.socket(fileno=int(os.environ["PHOENIX_LAUNCHER_FD"]))
    rfd = os.environ.get("PHOENIX_LAUNCHER_RFD")
    serve(plain, socket.socket(fileno=int(rfd)) if rfd else None)


if __name__ == "__main__":
    main()
