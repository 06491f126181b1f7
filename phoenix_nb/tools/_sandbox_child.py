"""The sandbox launcher: a small single-threaded process that starts commands.

Why a separate process: the Jupyter kernel is multi-threaded, so forking it to
run Python between fork and exec (``preexec_fn``) is unsafe, and an exec
wrapper pays Python start-up (~50 ms) on every command. This launcher is
started once per kernel (lazily, by ``sandbox.Launcher``), pays start-up once,
prepares the Restricted-mode restrictions once, and then only forks.

It keeps one *spare supervisor* forked ahead of time, which has already made
itself a child subreaper (PR_SET_CHILD_SUBREAPER), created its pids cgroup
and forked its *command* process (own process group, in the cgroup); the
spare takes the next request from the kernel's socket itself and the
launcher forks a new spare. So forks are off the path a tool call waits on.
Every descendant of the command, even one that called ``setsid``, stays in
the cgroup and is re-parented to the supervisor, so it can be found and
killed. On request the command process applies rlimits and (in Restricted
mode) drops its capabilities and applies Landlock and seccomp to itself only,
and execs ``bash -c``. The seccomp BPF and the Landlock masks are prepared
once in the launcher, so a command pays only for its own ruleset and one
prctl. Nothing is ever applied to the kernel or the launcher (the launcher
only makes itself non-dumpable).

Protocol (SOCK_SEQPACKET socket, fd number in $PHOENIX_LAUNCHER_FD): each
request is one JSON message with two file descriptors attached: the command's
output (stdout and stderr) and a status pipe. The supervisor writes JSON lines
to the status pipe: first ``{"pid": <supervisor pid>, "pgid": <command pid>}``
(before the command may run), at the end ``{"exit": code, "signal": sig,
"killed": bool}``. The caller stops a command by SIGKILLing its process group
and sending SIGTERM to the supervisor, which kills the rest of the tree and
reports; a caller that closes the status pipe early gets the same.

This file is run as a script (``python -I _sandbox_child.py``) and imports
nothing from phoenix_nb so that it stays small and independent.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SETPCAP = 8
CAP_DAC_READ_SEARCH = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CGROUP_PIDS_ROOT = "/sys/fs/cgroup/pids"
_SWEEP_WAIT = 0.01  # seconds between kill rounds while killed processes exit

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int, arg3: int = 0) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


# ---------------------------------------------------------------- capabilities


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


def drop_capabilities(last_cap: int, keep: int = CAP_DAC_READ_SEARCH) -> None:
    """Leave the command with at most CAP_DAC_READ_SEARCH, for good.

    Why: a notebook often runs as root, and root's CAP_SYS_ADMIN/CAP_PERFMON
    let ``mm_access`` skip the LSM ptrace check for PTRACE_MODE_READ, so
    ``/proc/<kernel pid>/environ`` (the API key) stayed readable although
    Landlock's ptrace scoping denies ``/proc/<pid>/mem`` and ``fd/``. Dropping
    the bounding set matters most: a root ``execve`` refills the permitted set
    from it. CAP_DAC_READ_SEARCH is kept so that "read everywhere" still
    holds for root-run notebooks; reading is what Restricted mode allows.
    Without CAP_SETPCAP (not root) there is nothing to drop and no way to
    gain capabilities under no_new_privs.
    """
    can_drop = True
    for cap in [c for c in range(last_cap + 1) if c not in (keep, CAP_SETPCAP)] + [CAP_SETPCAP]:
        if not can_drop:
            break
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EPERM:
                can_drop = False  # unprivileged: the bounding set cannot matter
            elif exc.errno != errno.EINVAL:
                raise
    with contextlib.suppress(OSError):
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    current = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), current) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    kept = current[0].permitted & (1 << keep)
    data[0] = _CapData(kept, kept, 0)
    if _libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


# --------------------------------------------------------------------- seccomp


# Syscalls that change metadata (Landlock does not cover them), leave the
# process tree, reach other processes, or change the machine. All return EPERM
# so that the failing command prints the kernel's own error (REQ-BASH-008).
_DENIED_SYSCALLS = [
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "setsid",
    "setpgid",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "chroot",
    "unshare",
    "setns",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "acct",
    "quotactl",
    "quotactl_fd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "iopl",
    "ioperm",
    "open_by_handle_at",
    "fanotify_init",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "syslog",
    "vhangup",
    "mknod",
    "mknodat",
]

_AF_INET = 2
_AF_INET6 = 10
_CLONE_NS_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C


def build_seccomp_filter() -> Any:
    """The seccomp filter for Restricted mode, built once in the launcher.

    Default allow, deny a list: an allow-list of syscalls breaks ordinary
    tools in ways hard to explain, while what Landlock leaves open is a short,
    known list (NOTES.md): metadata changes, non-TCP sockets, tree escape.
    Sockets: only AF_INET/AF_INET6 stream sockets with protocol 0 or TCP may be
    created (Landlock then denies TCP connect/bind); UDP, raw, MPTCP (262),
    SCTP, packet, netlink and unix sockets (``socket``, not ``socketpair``)
    fail with EPERM. Unix sockets are refused because Landlock ABI < 9 cannot
    stop a connect to a listening socket outside the sandbox (a Docker or
    Jupyter socket would be a write by proxy). ``clone3`` answers ENOSYS so
    that libc falls back to ``clone``, whose namespace flags can be checked.
    """
    import pyseccomp as sc

    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in _DENIED_SYSCALLS:
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            f.add_rule(eperm, name)  # fails where not a syscall on this architecture
    for domain in range(64):
        if domain not in (_AF_INET, _AF_INET6):
            f.add_rule(eperm, "socket", sc.Arg(0, sc.EQ, domain))
    f.add_rule(eperm, "socket", sc.Arg(0, sc.GE, 64))
    for domain in (_AF_INET, _AF_INET6):
        for sock_type in (2, 3, 4, 5, 6, 10):  # dgram raw rdm seqpacket dccp packet
            f.add_rule(
                eperm,
                "socket",
                sc.Arg(0, sc.EQ, domain),
                sc.Arg(1, sc.MASKED_EQ, 0xF, sock_type),
            )
        for proto in (132, 262):  # SCTP, MPTCP: not covered by Landlock TCP rules
            f.add_rule(eperm, "socket", sc.Arg(0, sc.EQ, domain), sc.Arg(2, sc.EQ, proto))
    for flag in _CLONE_NS_FLAGS:
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for req in (_TIOCSTI, _TIOCLINUX):
        f.add_rule(eperm, "ioctl", sc.Arg(1, sc.EQ, req))
    return f


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class CompiledFilter:
    """The seccomp filter as BPF, compiled once in the launcher.

    libseccomp's ``load()`` regenerates the BPF program on every call (~5 ms
    here, measured in a forked child); exporting it once and handing the
    kernel the same bytes per command is one prctl. The buffer lives in the
    launcher and is inherited by every fork.
    """

    def __init__(self, bpf: bytes) -> None:
        if not bpf or len(bpf) % 8:
            raise ValueError(f"not a BPF program ({len(bpf)} bytes)")
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.addressof(self._buf))

    def load(self) -> None:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        prog = ctypes.byref(self._prog)
        if _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), prog, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))


def compile_seccomp_filter() -> CompiledFilter:
    with tempfile.TemporaryFile() as fh:
        build_seccomp_filter().export_bpf(fh)
        fh.seek(0)
        return CompiledFilter(fh.read())


# -------------------------------------------------------------------- landlock


@dataclass(frozen=True)
class LandlockPlan:
    """Access masks as plain ints, computed once in the launcher.

    Per command only the ruleset itself is built (it names the command's own
    TMPDIR); the flag arithmetic, which is enum work in Python, is not redone.
    """

    handled_net: int
    scoped: int
    read_exec: int
    everything: int
    device: int

    @classmethod
    def build(cls) -> LandlockPlan:
        import landlockpy as ll
        from landlockpy.flags import LATEST_ABI

        fs = ll.AccessFS
        return cls(
            handled_net=int(
                ll.AccessNet.BIND_TCP
                | ll.AccessNet.CONNECT_TCP
                | ll.AccessNet.BIND_UDP
                | ll.AccessNet.CONNECT_SEND_UDP
            ),
            scoped=int(ll.Scope.ABSTRACT_UNIX_SOCKET | ll.Scope.SIGNAL),
            read_exec=int(fs.READ_FILE | fs.READ_DIR | fs.EXECUTE),
            everything=int(ll.fs_for_abi(LATEST_ABI)),
            device=int(fs.READ_FILE | fs.WRITE_FILE | fs.IOCTL_DEV | fs.TRUNCATE),
        )


def apply_landlock(plan: LandlockPlan, writable: list[str], devices: list[str]) -> None:
    """Read and execute everywhere, write only below `writable`, no TCP.

    Every filesystem right the kernel knows is handled (so denied unless
    granted); network rights handled with no port allowed; abstract unix
    sockets and signals scoped to the sandbox where the ABI has scoping.
    Scoping also covers ptrace: a process in the domain cannot ptrace-access
    one outside it (``/proc/<pid>/mem``, ``fd/``), given no capability
    bypass (see ``drop_capabilities``).
    """
    import landlockpy as ll

    with ll.Ruleset(handled_net=plan.handled_net, scoped=plan.scoped) as rs:
        rs.allow_path("/", plan.read_exec)
        for path in writable:
            rs.allow_path(path, plan.everything)
        for dev in devices:
            if os.path.exists(dev):
                rs.allow_path(dev, plan.device)
        rs.restrict()


# ------------------------------------------------------------------ supervisor


@dataclass(frozen=True)
class Restrictions:
    """Everything Restricted mode applies, prepared once per launcher."""

    landlock: LandlockPlan
    seccomp: CompiledFilter
    last_cap: int


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


def _cgroup_members(cgroup: str | None) -> list[int]:
    """The pids in the command's cgroup: every descendant, setsid or not."""
    if not cgroup:
        return []
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "rb") as fh:
            return [int(line) for line in fh.read().split()]
    except (OSError, ValueError):
        return []


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


