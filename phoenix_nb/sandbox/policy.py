"""What a conversation's Restricted commands may use and must not read: a value.

The runtime builds one `SandboxPolicy` per `Phoenix` from its Settings and
passes it down (``Services`` -> ``ToolContext``); nothing here is process
state, so two `Phoenix` objects in one process each keep their own limits and
deny list.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["DEFAULT_DENY_READ", "SandboxLimits", "SandboxPolicy", "with_limits"]

# "~" is the user's home; globs are expanded when a command starts; a name
# without "/" (".env*") is matched in the command's working directory and
# the directories above it.
DEFAULT_DENY_READ: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "~/.npmrc",
    "~/.config/gh",
    "~/.password-store",
    "~/.ipython/profile_*/history.sqlite",  # every cell's source, secrets included
    "~/.env*",
    ".env*",
)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of a Restricted command (REQ-BASH-008), ``c.Phoenix.sandbox_*``.

    ``memory`` and ``max_procs`` are whole-tree budgets shared by one
    conversation's commands and background jobs (cgroup ``memory.max`` /
    ``pids.max``; memory includes TMPDIR, /dev/shm, memfd and SysV shm pages).
    ``tmp_bytes``/``tmp_inodes`` cap TMPDIR and /dev/shm (each a tmpfs).
    ``address_space``, ``file_size`` and ``cpu_seconds`` are per-process
    rlimits; CPU time bounds a spinning process even if the wall-clock
    timeout were lost.
    """

    address_space: int = 4 << 30
    file_size: int = 1 << 30
    max_procs: int = 1024
    cpu_seconds: int | None = None  # None: the command's timeout, rounded up, plus 5
    memory: int = 4 << 30
    tmp_bytes: int = 1 << 30
    tmp_inodes: int = 65536


@dataclass(frozen=True)
class SandboxPolicy:
    """Process-wide settings the runtime sets from `c.Phoenix.*` (``configure``)."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    deny_read: tuple[str, ...] = DEFAULT_DENY_READ
    extra_hidden: tuple[str, ...] = ()  # e.g. the store's folder when c.Phoenix.home is set


_POLICY = SandboxPolicy()


def configure(
    *,
    limits: SandboxLimits | None = None,
    deny_read: Iterable[str] | None = None,
    extra_hidden: Iterable[str] = (),
) -> SandboxPolicy:
    """Set the process-wide sandbox policy (the runtime calls this from its Settings)."""
    global _POLICY
    _POLICY = SandboxPolicy(
        limits or SandboxLimits(),
        tuple(deny_read) if deny_read is not None else DEFAULT_DENY_READ,
        tuple(str(p) for p in extra_hidden),
    )
    return _POLICY


def policy() -> SandboxPolicy:
    return _POLICY


def with_limits(limits: SandboxLimits, **changes: Any) -> SandboxLimits:
    return replace(limits, **changes)


def configure_from_settings(settings: Any, store_root: str | os.PathLike[str] | None) -> None:
    """Set the policy from the runtime's Settings (duck-typed: tools never import runtime).

    Reads ``sandbox_memory``, ``sandbox_max_procs``, ``sandbox_tmp_bytes``,
    ``sandbox_tmp_inodes`` and ``deny_read`` (None: the defaults); the store's
    folder is always hidden.
    """
    base = SandboxLimits()
    limits = replace(
        base,
        memory=int(getattr(settings, "sandbox_memory", base.memory)),
        max_procs=int(getattr(settings, "sandbox_max_procs", base.max_procs)),
        tmp_bytes=int(getattr(settings, "sandbox_tmp_bytes", base.tmp_bytes)),
        tmp_inodes=int(getattr(settings, "sandbox_tmp_inodes", base.tmp_inodes)),
    )
    deny = getattr(settings, "deny_read", None)
    configure(
        limits=limits,
        deny_read=tuple(deny) if deny is not None else None,
        extra_hidden=(str(store_root),) if store_root is not None else (),
    )
