"""The launcher's wire protocol, parsed into types once, at the edge.

The request is a `RunSpec` (``to_request`` is its one writer). The launcher
process answers in JSON (see ``child/launcher.py``); the kernel side reads
those messages only through the parsers here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from phoenix_nb.sandbox.policy import SandboxLimits

__all__ = ["RunSpec"]


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
    group: str = ""  # the conversation's cgroup budget
    hidden: tuple[str, ...] = ()
    discard_stderr: bool = False  # stderr to /dev/null (output_fd carries stdout only)

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
            "memory": self.limits.memory,
            "tmp_bytes": self.limits.tmp_bytes,
            "tmp_inodes": self.limits.tmp_inodes,
            "group": self.group,
            "hidden": list(self.hidden),
            "discard_stderr": self.discard_stderr,
            "limits": asdict(self.limits),
        }
