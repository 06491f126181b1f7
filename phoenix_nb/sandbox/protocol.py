"""The launcher's wire protocol, parsed into types once, at the edge, on both sides.

Standard library only (an import-linter contract): the launcher process, which
imports nothing of phoenix_nb, loads this file by path (``child/launcher.py``'s
``_load``), so the kernel and the launcher read and write the same types.

* `Request`: what to run, one JSON message per command. The kernel writes it
  (``RunSpec.to_request().to_wire()``); the launcher's spare parses it once
  (`Request.parse`) and passes the value on to its command side.
* `Hello`, `Started`, `ExitReport`: the launcher's and the supervisor's answers,
  which the kernel side parses.

A damaged or incomplete message is a `ProtocolError` naming what is wrong (not a
``KeyError`` deep in the command's set-up); the kernel side turns it into its
`SandboxError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ExitReport", "Hello", "ProtocolError", "Request", "Started"]


class ProtocolError(ValueError):
    """A launcher message that is not JSON, not an object, or lacks or mistypes a field.

    A ValueError, not a PhoenixError: this module is loaded by the launcher, which
    imports nothing of phoenix_nb. The kernel side raises `SandboxError` from it.
    """


def _object(data: bytes | str, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"the launcher sent a damaged {what}: {data!r}") from exc
    if not isinstance(value, dict):
        raise ProtocolError(f"the launcher sent a damaged {what}: {data!r}")
    return value


def _field(message: Mapping[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """``message[name]`` of type ``kind`` (``default`` when absent, if one is given)."""
    if name not in message:
        if default is None:
            raise ProtocolError(f"the request has no {name!r}")
        return default
    value = message[name]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise ProtocolError(f"the request's {name!r} is not a {kind.__name__}: {value!r}")
    return value


def _strings(message: Mapping[str, Any], name: str, required: bool = False) -> tuple[str, ...]:
    values = _field(message, name, list, None if required else [])
    if not all(isinstance(v, str) for v in values):
        raise ProtocolError(f"the request's {name!r} is not a list of strings: {values!r}")
    return tuple(values)


@dataclass(frozen=True)
class Request:
    """One command for the launcher, as the launcher's side reads it.

    Built by ``RunSpec.to_request`` (its meaning is documented there); ``rlimits``
    maps ``resource`` names (``RLIMIT_AS``…) to the value set for the command;
    ``memory``/``max_procs`` are the conversation's cgroup budget, ``tmp_bytes``/
    ``tmp_inodes`` the size of the command's private TMPDIR.
    """

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    restricted: bool = False
    linger: bool = False
    writable: tuple[str, ...] = ()
    network: bool = False
    devices: tuple[str, ...] = ()
    rlimits: Mapping[str, int] = field(default_factory=dict)
    max_procs: int = 0
    memory: int = 0
    tmp_bytes: int = 0
    tmp_inodes: int = 0
    group: str = ""
    hidden: tuple[str, ...] = ()
    discard_stderr: bool = False
    stdin: bool = False
    separate_stderr: bool = False

    @classmethod
    def parse(cls, data: bytes | str) -> Request:
        """The request of one message; `ProtocolError` naming the first bad field."""
        message = _object(data, "request")
        argv = _strings(message, "argv", required=True)
        if not argv:
            raise ProtocolError("the request's 'argv' is empty")
        env = _field(message, "env", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ProtocolError("the request's 'env' is not a map of strings")
        rlimits = _field(message, "rlimits", dict, {})
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in rlimits.values()):
            raise ProtocolError(f"the request's 'rlimits' are not integers: {rlimits!r}")
        flags = ("restricted", "linger", "network", "discard_stderr", "stdin", "separate_stderr")
        sizes = ("max_procs", "memory", "tmp_bytes", "tmp_inodes")
        return cls(
            argv=argv,
            cwd=_field(message, "cwd", str),
            env=dict(env),
            writable=_strings(message, "writable"),
            devices=_strings(message, "devices"),
            rlimits=dict(rlimits),
            group=_field(message, "group", str, ""),
            hidden=_strings(message, "hidden"),
            **{name: _field(message, name, bool, False) for name in flags},
            **{name: _field(message, name, int, 0) for name in sizes},
        )

    def to_wire(self) -> bytes:
        """The message (JSON); `parse` reads it back to an equal `Request`."""
        return json.dumps(
            {
                "argv": list(self.argv),
                "cwd": self.cwd,
                "env": dict(self.env),
                "restricted": self.restricted,
                "linger": self.linger,
                "writable": list(self.writable),
                "network": self.network,
                "devices": list(self.devices),
                "rlimits": dict(self.rlimits),
                "max_procs": self.max_procs,
                "memory": self.memory,
                "tmp_bytes": self.tmp_bytes,
                "tmp_inodes": self.tmp_inodes,
                "group": self.group,
                "hidden": list(self.hidden),
                "discard_stderr": self.discard_stderr,
                "stdin": self.stdin,
                "separate_stderr": self.separate_stderr,
            }
        ).encode()


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
        """The launcher's first message, ``{"hello": {...}}``; ProtocolError if damaged."""
        message = _object(data, "hello")
        body = message.get("hello")
        if not isinstance(body, dict):
            raise ProtocolError(f"the launcher sent no hello: {data!r}")
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
            raise ProtocolError(f"the launcher sent a damaged hello: {data!r}") from exc


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
        except (KeyError, TypeError, ValueError) as exc:  # ProtocolError is a ValueError
            if not line:
                why = "the sandbox's supervisor ended before it started the command"
                raise ProtocolError(why) from exc
            raise ProtocolError(f"launcher gave no supervisor pid: {line!r}") from exc


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
        except (TypeError, ValueError):
            return cls(None, None, killed=True)