def kill_tree(me: int, pgid: int | None, cgroup: str | None = None) -> None:
    """SIGKILL every descendant until none is left.

    Order is by cost, so the common case is done in a few syscalls: the
    process group (one syscall), then the pids cgroup's member list where
    there is one (one small read, escape-proof), and only then a /proc scan
    for whatever is still a child of ours. Killed processes' children are
    re-parented to us (we are a subreaper), so repeating converges even for a
    fork bomb: a killed process cannot fork again. Between rounds it waits
    for SIGCHLD (bounded) instead of rescanning at once: a SIGKILLed process
    still needs the CPU to exit, and a busy rescan loop would take it away.
    """
    if pgid:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    _kill_all(_cgroup_members(cgroup))
    _reap()
    while _has_children():
        pids = _cgroup_members(cgroup) or _descendants(me)
        if not pids:
            break
        _kill_all(pids)
        signal.sigtimedwait([signal.SIGCHLD], _SWEEP_WAIT)
        _reap()
    _reap()


def _join_pids_cgroup(cgroup: str | None) -> None:
    if cgroup:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write("0")


def _make_pids_cgroup(max_procs: int | None) -> str | None:
    """A pids cgroup for the command's tree (bounded to `max_procs`), where writable.

    RLIMIT_NPROC is ignored for root, and a notebook often runs as root in a
    container; a pids cgroup is the kernel's count limit that also holds there.
    Best effort: absent or read-only cgroupfs leaves RLIMIT_NPROC alone.
    """
    base = os.path.join(CGROUP_PIDS_ROOT, "phoenix")
    try:
        os.makedirs(base, exist_ok=True)
        path = os.path.join(base, str(os.getpid()))
        try:
            os.mkdir(path)
        except FileExistsError:
            # Left by a supervisor that was killed before cleaning up: the pid
            # is ours now, so nothing else can be using it.
            os.rmdir(path)
            os.mkdir(path)
        if max_procs is not None:
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(max_procs))
        return path
    except OSError:
        return None


