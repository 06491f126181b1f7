"""Confine the calling process: namespaces, mounts, capabilities, Landlock, seccomp.

One job: the kernel-side mechanics of Restricted mode, applied by a process to
itself (or, for the user-namespace id maps, by its parent to it). Two callers
use it: the launcher process (``launcher.py``), which runs it in every
pre-forked Restricted command, and ``sandbox.confine_forked_child``, which the
kernel tools (``run_python``) run in a fork of the kernel. It imports only the
standard library, ``landlockpy`` and ``pyseccomp`` (never phoenix_nb), so the
launcher can load it by file path without importing the package.

Why hand-written ctypes here rather than bubblewrap: see the ``sandbox``
package's docstring (in short: bwrap is an extra exec per command, cannot apply Landlock,
and the mounts must happen *between* namespace creation and Landlock, in a
process we already control).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SANDBOX_NAMESPACES = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID

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

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

# The one outside uid/gid a root-run sandbox does not map: the hiding
# placeholders are owned by it, so CAP_DAC_READ_SEARCH inside the user
# namespace does not apply to them and reading one fails with EACCES.
HIDDEN_ID = 4294967294


def _check(result: int) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def prctl(option: int, arg: int, arg3: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0))


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)))


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        )
    )


# ----------------------------------------------------------------- namespaces


@dataclass(frozen=True)
class NamespacePlan:
    """Which namespaces a Restricted command gets on this host.

    ``user``: a fresh user namespace (needed by non-root users; for root it
    also means the command holds no capability in the host's namespace).
    ``flags``: the other namespaces (network, IPC, mount, PID) — all or none:
    without a user namespace only a root (CAP_SYS_ADMIN) launcher has them.
    ``proc``: a fresh /proc could be mounted (fails where /proc is partly
    masked, e.g. Docker's default), so other processes are not even listed.
    """

    user: bool = False
    flags: int = 0
    proc: bool = False
    why_not: str = ""

    @property
    def net(self) -> bool:
        return bool(self.flags & CLONE_NEWNET)


def probe_namespaces(disabled: bool = False) -> NamespacePlan:
    """Find out, in a throw-away child, which namespaces this host allows.

    Must run in a single-threaded process (unshare(CLONE_NEWUSER) refuses
    otherwise): the launcher. The child tries a user namespace with the
    others, then (root only) the others alone, and mounts a fresh /proc.
    """
    if disabled:
        return NamespacePlan(why_not=NAMESPACES_OFF)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        # A non-dumpable process's /proc files belong to the host's root,
        # which the new user namespace does not map: it could not write its map.
        with contextlib.suppress(OSError):
            prctl(PR_SET_DUMPABLE, 1)
        ids = (os.geteuid(), os.getegid())
        for code, flags in ((1, CLONE_NEWUSER | SANDBOX_NAMESPACES), (2, SANDBOX_NAMESPACES)):
            try:
                unshare(flags)
            except OSError as exc:
                os.write(w, f"{code}:{exc.errno}:unshare\n".encode())
                continue
            break
        else:
            os._exit(0)
        try:
            if code == 1:
                write_id_maps(os.getpid(), full=False, self_map=True, ids=ids)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            child = os.fork()
            if child == 0:
                try:
                    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    os._exit(0)
                except OSError:
                    os._exit(1)
            _, status = os.waitpid(child, 0)
            proc_ok = os.waitstatus_to_exitcode(status) == 0
            os.write(w, f"ok:{code}:{int(proc_ok)}\n".encode())
        except OSError as exc:
            os.write(w, f"{code}:{exc.errno}:setup\n".encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        lines = fh.read().decode().splitlines()
    os.waitpid(pid, 0)
    reasons = []
    for line in lines:
        if not line.startswith("ok:"):
            attempt, err, step = line.split(":")
            reasons.append(namespace_refusal(attempt == "1", step, int(err)))
    for line in lines:
        if line.startswith("ok:"):
            _, which, proc = line.split(":")
            return NamespacePlan(
                user=which == "1",
                flags=SANDBOX_NAMESPACES,
                proc=proc == "1",
                why_not="" if which == "1" else f"no user namespaces: {reasons[0]}",
            )
    # Without a user namespace only root may make the others: a non-root launcher's second
    # refusal says nothing an admin can act on, so only root's is told.
    told = reasons if os.geteuid() == 0 else reasons[:1]
    return NamespacePlan(
        why_not="no user namespaces: " + "; ".join(told or ["the probe said nothing"]),
    )


NAMESPACES_OFF = (
    "namespaces off by choice: PHOENIX_SANDBOX_NAMESPACES=off (set by the admin or the "
    "user; the kernel was not asked)"
)

# Why a kernel refuses unshare(CLONE_NEWUSER), by errno: what a person can change.
_USERNS_WHY = {
    errno.EPERM: "container profile (seccomp, AppArmor) or kernel setting "
    "(kernel.unprivileged_userns_clone=0, kernel.apparmor_restrict_unprivileged_userns=1)",
    errno.EACCES: "container profile (seccomp, AppArmor) or kernel setting",
    errno.ENOSPC: "kernel setting: user.max_user_namespaces is 0 or used up",
    errno.EUSERS: "kernel setting: too many nested user namespaces",
    errno.EINVAL: "a kernel built without user namespaces, or a threaded caller",
}


def namespace_refusal(user: bool, step: str, err: int) -> str:
    """Words for one refusal the namespace probe saw: the call, the errno's name and
    text, and for a refused user namespace where that usually comes from, so that
    `%phoenix status` tells an admin what to change (the probe's child reports only
    numbers: it must not allocate much between fork and exit)."""
    name = errno.errorcode.get(err, f"errno {err}")
    seen = f"{name} ({os.strerror(err)})"
    if step != "unshare":
        what = "the user namespace's id maps or mounts" if user else "the namespaces' mounts"
        return f"setting up {what} failed with {seen}"
    if user:
        why = _USERNS_WHY.get(err, "kernel setting")
        return f"unshare(CLONE_NEWUSER) refused with {seen} ({why})"
    return (
        "unshare of network/IPC/mount/PID namespaces without a user namespace refused "
        f"with {seen} (needs CAP_SYS_ADMIN)"
    )


def write_id_maps(
    pid: int, *, full: bool, self_map: bool = False, ids: tuple[int, int] | None = None
) -> None:
    """Map the command's user namespace.

    ``full`` (a root launcher, written from the parent namespace): every id
    but ``HIDDEN_ID`` maps to itself, so root inside reads what root outside
    reads (minus the hidden paths). Otherwise (a non-root launcher, or a
    process mapping itself): only its own uid/gid, as the kernel allows.
    ``ids``: the (uid, gid) to map, read *before* unsharing (inside an
    unmapped user namespace the process sees itself as the overflow id).
    """
    uid, gid = ids or (os.geteuid(), os.getegid())
    if full:
        uid_map = gid_map = f"0 0 {HIDDEN_ID}\n"
    else:
        uid_map, gid_map = f"{uid} {uid} 1\n", f"{gid} {gid} 1\n"
    with open(f"/proc/{pid}/uid_map", "w") as fh:
        fh.write(uid_map)
    if not full or self_map:
        with open(f"/proc/{pid}/setgroups", "w") as fh:
            fh.write("deny")
    with open(f"/proc/{pid}/gid_map", "w") as fh:
        fh.write(gid_map)


_SIOCSIFFLAGS = 0x8914
_IFF_UP_RUNNING = 0x1 | 0x40


def loopback_up() -> None:
    """Bring the new network namespace's own loopback up (a command's local servers work)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", _IFF_UP_RUNNING))


def make_mounts_private() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def mount_proc() -> None:
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
_SYS_MOUNT_SETATTR = 442  # one number on every architecture (syscalls added since Linux 5.1)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def make_read_only(path: str = "/") -> None:
    """Make every mount at and below `path` read-only, in this mount namespace only.

    One ``mount_setattr(AT_RECURSIVE)``, all or nothing (Linux >= 5.12). A mount
    made afterwards (the command's TMPDIR and /dev/shm) is writable. Read-only
    mounts refuse any write, truncation included, before Landlock is asked
    (EROFS): with them, a Restricted command's Landlock ruleset need not handle
    truncation, which is what lets the kernel stop its walk up each opened
    file's path at the nearest rule (see ``LandlockPlan.without_truncate``).
    Raises OSError if it did not take.
    """
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(
        _libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(AT_FDCWD),
            path.encode(),
            ctypes.c_uint(AT_RECURSIVE),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
    )


def bind_writable(path: str) -> None:
    """Keep `path` writable in a namespace whose every mount ``make_read_only`` made
    read-only: bind it onto itself (with its submounts) and clear read-only on that
    new mount only. How a write grant (an MCP server's ``write: [paths]``) reaches
    past the read-only remount; Landlock still allows writes only below the paths
    given to ``apply_landlock``. Raises OSError (the path missing, or a mount the
    host locked read-only)."""
    mount(path, path, None, MS_BIND | MS_REC)
    attr = _MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)
    _check(
        _libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(AT_FDCWD),
            path.encode(),
            ctypes.c_uint(0),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
    )


