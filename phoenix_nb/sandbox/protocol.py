"""The launcher's wire protocol, parsed into types once, at the edge.

The request is a `RunSpec` (``to_request`` is its one writer). The launcher
process answers in JSON (see ``child/launcher.py``); the kernel side reads
those messages only through the parsers here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from phoenix_nb.sandbox.errors import SandboxError
from phoenix_nb.sandbox.policy import SandboxLimits

__all__ = ["ExitReport", "Hello", "RunSpec", "Started"]


def _object(data: bytes | str, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise SandboxError(f"the launcher sent a damaged {what}: {data!r}") from exc
    if not isinstance(value, dict):
        raise SandboxError(f"the launcher sent a damaged {what}: {data!r}")
    return value


@dataclass(frozen=True)
class Hello:
    """What the launcher found on this host, sent once on the Restricted socket.

    ``error``: why the launcher cannot confine anything here (then nothing
    else is meaningful).
    """

    landlock_abi: int = 0
    namespaces: bool = False  # user+net+IPC+mount+PID namespaces for each command
    userns: bool = False  # ... including a user namespace
    proc: bool = False  # a fresh /proc can be mounted in the PID namespace
    hiding: bool = False  # placeholders can cover the hidden paths
    namespaces_why_not: str = ""
    cgroup: int = 0  # cgroup version usable for whole-tree budgets; 0: none
    cgroup_why_not: str = ""
    error: str = ""

    @classmethod
    def parse(cls, data: bytes | str) -> Hello:
        """The launcher's first message, ``{"hello": {...}}``; SandboxError if damaged."""
        message = _object(data, "hello")
        body = message.get("hello")
        if not isinstance(body, dict):
            raise SandboxError(f"the launcher sent no hello: {data!r}")
        try:
            return cls(
                landlock_abi=int(body.get("landlock_abi", 0)),
                namespaces=bool(body.get("namespaces")),
                userns=bool(body.get("userns")),
                proc=bool(body.get("proc")),
                hiding=bool(body.get("hiding")),
                namespaces_why_not=str(body.get("namespaces_why_not") or ""),
                cgroup=int(body.get("cgroup", 0)),
                cgroup_why_not=str(body.get("cgroup_why_not") or ""),
                error=str(body.get("error") or ""),
            )
        except (TypeError, ValueError) as exc:
            raise SandboxError(f"the launcher sent a damaged hello: {data!r}") from exc


@dataclass(frozen=True)
class Started:
    """The supervisor's first status line, written before the command may run."""

    pid: int  # the supervisor (0: the command could not be started)
    pgid: int = 0  # the group to kill: the command's bash, or its namespace's PID 1
    tmpdir: str = ""  # a Restricted command's TMPDIR (gone when it ends)

    @classmethod
    def parse(cls, line: bytes) -> Started:
        try:
            first = _object(line, "start line")
            return cls(int(first["pid"]), int(first.get("pgid", 0)), str(first.get("tmpdir", "")))
        except (SandboxError, KeyError, TypeError, ValueError) as exc:
            if not line:
                why = "the sandbox's supervisor ended before it started the command"
                raise SandboxError(why) from exc
            raise SandboxError(f"launcher gave no supervisor pid: {line!r}") from exc


@dataclass(frozen=True)
class ExitReport:
    """How a command ended: its exit code or signal, and the whole-tree limits it hit."""

    exit: int | None
    signal: int | None
    killed: bool = False  # the supervisor killed what was left (cancel, timeout, limit)
    limits: tuple[str, ...] = ()  # "memory", "pids", "tmp_bytes", "tmp_inodes"
    # Why the sandbox did not run the command (a set-up step failed: namespaces, a
    # mount, its cgroup); "" when the command ran, whatever its exit code.
    refused: str = ""

    @classmethod
    def parse(cls, line: bytes) -> ExitReport:
        """The supervisor's last status line; a missing or damaged one reads as killed."""
        try:
            report = _object(line, "report")
            code, sig = report.get("exit"), report.get("signal")
            return cls(
                int(code) if code is not None else None,
                int(sig) if sig is not None else None,
                bool(report.get("killed")),
                tuple(str(name) for name in report.get("limits") or ()),
                str(report.get("refused") or ""),
            )
        except (SandboxError, TypeError, ValueError):
            return cls(None, None, killed=True)


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
            "network": self.network,
            "devices": list(self.devices),
            "rlimits": rlimits,
            "max_procs": self.limits.max_procs,
            "memory": self.limits.memory,
            "tmp_bytes": self.limits.tmp_bytes,
            "tmp_inodes": self.limits.tmp_inodes,
            "group": self.group,
            "hidden": list(self.hidden),
            "discard_stderr": self.discard_stderr,
            "stdin": self.stdin,
            "separate_stderr": self.separate_stderr,
            "limits": asdict(self.limits),
        }