def _exec_command(req: dict[str, Any], out_fd: int, restrictions: Restrictions | None) -> None:
    """Runs in the command process: set up, restrict self, exec. Never returns."""
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.closerange(3, 65536)
        os.chdir(req["cwd"])
        for name, value in req.get("rlimits", {}).items():
            limit = getattr(resource, name)
            resource.setrlimit(limit, (value, value))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if req.get("restricted"):
            if restrictions is None:
                raise RuntimeError("seccomp is unavailable")
            drop_capabilities(restrictions.last_cap)
            apply_landlock(restrictions.landlock, req["writable"], req["devices"])
            restrictions.seccomp.load()
        os.execve(req["argv"][0], req["argv"], req["env"])
    except BaseException as exc:
        try:
            os.write(2, f"phoenix sandbox: cannot start command: {exc}\n".encode())
        finally:
            os._exit(126)


def _command_process(
    chan: socket.socket, cgroup: str | None, restrictions: Restrictions | None
) -> None:
    """A pre-forked command process: its own group and cgroup, then wait for work."""
    try:
        os.setpgid(0, 0)
        _join_pids_cgroup(cgroup)
        data, fds, _flags, _addr = socket.recv_fds(chan, 1 << 20, 1)
        if not data or len(fds) != 1:
            os._exit(0)  # the supervisor went away without a request
        req = json.loads(data)
    except BaseException:
        os._exit(126)
    _exec_command(req, fds[0], restrictions)


