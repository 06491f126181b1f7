"""This kernel's private run dir and the names of its cgroups.

Both are named after the kernel process (``<pid>-<start time>``): they are
per-process resources, so a later kernel's launcher can tell a dead kernel's
leftovers from a live one's and sweep them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["group_for", "owner", "run_dir"]


@functools.cache
def owner() -> str:
    """This kernel's name for its run dir and cgroups: ``<pid>-<start time>``."""
    try:
        stat = Path("/proc/self/stat").read_bytes()
        start = stat[stat.rindex(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError):
        start = ""
    return f"{os.getpid()}-{start}"


def run_dir() -> Path:
    """This kernel's private folder for TMPDIR mount points, placeholders and job logs.

    ``<tmp>/phoenix-<uid>/<pid>-<start time>``; a later kernel's launcher removes
    the folders of kernels that are gone, so nothing outlives a crash for long.
    """
    base = Path(tempfile.gettempdir()) / f"phoenix-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    _check_private(base)
    path = base / owner()
    path.mkdir(mode=0o711, exist_ok=True)
    return path


def _check_private(folder: Path) -> None:
    """Refuse a run folder another uid made or can enter: on a shared host (a
    JupyterHub) anyone may create ``/tmp/phoenix-<your uid>`` first, as a symlink or
    a folder they can read, and would then see (or plant) this kernel's files."""
    st = os.lstat(folder)
    if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o077:
        raise PermissionError(
            f"{folder} is not this user's private folder (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}): remove it; phoenix makes its own, mode 700"
        )


def group_for(conversation_id: str) -> str:
    """The cgroup name of a conversation's budget."""
    return "c-" + hashlib.sha256(conversation_id.encode()).hexdigest()[:16]
