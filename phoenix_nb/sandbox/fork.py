"""Confining a fork of the kernel as a Restricted command is confined.

The conversation's `commands.CommandRunner` builds a `ChildPolicy` and a
`ChildCgroup` here before the kernel tools fork (``CommandRunner.confine_fork``,
from the conversation's policy and budget); ``tools/kernel/fork.py`` applies it
in the child with `confine_forked_child`. The mechanisms are the launcher's own
(``child/confine.py``, ``child/cgroup.py``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from phoenix_nb.sandbox.child import cgroup, confine
from phoenix_nb.sandbox.child.confine import ChildPolicy
from phoenix_nb.sandbox.errors import SandboxError
from phoenix_nb.sandbox.hidden import hidden_paths
from phoenix_nb.sandbox.launcher_client import launcher
from phoenix_nb.sandbox.policy import SandboxLimits, SandboxPolicy
from phoenix_nb.sandbox.probe import detect_sandbox
from phoenix_nb.sandbox.rundir import group_for, owner, run_dir

__all__ = ["ChildCgroup", "ChildPolicy", "child_cgroup", "child_policy", "confine_forked_child"]


@functools.cache
def _child_pieces() -> (
    tuple[confine.NamespacePlan, confine.LandlockPlan, confine.CompiledFilter] | None
):
    """Namespace plan, Landlock plan and compiled seccomp for forked children, once."""
    if not detect_sandbox().available:
        return None
    hello = launcher().hello()
    ns = confine.NamespacePlan(
        user=hello.userns,
        flags=confine.SANDBOX_NAMESPACES if hello.namespaces else 0,
        proc=hello.proc,
        why_not=hello.namespaces_why_not,
    )
    abi = hello.landlock_abi or 1
    profile = confine.SeccompProfile(netns=ns.net, ipcns=ns.net, truncate=abi < 3)
    plan = confine.LandlockPlan.build(abi, tcp_rules=not ns.net)
    return ns, plan, confine.compile_seccomp_filter(profile)


@dataclass
class ChildCgroup:
    """A cgroup a forked child joins (inside its conversation's budget); remove it after."""

    group: cgroup.CommandGroup

    @property
    def procs_files(self) -> tuple[str, ...]:
        return tuple(os.path.join(d, "cgroup.procs") for d in self.group.dirs)

    def limits_hit(self, before: Mapping[str, int]) -> list[str]:
        after = self.group.counters()
        return [k for k in ("memory", "pids") if after.get(k, 0) > before.get(k, 0)]

    def counters(self) -> dict[str, int]:
        return dict(self.group.counters())

    def kill_members(self) -> None:
        for pid in self.group.members():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        self.group.remove()


@functools.cache
def _cgroup_setup() -> cgroup.CgroupSetup:
    return cgroup.detect(owner() + "-fork")


def child_cgroup(conversation_id: str, limits: SandboxLimits) -> ChildCgroup | None:
    """A fresh cgroup for one forked child, bounded by the conversation's budget.

    Call in the kernel before forking; pass ``procs_files`` in the policy
    (the child joins before it unshares); ``remove()`` after the child is
    reaped. None only where this host gives no cgroup at all (see
    ``guarantees()``); where it does, a group that cannot be made with these
    limits (read back after writing them) raises SandboxError, so the child
    is never forked outside its budget. The wait for transient races is
    short here: this runs on the kernel's event loop.
    """
    setup = _cgroup_setup()
    if not setup.version:
        return None
    lim = limits
    name = f"{os.getpid()}-{threading.get_ident()}-{id(object())}"
    try:
        group = cgroup.make_group(
            setup, group_for(conversation_id), name, lim.memory, lim.max_procs, settle=1.0
        )
    except OSError as exc:
        raise SandboxError(f"the fork's cgroup budget could not be applied ({exc})") from exc
    try:
        cgroup.verify(group, [], lim.memory, lim.max_procs)
    except OSError as exc:
        group.remove()
        raise SandboxError(f"the fork's cgroup budget could not be applied ({exc})") from exc
    return ChildCgroup(group)


def child_policy(
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    tmpdir: str | os.PathLike[str],
    policy: SandboxPolicy,
    cgroup: ChildCgroup | None = None,
    cpu_seconds: int | None = None,
) -> ChildPolicy:
    """Everything `confine_forked_child` applies, built in the kernel before the fork.

    ``tmpdir``: an existing empty directory you own (e.g. a ``mkdtemp`` under
    ``run_dir()``); a private tmpfs capped at the limits is mounted on it in
    the child's mount namespace (without namespaces it is used as is) and
    TMPDIR points at it. ``env`` is the already-allowlisted environment.
    ``policy``: the conversation's (its limits and deny list).
    Raises SandboxError where Restricted mode is unavailable.
    """
    pieces = _child_pieces()
    if pieces is None:
        raise SandboxError(f"Restricted mode is unavailable: {detect_sandbox().reason}")
    ns, plan, _ = pieces
    lim = policy.limits
    rlimits = {
        "RLIMIT_CORE": 0,
        "RLIMIT_AS": lim.address_space,
        "RLIMIT_FSIZE": lim.file_size,
        "RLIMIT_CPU": cpu_seconds or lim.cpu_seconds or 3600,
    }
    placeholders = (
        (str(run_dir() / "hide" / "dir"), str(run_dir() / "hide" / "file"))
        if ns.flags
        else ("", "")
    )
    return ChildPolicy(
        namespaces=ns,
        landlock=plan,
        seccomp_profile=confine.SeccompProfile(netns=ns.net, ipcns=ns.net, truncate=plan.abi < 3),
        tmpdir=str(tmpdir),
        hidden=tuple(hidden_paths(cwd, policy)),
        placeholders=placeholders,
        env={**env, "TMPDIR": str(tmpdir)},
        tmp_bytes=lim.tmp_bytes,
        tmp_inodes=lim.tmp_inodes,
        cgroup_procs=cgroup.procs_files if cgroup is not None else (),
        rlimits=rlimits,
    )


def confine_forked_child(policy: ChildPolicy) -> int:
    """Confine a freshly forked, single-threaded child of the kernel, as Restricted bash is.

    Call it in the child right after ``os.fork()`` (after closing inherited
    fds, before running any job code). In order: joins the cgroup
    (``policy.cgroup_procs``), unshares user+network+IPC+mount+PID namespaces
    (self-mapped ids: only the kernel's own uid is mapped), brings loopback
    up, and **forks once more**: the process that called it becomes a silent
    intermediate that waits for its child and ``_exit``s with its status
    (SIGINT/SIGTERM/SIGHUP ignored) — it never returns; the new child is PID 1
    of the new PID namespace and is the one that returns. PID 1 dies with
    the intermediate (PDEATHSIG), and every process it starts dies with it,
    so SIGKILL to the intermediate (or its process group) ends the lot.
    PID 1 then mounts a fresh /proc, the capped tmpfs on ``policy.tmpdir``
    and /dev/shm, hides the credential paths, applies rlimits, replaces
    ``os.environ`` with ``policy.env``, makes itself non-dumpable, drops
    capabilities, and applies Landlock and seccomp. Where namespaces are
    unavailable it confines the calling process itself without forking.
    Raises OSError if any step fails: the caller must then ``_exit`` without
    running the job.

    Returns an open ``/proc/self/pagemap`` of the confined process, for
    ``scrub_secrets(pagemap=...)``, which closes it before the job runs. It is
    opened before the process makes itself non-dumpable, the only moment a
    non-root process may (after it, its /proc files belong to the host's root):
    no window in which the process is dumpable is opened for it.
    """
    pieces = _child_pieces()
    compiled = pieces[2] if pieces is not None else None
    return confine.confine_current_child(policy, compiled)