def _discard(pid: int, cgroup: str | None) -> None:
    """Stop an unused pre-forked command and remove its cgroup."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    if cgroup:
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)


def spare(sock: socket.socket, taken_w: int, restrictions: Restrictions | None) -> None:
    """A supervisor forked ahead of its request, with its command forked too.

    Why: forks, the cgroup and the subreaper setup then happen while the
    kernel is idle instead of between its request and the command's exec,
    which is what every tool call waits for. It takes the next request from
    the kernel's socket itself, tells the launcher (``taken_w``) so another
    spare is made, hands the request and output fd to its command process,
    and supervises it.
    """
    me = os.getpid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Blocked so that kill_tree can wait for it; waitpid does not need it.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # Both modes get a cgroup where one can be made: its member list is the
    # fast, escape-proof sweep on cancel; only Restricted mode bounds it.
    cgroup = _make_pids_cgroup(None)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        sock.close()
        os.close(taken_w)
        _command_process(theirs, cgroup, restrictions)
    theirs.close()
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here, so the group exists whoever runs first
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
            break
        except InterruptedError:
            continue
    if not data:
        # The kernel is gone. Clean up before telling the launcher: once it
        # exits, PR_SET_PDEATHSIG ends this process.
        _discard(pid, cgroup)
    os.write(taken_w, b"T" if data else b"E")
    os.close(taken_w)
    sock.close()
    try:
        req = json.loads(data)
        out_fd, status_fd = fds
    except (ValueError, TypeError):
        for fd in fds:
            os.close(fd)
        _discard(pid, cgroup)
        os._exit(0)
    if req.get("restricted") and restrictions is None:
        os.write(out_fd, b"phoenix sandbox: Landlock or seccomp is unavailable\n")
        os.write(status_fd, b'{"pid": 0}\n{"exit": 126, "signal": null, "killed": false}\n')
        _discard(pid, cgroup)
        os._exit(0)
    if req.get("restricted") and cgroup:
        with contextlib.suppress(OSError), open(os.path.join(cgroup, "pids.max"), "w") as fh:
            fh.write(str(int(req.get("max_procs", 1024))))
    supervise(req, pid, ours, out_fd, status_fd, cgroup, me)


def _wait_command(pid: int, status_fd: int, abandon: Any) -> None:
    """Wait until the command exits, or kill the tree if the caller goes away.

    The caller closing its end of the status pipe (a cancel that came before
    it read the pids, or a crash) shows here as POLLERR; the command must not
    outlive the one caller that could stop it.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # already reaped (a SIGTERM came first)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(status_fd, 0)  # POLLERR/POLLHUP are always reported
    try:
        while True:
            ready = dict(poller.poll())
            if ready.get(status_fd):
                abandon()
                return
            if ready.get(pidfd):
                return
    finally:
        os.close(pidfd)