def mount_tmpfs(path: str, size: int, inodes: int) -> None:
    """A private, size- and inode-capped tmpfs (TMPDIR, /dev/shm); gone with the namespace."""
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={inodes},mode=700")


def make_placeholders(directory: str) -> tuple[str, str]:
    """An empty directory and an empty file nobody inside a sandbox may open.

    Bound over a hidden path, they make it fail with the kernel's own
    "Permission denied". Owned by ``HIDDEN_ID`` where we are root (so no
    capability inside the user namespace applies), mode 000 either way.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    hidden_dir = os.path.join(directory, "dir")
    hidden_file = os.path.join(directory, "file")
    with contextlib.suppress(FileExistsError):
        os.mkdir(hidden_dir)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(hidden_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0))
    for path in (hidden_dir, hidden_file):
        os.chmod(path, 0)
        if os.geteuid() == 0:
            os.chown(path, HIDDEN_ID, HIDDEN_ID)
    os.chmod(directory, 0o711)
    return hidden_dir, hidden_file


def hide_paths(paths: Iterable[str], placeholders: tuple[str, str]) -> list[str]:
    """Bind a placeholder over each existing path (following symlinks); returns failures.

    Runs in the command's own mount namespace before Landlock and seccomp; the
    command can never unmount them (no capability, Landlock forbids mount
    changes, seccomp denies umount).
    """
    hidden_dir, hidden_file = placeholders
    failed: list[str] = []
    done: set[str] = set()
    for path in paths:
        try:
            real = os.path.realpath(path)
            if real in done or not os.path.lexists(real):
                continue
            source = hidden_dir if os.path.isdir(real) else hidden_file
            mount(source, real, None, MS_BIND)
            with contextlib.suppress(OSError):
                mount(None, real, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            done.add(real)
        except OSError:
            failed.append(path)
    return failed


# ---------------------------------------------------------------- capabilities


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


def drop_capabilities(last: int, keep: int | None = CAP_DAC_READ_SEARCH) -> None:
    """Leave the process with at most ``keep`` (CAP_DAC_READ_SEARCH), for good.

    Why keep it: "read everywhere" must still hold for root-run notebooks
    (inside a user namespace it applies only to files whose owner is mapped,
    so the hiding placeholders stay closed). The bounding set matters most:
    a root ``execve`` refills the permitted set from it. Without CAP_SETPCAP
    there is nothing to drop and no way to gain capabilities under
    no_new_privs.
    """
    can_drop = True
    for cap in [c for c in range(last + 1) if c not in (keep, CAP_SETPCAP)] + [CAP_SETPCAP]:
        if not can_drop:
            break
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EPERM:
                can_drop = False
            elif exc.errno != errno.EINVAL:
                raise
    with contextlib.suppress(OSError):
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    current = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), current))
    kept = current[0].permitted & (1 << keep) if keep is not None else 0
    data[0] = _CapData(kept, kept, 0)
    _check(_libc.capset(ctypes.byref(header), data))


# --------------------------------------------------------------------- seccomp

# Syscalls no Restricted command needs: metadata changes Landlock does not
# cover, leaving the process tree, reaching other processes, changing the
# machine. EPERM, so the command prints the kernel's own error.
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
    "process_madvise",
    "kcmp",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "open_tree_attr",
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
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
]

# Without an IPC namespace, SysV objects and message queues are host-wide.
_SYSV_SYSCALLS = [
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
]

AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
_CLONE_NS_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)
# ioctl request numbers that write inode metadata through any fd, even a
# read-only one (chattr flags, inode generation, fsxattr flags). Both the
# 64-bit (_IOW(.., long)) and 32-bit-compat (_IOW(.., int)) numbers.
DENIED_IOCTLS = (
    0x5412,  # TIOCSTI: type into the controlling terminal
    0x541C,  # TIOCLINUX
    0x40086602,  # FS_IOC_SETFLAGS
    0x40046602,  # FS_IOC32_SETFLAGS
    0x40087602,  # FS_IOC_SETVERSION
    0x40047602,  # FS_IOC32_SETVERSION
    0x40086604,  # EXT4_IOC_SETVERSION
    0x40046604,  # EXT4_IOC32_SETVERSION
    0x401C5820,  # FS_IOC_FSSETXATTR (xflags: immutable, append-only, project id)
    0xC0189436,  # FIDEDUPERANGE
    0x41009432,  # FS_IOC_SETFSLABEL
)
_LOW32 = 0xFFFFFFFF
_O_ACCMODE = 0o3
_O_TRUNC = 0o1000


def _int_not_in(sc: Any, index: int, allowed: Sequence[int]) -> list[list[Any]]:
    """Argument conditions that together match "low 32 bits of arg not in allowed".

    The kernel reads int arguments as 32 bits; seccomp sees 64. A check on
    the whole register is fooled by high garbage (``262 | 1 << 32`` is 262
    to the kernel), so every condition here masks to the low word: one rule
    per set bit above the allowed range, one per disallowed small value.
    """
    top = max(allowed, default=0)
    bits = max(top.bit_length(), 1)
    conditions = [[sc.Arg(index, sc.MASKED_EQ, 1 << bit, 1 << bit)] for bit in range(bits, 32)]
    conditions += [
        [sc.Arg(index, sc.MASKED_EQ, _LOW32, value)]
        for value in range(1 << bits)
        if value not in allowed
    ]
    return conditions


@dataclass(frozen=True)
class SeccompProfile:
    """What the filter must close, given which namespaces hold.

    ``netns``: sockets of the inet families are harmless (only the private
    loopback exists), so they are allowed; without it every inet socket is
    denied, which also closes TFO, autobind and MPTCP whatever Landlock's ABI.
    ``ipcns``: SysV IPC is private; without it, denied. ``truncate``: Landlock
    below ABI 3 does not handle truncation, so seccomp refuses each route to it
    that needs no write access: truncate(2), and an open for reading with
    O_TRUNC (Linux truncates then, given the file's write permission; every
    route through a writable open is Landlock's). ``openat2`` carries its flags
    behind a pointer seccomp cannot read: ENOSYS, so callers fall back to openat.
    """

    netns: bool = True
    ipcns: bool = True
    truncate: bool = False


def build_seccomp_filter(profile: SeccompProfile) -> Any:
    import pyseccomp as sc

    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)

    def deny(name: str, *args: Any) -> None:
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            f.add_rule(eperm, name, *args)  # not a syscall on this architecture

    for name in _DENIED_SYSCALLS:
        deny(name)
    if not profile.ipcns:
        for name in _SYSV_SYSCALLS:
            deny(name)
    if profile.truncate:
        deny("truncate")
        for name, flags_at in (("open", 1), ("openat", 2)):
            deny(name, sc.Arg(flags_at, sc.MASKED_EQ, _O_ACCMODE | _O_TRUNC, _O_TRUNC))
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            f.add_rule(sc.ERRNO(errno.ENOSYS), "openat2")
    # socket(): inet families only, and only inside a private network namespace;
    # AF_UNIX never (a pathname socket outside is reachable from any netns).
    allowed_domains = (AF_INET, AF_INET6) if profile.netns else ()
    if allowed_domains:
        for cond in _int_not_in(sc, 0, allowed_domains):
            deny("socket", *cond)
        # MPTCP and SCTP stay denied too (depth: Landlock's TCP rules never
        # covered them), compared on the protocol's low 32 bits.
        for proto in (132, 262):
            deny("socket", sc.Arg(2, sc.MASKED_EQ, _LOW32, proto))
    else:
        deny("socket")
    # socketpair(): AF_UNIX stream/seqpacket only. A datagram pair can be
    # re-connected or sendto() any pathname socket on the host.
    for cond in _int_not_in(sc, 0, (AF_UNIX,)):
        deny("socketpair", *cond)
    for sock_type in range(16):
        if sock_type not in (1, 5):
            deny("socketpair", sc.Arg(1, sc.MASKED_EQ, 0xF, sock_type))
    # prlimit64 on any process but itself (pid 0): other processes' limits
    # (kill by CPU limit, forced core dumps) stay out of reach.
    for bit in range(32):
        deny("prlimit64", sc.Arg(0, sc.MASKED_EQ, 1 << bit, 1 << bit))
    for flag in _CLONE_NS_FLAGS:
        deny("clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # libc falls back to clone
    for request in DENIED_IOCTLS:
        deny("ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, request))
    return f


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class CompiledFilter:
    """The seccomp filter as BPF, compiled once; loading it is one prctl."""

    def __init__(self, bpf: bytes) -> None:
        if not bpf or len(bpf) % 8:
            raise ValueError(f"not a BPF program ({len(bpf)} bytes)")
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.addressof(self._buf))

    def load(self) -> None:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        prog = ctypes.byref(self._prog)
        if _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), prog, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))


def compile_seccomp_filter(profile: SeccompProfile) -> CompiledFilter:
    with tempfile.TemporaryFile() as fh:
        build_seccomp_filter(profile).export_bpf(fh)
        fh.seek(0)
        return CompiledFilter(fh.read())


# -------------------------------------------------------------------- landlock


def landlock_abi() -> int:
    import landlockpy

    return int(landlockpy.abi_version())


@dataclass(frozen=True)
class LandlockPlan:
    """Access masks as plain ints, computed once.

    ``abi`` is the highest Landlock ABI whose rights are asked for: the
    kernel's, or lower when ``PHOENIX_LANDLOCK_ABI`` says so (to exercise the
    older-kernel path here). TCP rules are handled only when no private
    network namespace exists; inside one, the command's own loopback servers
    must work and nothing else is reachable anyway.
    """

    abi: int
    handled_fs: int
    handled_net: int
    scoped: int
    read_exec: int
    device: int

    @classmethod
    def build(cls, abi: int, *, tcp_rules: bool) -> LandlockPlan:
        import landlockpy as ll

        fs = ll.AccessFS
        handled_fs = int(ll.fs_for_abi(abi))
        handled_net = (
            int(ll.AccessNet.BIND_TCP | ll.AccessNet.CONNECT_TCP) & int(ll.net_for_abi(abi))
            if tcp_rules
            else 0
        )
        scoped = int(ll.Scope.ABSTRACT_UNIX_SOCKET | ll.Scope.SIGNAL) & int(ll.scope_for_abi(abi))
        device = int(fs.READ_FILE | fs.WRITE_FILE | fs.TRUNCATE | fs.IOCTL_DEV) & handled_fs
        return cls(
            abi=abi,
            handled_fs=handled_fs,
            handled_net=handled_net,
            scoped=scoped,
            read_exec=int(fs.READ_FILE | fs.READ_DIR | fs.EXECUTE),
            device=device,
        )

    def without_truncate(self) -> LandlockPlan:
        """This plan, truncation left unhandled: only for a command whose every
        read-only mount is read-only (``make_read_only``), where the kernel refuses a
        truncation with EROFS before Landlock is asked.

        Why: Landlock checks an optional right, truncation, on every open, and a right
        no rule grants makes it walk each opened file's path up to "/" (rg over
        5,000 files: ~4 ms of Landlock against ~2 ms without it, with a rule at the
        search root where the walk then stops)."""
        import landlockpy as ll

        keep = ~int(ll.AccessFS.TRUNCATE)
        return replace(self, handled_fs=self.handled_fs & keep, device=self.device & keep)


def apply_landlock(
    plan: LandlockPlan,
    writable: Iterable[str],
    devices: Iterable[str],
    near: Iterable[str] = (),
) -> None:
    """Read and execute everywhere, write only below `writable`.

    ``near``: directories (the command's working directory) given read and execute
    again. They grant nothing the rule on "/" does not; with a plan that handles
    no right left ungranted on a read (``without_truncate``), they are where the
    kernel's walk up an opened file's path ends, instead of at "/".
    """
    import landlockpy as ll

    with ll.Ruleset(
        handled_fs=ll.AccessFS(plan.handled_fs),
        handled_net=ll.AccessNet(plan.handled_net),
        scoped=ll.Scope(plan.scoped),
    ) as rs:
        rs.allow_path("/", ll.AccessFS(plan.read_exec))
        for path in near:
            with contextlib.suppress(OSError):
                rs.allow_path(path, ll.AccessFS(plan.read_exec))
        for path in writable:
            rs.allow_path(path, ll.AccessFS(plan.handled_fs))
        for dev in devices:
            if os.path.exists(dev):
                rs.allow_path(dev, ll.AccessFS(plan.device))
        rs.restrict()


# ------------------------------------------------- the fork path (run_python)


@dataclass(frozen=True)
class ChildPolicy:
    """What `confine_forked_child` applies; plain data, built by ``sandbox.child_policy``."""

    namespaces: NamespacePlan
    landlock: LandlockPlan
    seccomp_profile: SeccompProfile
    tmpdir: str  # an existing empty directory: the private tmpfs is mounted on it
    hidden: tuple[str, ...] = ()
    placeholders: tuple[str, str] = ("", "")
    env: dict[str, str] = field(default_factory=dict)
    tmp_bytes: int = 256 << 20
    tmp_inodes: int = 16384
    cgroup_procs: tuple[str, ...] = ()  # cgroup.procs files to join first
    devices: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full")
    rlimits: dict[str, int] = field(default_factory=dict)


def confine_current_child(policy: ChildPolicy, compiled: CompiledFilter | None = None) -> int:
    """See ``sandbox.confine_forked_child`` (the documented entry point).

    Returns ``/proc/self/pagemap`` opened (close-on-exec) just before this process
    makes itself non-dumpable: afterwards its /proc files belong to the host's root,
    and a non-root process may not open its own pagemap (EACCES), which the secret
    scrub reads. An open pagemap keeps working: the kernel checks access at open.
    """
    import resource
    import signal

    for procs in policy.cgroup_procs:
        with open(procs, "w") as fh:
            fh.write("0")
    ns = policy.namespaces
    if ns.flags:
        ids = (os.geteuid(), os.getegid())
        unshare((CLONE_NEWUSER if ns.user else 0) | ns.flags)
        if ns.user:
            write_id_maps(os.getpid(), full=False, self_map=True, ids=ids)
        make_mounts_private()
        loopback_up()
        alive_r, alive_w = os.pipe()
        pid = os.fork()
        if pid:
            # The intermediate: outside the new PID namespace, it only relays
            # the exit status of the namespace's init (the confined child).
            os.close(alive_r)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                    break
                except InterruptedError:
                    continue
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        os.close(alive_w)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.set_blocking(alive_r, False)
        try:
            if os.read(alive_r, 1) == b"":
                os._exit(137)  # the intermediate died before PDEATHSIG was armed
        except BlockingIOError:
            pass
        if ns.proc:
            mount_proc()
        mount_tmpfs(policy.tmpdir, policy.tmp_bytes, policy.tmp_inodes)
        with contextlib.suppress(OSError):
            mount_tmpfs("/dev/shm", policy.tmp_bytes, policy.tmp_inodes)
        if policy.placeholders[0]:
            hide_paths(policy.hidden, policy.placeholders)
    for name, value in policy.rlimits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.environ.clear()
    os.environ.update(policy.env)
    pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        prctl(PR_SET_DUMPABLE, 0)
        drop_capabilities(last_cap(), None)  # self-mapped: the kernel's own uid, nothing more
        writable = [policy.tmpdir] + (["/dev/shm"] if ns.flags else [])
        apply_landlock(policy.landlock, writable, policy.devices)
        (compiled or compile_seccomp_filter(policy.seccomp_profile)).load()
    except BaseException:
        os.close(pagemap)
        raise
    return pagemap
