"""What holds on this host: Restricted mode's availability and its guarantees.

Detected once per process (``detect_sandbox``): the answer describes the
host and this process's launcher, both per-process facts, so it is cached
process-wide. ``PHOENIX_SANDBOX=off`` forces "unavailable";
``PHOENIX_SANDBOX_NAMESPACES=off`` and ``PHOENIX_LANDLOCK_ABI=N`` make this
machine behave like a host without namespaces or with an older Landlock, so
those paths are tested here.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import threading
from dataclasses import dataclass

from phoenix_nb.sandbox.child import confine
from phoenix_nb.sandbox.errors import SandboxError
from phoenix_nb.sandbox.launcher_client import launcher
from phoenix_nb.sandbox.protocol import Hello

__all__ = [
    "KERNEL_REQUIREMENT",
    "MIN_ABI",
    "SANDBOX_ENV",
    "Guarantee",
    "SandboxInfo",
    "detect_sandbox",
    "detect_sandbox_soon",
    "guarantees",
    "lost_guarantees",
    "namespaces_words",
]

log = logging.getLogger(__name__)

# Landlock ABI needed: 1 (filesystem rules). Network isolation comes from the
# network namespace, or, without one, from seccomp denying inet sockets.
MIN_ABI = 1
SANDBOX_ENV = "PHOENIX_SANDBOX"

KERNEL_REQUIREMENT = (
    "Restricted mode needs the Linux Landlock LSM (Linux 5.13 or newer, 'landlock' in the "
    "lsm= boot list) and libseccomp; user namespaces make it complete."
)


@dataclass(frozen=True)
class SandboxInfo:
    """Whether Restricted mode can be enforced here, detected once at start-up."""

    available: bool
    abi: int = 0
    reason: str = ""  # why not, or what is enforced, for the user


def _probe() -> SandboxInfo:
    if os.environ.get(SANDBOX_ENV, "").lower() in ("off", "0", "false", "no"):
        return SandboxInfo(False, 0, f"sandbox disabled by {SANDBOX_ENV}=off. {KERNEL_REQUIREMENT}")
    if not sys.platform.startswith("linux"):
        return SandboxInfo(False, 0, f"not Linux. {KERNEL_REQUIREMENT}")
    with contextlib.suppress(OSError, SandboxError):
        launcher().spawn()  # its start-up overlaps the checks below
    try:
        abi = confine.landlock_abi()
    except Exception as exc:
        return SandboxInfo(False, 0, f"Landlock probe failed ({exc}). {KERNEL_REQUIREMENT}")
    if abi < MIN_ABI:
        return SandboxInfo(False, abi, f"Landlock is not enabled. {KERNEL_REQUIREMENT}")
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    except Exception as exc:
        return SandboxInfo(False, abi, f"libseccomp unavailable ({exc}). {KERNEL_REQUIREMENT}")
    try:
        hello = launcher().hello()
    except (SandboxError, OSError) as exc:
        return SandboxInfo(False, abi, f"sandbox launcher failed ({exc}). {KERNEL_REQUIREMENT}")
    if hello.error:
        return SandboxInfo(False, abi, f"sandbox launcher: {hello.error}. {KERNEL_REQUIREMENT}")
    lost = [g for g in guarantees(hello) if not g.holds]
    summary = f"Landlock ABI {hello.landlock_abi}: " + "; ".join(
        f"{g.name} ({g.mechanism})" for g in guarantees(hello) if g.holds
    )
    if lost:
        summary += ". LOST here: " + "; ".join(f"{g.name} ({g.mechanism})" for g in lost)
    return SandboxInfo(True, hello.landlock_abi, summary)


_DETECT_LOCK = threading.Lock()
_DETECTED: SandboxInfo | None = None


def detect_sandbox() -> SandboxInfo:
    """Detect once per process whether Restricted mode can be enforced (REQ-BASH-009).

    Thread-safe: a caller arriving while a detection is under way (see
    `detect_sandbox_soon`) waits for its result; the probe runs once.
    """
    global _DETECTED
    info = _DETECTED
    if info is None:
        with _DETECT_LOCK:
            if _DETECTED is None:
                _DETECTED = _detect()
            info = _DETECTED
    return info


def detect_sandbox_soon() -> None:
    """Start `detect_sandbox` on a daemon thread and return at once.

    Detection starts the launcher and waits for its hello (~0.2 s of Python
    start-up and probing); `%load_ext` calls this so that wait is off the kernel's
    main thread, and the first real use (`detect_sandbox()`) finds the answer ready
    or waits only for what is left. The thread runs in a copy of the caller's
    context, so anything it logs is attributed to the cell that started it.
    """
    if _DETECTED is None:
        context = contextvars.copy_context()
        threading.Thread(
            target=context.run, args=(detect_sandbox,), name="phoenix-sandbox-detect", daemon=True
        ).start()


def _detect() -> SandboxInfo:
    info = _probe()
    if not info.available:
        log.warning(
            "phoenix: kernel sandbox unavailable, Restricted mode disabled: %s", info.reason
        )
    elif "LOST here" in info.reason:
        log.warning("phoenix: kernel sandbox is partial: %s", info.reason.split("LOST here: ")[1])
    return info


@dataclass(frozen=True)
class Guarantee:
    """One promise of Restricted mode, whether it holds here, and by which mechanism."""

    name: str
    holds: bool
    mechanism: str


def guarantees(hello: Hello | None = None) -> list[Guarantee]:
    """Every guarantee of Restricted mode on this host (for `%phoenix status`)."""
    if hello is None:
        if not detect_sandbox().available:
            return [Guarantee("Restricted mode", False, detect_sandbox().reason)]
        hello = launcher().hello()
    ns = hello.namespaces
    userns = hello.userns
    abi = hello.landlock_abi
    why_ns = hello.namespaces_why_not or "no namespaces"
    cg = hello.cgroup
    out = [
        Guarantee(
            "your files are read-only",
            True,
            ("read-only mounts in its own mount namespace + " if ns else "")
            + f"Landlock ABI {abi}"
            + (" + seccomp refuses truncation" if abi < 3 else ""),
        ),
        Guarantee(
            "no network",
            True,
            "private network namespace (own loopback only)"
            if ns
            else "seccomp denies every inet socket (no local servers either)",
        ),
        Guarantee(
            "other processes unreachable (signals, prlimit, ptrace)",
            ns or abi >= 6,
            "PID namespace"
            if ns
            else (
                "Landlock signal scoping + seccomp (prlimit, ptrace)"
                if abi >= 6
                else f"LOST: {why_ns}; Landlock ABI {abi} < 6 has no signal scoping"
            ),
        ),
        Guarantee(
            "other processes invisible in /proc",
            ns and hello.proc,
            "own /proc in the PID namespace"
            if ns and hello.proc
            else f"LOST: {why_ns if not ns else 'a fresh /proc cannot be mounted here'}",
        ),
        Guarantee(
            "SysV IPC private",
            True,
            "IPC namespace" if ns else "seccomp denies SysV IPC and POSIX queues",
        ),
        Guarantee(
            "credential files unreadable",
            hello.hiding,
            "mount namespace: placeholders over the hidden paths"
            if hello.hiding
            else f"LOST: {why_ns}",
        ),
        Guarantee(
            "no capability outside the sandbox",
            userns or ns,
            "user namespace"
            if userns
            else "capabilities dropped to CAP_DAC_READ_SEARCH (no user namespace)",
        ),
        Guarantee(
            "whole-tree memory and process limits",
            bool(cg),
            f"cgroup v{cg} per conversation"
            if cg
            else f"LOST: per-process rlimits only ({hello.cgroup_why_not})",
        ),
        Guarantee(
            "TMPDIR size and inode caps",
            ns,
            "private tmpfs" if ns else f"LOST: file-size rlimit only ({why_ns})",
        ),
    ]
    return out


def lost_guarantees() -> list[str]:
    """One line per guarantee that does not hold here (empty where all hold)."""
    return [f"{g.name}: {g.mechanism}" for g in guarantees() if not g.holds]


def namespaces_words(hello: Hello | None = None) -> str:
    """The namespace tier this host (a pod, a container) gives Restricted commands, and
    if it is less than all of them, why: the launcher's probe records an admin's or a
    user's PHOENIX_SANDBOX_NAMESPACES=off apart from the kernel refusing, with the errno
    seen, so `%phoenix status` says which of them to change. Empty without a sandbox."""
    if hello is None:
        if not detect_sandbox().available:
            return ""
        hello = launcher().hello()
    if hello.namespaces and hello.userns:
        return "user, network, IPC, mount and PID namespaces"
    if hello.namespaces:
        return "network, IPC, mount and PID namespaces (the launcher is root); " + (
            hello.namespaces_why_not or "no user namespace"
        )
    return hello.namespaces_why_not or "no namespaces"
