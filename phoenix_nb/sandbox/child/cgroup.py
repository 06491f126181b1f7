"""Cgroups that bound a whole command tree: one budget per conversation.

One job: find where this process may create cgroups (v2 unified, or the v1
``memory`` and ``pids`` hierarchies), build ``<base>/phoenix-u<uid>-<owner>/<group>/
<command>`` directories (the kernel's own directory is named after its user too, and
made 0700: on a shared host, a JupyterHub, two users' kernels whose conversations
have the same group name never share a cgroup, and neither can list the other's),
write the limits on the group (a conversation: its foreground commands and
background jobs share one ``memory`` and ``pids`` budget), place processes,
list members (the escape-proof kill sweep) and read which limit was hit. Memory
counted by the memory controller includes page cache, tmpfs and shmem pages the
tree touches (its TMPDIR, /dev/shm, memfds, SysV shm), which per-process
``RLIMIT_AS`` never saw.

Standard library only (the launcher loads it by file path). Where no cgroup
can be created at all (an undelegated cgroup v2 subtree, a read-only cgroupfs)
``CgroupSetup.version`` is 0 and ``why_not`` says why; the caller reports that
whole-tree limits are lost and keeps per-process rlimits. Where cgroups work,
``make_group``/``ensure_limits``/``verify`` raise ``GroupError`` instead of
degrading, so a Restricted command is refused rather than run without its
budget.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass

# A group is made while other commands of the same conversation finish and
# remove it when it is empty (``CommandGroup.remove``), and another kernel's
# launcher may sweep stale groups: those races show as ENOENT (the directory
# went away under us) or EBUSY (a lower memory limit while exiting tasks still
# hold pages). They pass; retry them with a growing pause until this deadline.
# Anything else (EACCES, EROFS, ENOSPC) will not pass and fails at once.
_SETTLE_SECONDS = 15.0
# EEXIST too: `os.makedirs(exist_ok=True)` raises it when the group it found existing
# is removed (a finishing command's empty group) before it checks that it is a directory.
_TRANSIENT = frozenset({errno.ENOENT, errno.EBUSY, errno.EAGAIN, errno.EINTR, errno.EEXIST})


class GroupError(OSError):
    """A command's cgroup could not be made, limited or verified; ``str()`` says why."""


@dataclass(frozen=True)
class CgroupSetup:
    version: int = 0  # 0: none usable, 1: v1 memory+pids, 2: unified
    bases: tuple[str, ...] = ()  # v1: (memory, pids); v2: (unified,)
    why_not: str = ""


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            pre, _, post = line.partition(" - ")
            fields, post_fields = pre.split(), post.split()
            if post_fields and post_fields[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], post_fields[0], post_fields[-1]))
    return found


def _own_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def owner_dir(owner: str, uid: int | None = None) -> str:
    """The name of a kernel's own cgroup directory: ``phoenix-u<uid>-<owner>``."""
    return f"phoenix-u{os.getuid() if uid is None else uid}-{owner}"


def _owner_of(name: str) -> str | None:
    """The owner a directory of this uid's kernels is named after (None: not ours).
    Names without the uid (``phoenix-<pid>-<start>``) come from older versions."""
    mine = f"phoenix-u{os.getuid()}-"
    if name.startswith(mine):
        return name[len(mine) :]
    if name.startswith("phoenix-") and name[len("phoenix-") : len("phoenix-") + 1].isdigit():
        return name[len("phoenix-") :]
    return None


def _private_dir(path: str) -> None:
    """Make ``path`` (its parent exists) mode 0700 if it is missing. cgroupfs makes
    directories 0755 whatever mkdir asks, so the mode is set after; where the hierarchy
    refuses a mode change the directory stays as made (root-owned groups are
    writable by root alone anyway)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)


def _try_dir(base: str, owner: str) -> str:
    path = os.path.join(base, owner_dir(owner))
    _private_dir(path)
    return path


def detect(owner: str) -> CgroupSetup:
    """Where commands' cgroups go for this kernel (``owner`` names it); never raises."""
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as exc:
        return CgroupSetup(why_not=f"cannot read cgroup mounts ({exc.strerror})")
    v1 = {}
    for point, fstype, options in mounts:
        if fstype == "cgroup":
            for ctl in ("memory", "pids"):
                if ctl in options.split(","):
                    v1[ctl] = os.path.join(point, own.get(ctl, "/").lstrip("/"))
    problems = []
    if "memory" in v1 and "pids" in v1:
        try:
            return CgroupSetup(1, (_try_dir(v1["memory"], owner), _try_dir(v1["pids"], owner)))
        except OSError as exc:
            problems.append(f"cgroup v1 not writable ({exc.strerror})")
    for point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        base = os.path.join(point, own.get("", "/").lstrip("/"))
        try:
            with open(os.path.join(base, "cgroup.controllers")) as fh:
                controllers = fh.read().split()
            if not {"memory", "pids"} <= set(controllers):
                problems.append("cgroup v2 without the memory and pids controllers")
                continue
            path = _try_dir(base, owner)
            with open(os.path.join(base, "cgroup.subtree_control"), "w") as fh:
                fh.write("+memory +pids")
            with open(os.path.join(path, "cgroup.subtree_control"), "w") as fh:
                fh.write("+memory +pids")
            return CgroupSetup(2, (path,))
        except OSError as exc:
            problems.append(
                f"cgroup v2 subtree not delegated to this process ({exc.strerror}); run "
                "Jupyter under `systemd-run --user --scope -p Delegate=yes` to get one"
            )
    return CgroupSetup(why_not="; ".join(problems) or "no cgroup filesystem mounted")


