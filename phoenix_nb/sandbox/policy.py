"""What a conversation's Restricted commands may use and must not read: a value.

The runtime builds one `SandboxPolicy` per `Phoenix` from its Settings and
passes it down (``Services`` -> ``ToolContext``); nothing here is process
state, so two `Phoenix` objects in one process each keep their own limits and
deny list.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "DEFAULT_DENY_READ",
    "SandboxLimits",
    "SandboxPolicy",
    "ipython_private_paths",
    "private_paths",
    "with_limits",
]

# Read-denied in Restricted mode unless c.Phoenix.deny_read says otherwise.
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


def private_paths() -> tuple[str, ...]:
    """Jupyter's and IPython's own secrets and every phoenix store the environment
    names, as the process sees them now, as glob patterns (each directory part
    escaped): Jupyter's runtime dir (connection files, server tokens), the default
    store under its data dir, ``$PHOENIX_HOME`` and ``$JUPYTER_RUNTIME_DIR``, and
    what `ipython_private_paths` finds. Hidden whichever Phoenix a command belongs
    to: deny by default."""
    found: list[str] = []
    try:
        from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir, jupyter_runtime_dir

        data, config = jupyter_data_dir(), jupyter_config_dir()
        found += [jupyter_runtime_dir(), os.path.join(data, "phoenix")]
        # the key that signs trusted notebooks; the server's hashed password and token
        found += [os.path.join(data, "notebook_secret")]
        found += [os.path.join(config, f"jupyter_{app}_config.json") for app in _APPS]
    except Exception:
        pass
    found += [
        os.environ[name] for name in ("PHOENIX_HOME", "JUPYTER_RUNTIME_DIR") if os.environ.get(name)
    ]
    return tuple(glob.escape(p) for p in found) + ipython_private_paths()


_APPS = ("server", "notebook")


def ipython_private_paths() -> tuple[str, ...]:
    """Where IPython keeps every cell's source, as glob patterns: the running shell's
    history database (``history_manager.hist_file``, wherever its configuration put
    it) and every ``profile_*/history.sqlite`` (with SQLite's journal files) and
    ``profile_*/security`` (old connection files) under the IPython directory in use
    (``$IPYTHONDIR``, else ``~/.ipython``, and the running shell's profile dir), and
    ipykernel's debugger folder, where it writes the cells it debugs
    (``<tmp>/ipykernel_<pid>``).

    Asks IPython only when the process has imported it (a kernel has): the sandbox
    never loads it."""
    dirs: list[str] = [os.path.join(os.path.expanduser("~"), ".ipython")]
    if os.environ.get("IPYTHONDIR"):
        dirs.append(os.path.expanduser(os.environ["IPYTHONDIR"]))
    found: list[str] = []
    paths = sys.modules.get("IPython.paths")
    if paths is not None:
        with contextlib.suppress(Exception):
            dirs.append(str(paths.get_ipython_dir()))
    ipython = sys.modules.get("IPython")
    shell = None
    if ipython is not None:
        try:
            shell = ipython.get_ipython()
        except Exception:
            shell = None
    if shell is not None:
        hist = getattr(getattr(shell, "history_manager", None), "hist_file", None)
        if hist is not None and os.path.isabs(str(hist)):
            found.append(glob.escape(str(hist)) + "*")
        location = getattr(getattr(shell, "profile_dir", None), "location", None)
        if isinstance(location, str) and location:
            found += [
                os.path.join(glob.escape(location), "history.sqlite*"),
                os.path.join(glob.escape(location), "security"),
            ]
    for d in dict.fromkeys(os.path.abspath(d) for d in dirs):
        found += [
            os.path.join(glob.escape(d), "profile_*", "history.sqlite*"),
            os.path.join(glob.escape(d), "profile_*", "security"),
        ]
    found.append(os.path.join(glob.escape(tempfile.gettempdir()), f"ipykernel_{os.getpid()}"))
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class SandboxPolicy:
    """One `Phoenix`'s sandbox policy: its limits and what its commands must not read.

    Built by the runtime from its Settings and passed down as a value
    (``Services.sandbox_policy`` -> ``CommandRunner.policy``); the tools
    and `hidden_paths` read it from there, so two `Phoenix` objects in one
    process each keep their own. ``deny_read``: patterns as in
    `DEFAULT_DENY_READ`. ``extra_hidden``: exact paths hidden as well (the
    store's folder). ``private``: the glob patterns of `private_paths`, read from
    the environment and the running shell once, when the policy is built, so
    expanding the hidden paths of a command reads the policy and not the
    environment (the patterns are expanded at each command's start: a history
    database created since is hidden too).
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    deny_read: tuple[str, ...] = DEFAULT_DENY_READ
    extra_hidden: tuple[str, ...] = ()
    private: tuple[str, ...] = field(default_factory=private_paths)

    @classmethod
    def build(
        cls,
        limits: SandboxLimits | None = None,
        deny_read: Iterable[str] | None = None,
        extra_hidden: Iterable[str | os.PathLike[str]] = (),
    ) -> SandboxPolicy:
        """A policy from settings values (``deny_read=None``: the default list)."""
        return cls(
            limits or SandboxLimits(),
            tuple(deny_read) if deny_read is not None else DEFAULT_DENY_READ,
            tuple(str(p) for p in extra_hidden),
        )


def with_limits(limits: SandboxLimits, **changes: Any) -> SandboxLimits:
    return replace(limits, **changes)