def supervise(
    req: dict[str, Any],
    pid: int,
    chan: socket.socket,
    out_fd: int,
    status_fd: int,
    cgroup: str | None,
    me: int,
) -> None:
    """Runs in the supervisor: start the command, wait, kill what is left, report."""
    state: dict[str, Any] = {"killed": False}

    def on_term(_signum: int, _frame: object) -> None:
        state["killed"] = True
        kill_tree(me, pid, cgroup)

    signal.signal(signal.SIGTERM, on_term)
    # The caller learns the pids before the command may run, so whenever a
    # command runs, its caller can kill it.
    try:
        os.write(status_fd, (json.dumps({"pid": me, "pgid": pid}) + "\n").encode())
    except OSError:
        _discard(pid, cgroup)  # the caller is gone already
        os._exit(0)
    with contextlib.suppress(OSError):
        socket.send_fds(chan, [json.dumps(req).encode()], [out_fd])
    chan.close()
    os.close(out_fd)
    _wait_command(pid, status_fd, lambda: on_term(0, None))
    code: int | None = None
    sig: int | None = None
    while True:
        try:
            done, status = os.waitpid(pid, 0)
        except ChildProcessError:
            break
        if done == pid:
            if os.WIFEXITED(status):
                code = os.WEXITSTATUS(status)
            elif os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
            break
    if req.get("linger"):
        # Background job: it lives as long as any descendant does.
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    # The command is done: whatever it left running goes too (background mode
    # is the way to keep something alive).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_tree(me, pid, cgroup)
    if cgroup:
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)
    report = {"exit": code, "signal": sig, "killed": state["killed"]}
    os.write(status_fd, (json.dumps(report) + "\n").encode())
    os._exit(0)


# -------------------------------------------------------------------- launcher


def prepare_restrictions() -> Restrictions | None:
    """Build what every Restricted command needs, once; None if impossible."""
    try:
        import landlockpy

        landlockpy.abi_version()  # loads libc once (find_library runs ldconfig)
        return Restrictions(LandlockPlan.build(), compile_seccomp_filter(), _last_cap())
    except Exception as exc:
        sys.stderr.write(f"phoenix sandbox: Restricted mode unavailable: {exc}\n")
        return None


def remove_stale_cgroups() -> None:
    """Remove cgroups left by supervisors that were killed before cleaning up.

    Only empty ones (rmdir refuses others) named after a pid that no longer
    exists, so a spare that has just made its cgroup is never touched.
    """
    base = os.path.join(CGROUP_PIDS_ROOT, "phoenix")
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            if not name.isdigit() or os.path.exists(f"/proc/{name}"):
                continue
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(base, name))


def serve(sock: socket.socket) -> None:
    """Keep one spare supervisor waiting on the kernel's socket; replace it when taken."""
    # Nothing but the launcher's own uid with CAP_SYS_PTRACE may read this
    # process's memory or /proc files; its environment holds no secret anyway.
    with contextlib.suppress(OSError):
        _prctl(PR_SET_DUMPABLE, 0)
    restrictions = prepare_restrictions()
    remove_stale_cgroups()
    signal.signal(signal.SIGCHLD, lambda _s, _f: _reap())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    failures = 0
    while failures < 3:
        taken_r, taken_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(taken_r)
                spare(sock, taken_w, restrictions)
            finally:
                os._exit(1)
        os.close(taken_w)
        try:
            word = os.read(taken_r, 1)
        finally:
            os.close(taken_r)
        if word == b"E":
            return  # the kernel closed its end
        failures = 0 if word == b"T" else failures + 1


def main() -> None:
    sock = socket.socket(fileno=int(os.environ["PHOENIX_LAUNCHER_FD"]))
    serve(sock)


if __name__ == "__main__":
    main()