# Control files are read and written with one system call each, not through
# Python's file objects (whose open alone is five calls and two objects): a
# command's start reads about a dozen of them while the caller waits.


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    """A control file's whole text (they are far smaller than one read)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


def _read_counter(path: str, key: str) -> int:
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


@dataclass
class CommandGroup:
    """One command's cgroup (a directory per hierarchy) inside its group's budget."""

    setup: CgroupSetup
    dirs: tuple[str, ...]
    group_dirs: tuple[str, ...]

    def place(self, pid: int) -> None:
        """Move `pid` and its children (a pre-forked command) into this cgroup.

        Raises OSError where the move failed (the directory went away).

        The children are read *after* `pid` moved: a fork that finished
        before the move shows in the list, one after it inherits the cgroup
        (migration and fork exclude each other in the kernel).
        """
        for d in self.dirs:
            _write(os.path.join(d, "cgroup.procs"), str(pid))
        children: list[int] = []
        with contextlib.suppress(OSError, ValueError):
            children = [int(x) for x in _read(f"/proc/{pid}/task/{pid}/children").split()]
        for d in self.dirs:
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    _write(os.path.join(d, "cgroup.procs"), str(child))

    def holds(self, pids: list[int]) -> bool:
        """Whether every one of ``pids`` is in this cgroup (in each hierarchy)."""
        for d in self.dirs:
            try:
                inside = {int(x) for x in _read(os.path.join(d, "cgroup.procs")).split()}
            except (OSError, ValueError):
                return False
            if not set(pids) <= inside:
                return False
        return True

    def members(self) -> list[int]:
        try:
            return [int(x) for x in _read(os.path.join(self.dirs[-1], "cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def counters(self) -> dict[str, int]:
        """Limit events so far on the group: {"memory": oom kills, "pids": refused forks}."""
        # Read at both levels: which one counts an OOM kill differs between
        # cgroup versions and kernels (the limit is on the group, the victim
        # in the command's cgroup); only an increase matters.
        if self.setup.version == 1:
            mem, pids = self.group_dirs
            own_mem = self.dirs[0]
            return {
                "memory": sum(
                    _read_counter(os.path.join(d, "memory.oom_control"), "oom_kill")
                    for d in (mem, own_mem)
                ),
                "pids": _read_counter(os.path.join(pids, "pids.events"), "max"),
            }
        (group,) = self.group_dirs
        return {
            "memory": sum(
                _read_counter(os.path.join(d, "memory.events"), "oom_kill")
                for d in (group, self.dirs[0])
            ),
            "pids": _read_counter(os.path.join(group, "pids.events"), "max"),
        }

    def remove(self) -> None:
        """Remove the command's cgroup, and its group's when that is empty now."""
        for d in self.dirs + self.group_dirs:
            with contextlib.suppress(OSError):
                os.rmdir(d)


def make_group(
    setup: CgroupSetup,
    group: str,
    command: str,
    memory: int | None,
    pids: int | None,
    settle: float = _SETTLE_SECONDS,
    ahead: bool = False,
) -> CommandGroup:
    """Make ``<group>/<command>`` with the group's limits (re)written, or raise GroupError.

    ``ahead``: made for a spare, before any request, from the budget a
    previous request used. Then an existing group's limits are left alone: a
    request that changed the budget may have set them since, while its command
    runs (a spare is prepared after a command, as the next one starts), and
    the request path writes and verifies every request's own limits anyway.

    Transient races (the empty group removed by a finishing command between
    our mkdir calls, a lower memory limit refused while pages are still
    charged) are retried for ``settle`` seconds; a lasting failure raises
    with its cause, so a caller can refuse the command rather than run it
    outside its budget.
    """
    if not setup.version:
        raise GroupError("this host gives no cgroup")
    deadline = time.monotonic() + settle
    pause = 0.001
    while True:
        group_dirs = tuple(os.path.join(base, group) for base in setup.bases)
        dirs = tuple(os.path.join(g, command) for g in group_dirs)
        try:
            for base in setup.bases:
                _private_dir(base)  # a sweep may have taken the owner's dir
                if setup.version == 2:
                    _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
            fresh = not all(os.path.isdir(g) for g in group_dirs)
            for g in group_dirs:
                os.makedirs(g, exist_ok=True)
            if fresh or not ahead:
                set_limits(setup, group_dirs, memory, pids)
            made = []
            try:
                for d in dirs:
                    os.mkdir(d)
                    made.append(d)
            except FileExistsError:
                for d in made:
                    with contextlib.suppress(OSError):
                        os.rmdir(d)
                command += "x"
                continue
            return CommandGroup(setup, dirs, group_dirs)
        except OSError as exc:
            if exc.errno not in _TRANSIENT or time.monotonic() > deadline:
                raise GroupError(
                    f"cannot make cgroup {group}/{command}: {exc.strerror or exc}",
                ) from exc
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def ensure_limits(
    setup: CgroupSetup, group: CommandGroup, memory: int | None, pids: int | None
) -> None:
    """(Re)write ``group``'s limits, retrying transient refusals; GroupError when they stay."""
    deadline = time.monotonic() + _SETTLE_SECONDS
    pause = 0.001
    while True:
        try:
            set_limits(setup, group.group_dirs, memory, pids)
            return
        except OSError as exc:
            if exc.errno not in _TRANSIENT or time.monotonic() > deadline:
                raise GroupError(f"cannot set the cgroup's limits: {exc.strerror or exc}") from exc
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def verify(group: CommandGroup, procs: list[int], memory: int | None, pids: int | None) -> None:
    """Raise GroupError unless ``procs`` are in ``group`` and the group's limits are these.

    Read back from the cgroup filesystem after placement, so a command never
    starts under limits other than its request's: a group removed and made
    again by someone else, stale limits, or a move that did not happen show here.
    """
    if not group.holds(procs):
        raise GroupError(f"the command is not in its cgroup {group.dirs[-1]}")
    if group.setup.version == 1:
        mem, pid_dir = group.group_dirs
        want = {os.path.join(pid_dir, "pids.max"): str(pids) if pids is not None else "max"}
        if memory is not None:
            page = os.sysconf("SC_PAGE_SIZE")
            want[os.path.join(mem, "memory.limit_in_bytes")] = str(memory // page * page)
            # Without hierarchical accounting the command's own cgroup would
            # not count against its group's limit.
            for d in (mem, group.dirs[0]):
                want[os.path.join(d, "memory.use_hierarchy")] = "1"
    else:
        (g,) = group.group_dirs
        want = {
            os.path.join(g, "memory.max"): (
                str(memory // os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PAGE_SIZE"))
                if memory is not None
                else "max"
            ),
            os.path.join(g, "pids.max"): str(pids) if pids is not None else "max",
        }
    for path, value in want.items():
        try:
            got = _read(path).strip()
        except OSError as exc:
            raise GroupError(f"cannot read {path} ({exc.strerror})") from exc
        if got != value:
            raise GroupError(f"{path} is {got}, not {value}")


def set_limits(
    setup: CgroupSetup, group_dirs: tuple[str, ...], memory: int | None, pids: int | None
) -> None:
    if setup.version == 1:
        mem, pid_dir = group_dirs
        _write(os.path.join(pid_dir, "pids.max"), str(pids) if pids is not None else "max")
        if memory is not None:
            # v1 wants memory <= memory+swap at every step: raise memsw first when
            # raising, lower memory first when lowering (so: memsw, memory, memsw).
            memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
            with contextlib.suppress(OSError):  # only with swap accounting
                _write(memsw, str(memory))
            _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory))
            with contextlib.suppress(OSError):
                _write(memsw, str(memory))
        return
    (group,) = group_dirs
    with contextlib.suppress(OSError):
        _write(os.path.join(group, "cgroup.subtree_control"), "+memory +pids")
    _write(os.path.join(group, "memory.max"), str(memory) if memory is not None else "max")
    with contextlib.suppress(OSError):
        _write(os.path.join(group, "memory.swap.max"), "0")
    _write(os.path.join(group, "pids.max"), str(pids) if pids is not None else "max")


def remove_stale(setup: CgroupSetup, alive: object) -> None:
    """Remove empty cgroups of this uid's kernels that are gone (``alive(owner) -> bool``);
    another user's are theirs to sweep."""
    for base in setup.bases:
        parent = os.path.dirname(base)
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                owner = _owner_of(name)
                if owner is None or alive(owner):  # type: ignore[operator]
                    continue
                _rmdir_tree(os.path.join(parent, name))


def _rmdir_tree(path: str) -> None:
    """rmdir a cgroup tree bottom-up, iteratively (never recursion, never raises)."""
    stack, order = [path], []
    while stack:
        d = stack.pop()
        order.append(d)
        with contextlib.suppress(OSError):
            for entry in os.scandir(d):
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    for d in reversed(order):
        with contextlib.suppress(OSError):
            os.rmdir(d)
