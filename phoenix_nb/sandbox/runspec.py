"""The launcher's `RunSpec`: what the kernel asks the launcher to run.

Its one writer of the wire form is ``to_request`` (a `protocol.Request`, the type
the launcher's side parses the message back into).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phoenix_nb.sandbox.policy import SandboxLimits
from phoenix_nb.sandbox.protocol import Request

__all__ = ["RunSpec"]


@dataclass(frozen=True)
class RunSpec:
    """What the launcher should run."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    restricted: bool
    # Restricted only, the grants of an MCP server (user config): ``writable``, the
    # absolute existing directories it may write below (a writable bind mount past
    # the read-only remount, and a Landlock write rule); ``network``, the host's
    # network (no private network namespace; inet sockets and TCP allowed).
    writable: tuple[str, ...] = ()
    network: bool = False
    devices: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cpu_seconds: int = 3600
    linger: bool = False  # background: run until every descendant has exited
    group: str = ""  # the conversation's cgroup budget
    hidden: tuple[str, ...] = ()
    discard_stderr: bool = False  # stderr to /dev/null (output_fd carries stdout only)
    # A long-lived server speaking on stdin/stdout (MCP): the caller's pipe is its
    # stdin (else /dev/null), and its stderr has a pipe of its own, so stdout
    # carries the protocol alone and stderr stays readable for the caller's errors.
    stdin: bool = False
    separate_stderr: bool = False

    def to_request(self) -> Request:
        """The request as it goes on the wire (`Request.to_wire`)."""
        rlimits: dict[str, int] = {"RLIMIT_CORE": 0}
        if self.restricted:
            rlimits |= {
                "RLIMIT_AS": self.limits.address_space,
                "RLIMIT_FSIZE": self.limits.file_size,
                "RLIMIT_NPROC": self.limits.max_procs,
                "RLIMIT_CPU": self.limits.cpu_seconds or self.cpu_seconds,
            }
        return Request(
            argv=tuple(self.argv),
            cwd=self.cwd,
            env=dict(self.env),
            restricted=self.restricted,
            linger=self.linger,
            writable=tuple(self.writable),
            network=self.network,
            devices=tuple(self.devices),
            rlimits=rlimits,
            max_procs=self.limits.max_procs,
            memory=self.limits.memory,
            tmp_bytes=self.limits.tmp_bytes,
            tmp_inodes=self.limits.tmp_inodes,
            group=self.group,
            hidden=tuple(self.hidden),
            discard_stderr=self.discard_stderr,
            stdin=self.stdin,
            separate_stderr=self.separate_stderr,
        )
