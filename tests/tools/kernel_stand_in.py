"""This process plays the kernel: the set-up the kernel-fork tests and bench_fork share.

A kernel is a threaded process holding the user's data; the kernel tools fork it.
Tests and benchmarks that stand in for it need the same few parts, kept here once:

* `kernel_thread()`: a second thread, idle and holding a lock at fork time, as the
  kernel's own threads do (a fork must not depend on locks other threads hold);
* `stand_in(namespace)`: a `DictKernel` over that namespace (a real KernelPort) and
  the Restricted `ToolContext` that `RunPythonTool` runs with in a notebook;
* `descendants` / `forks_of` / `alive`: the process tree read from /proc, to show
  that a fork and everything it started are gone (PID namespaces do not hide them
  from here), leaving out the long-lived sandbox launcher.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.kernel_port import DictKernel

LAUNCHER = b"sandbox/child/launcher.py"  # the sandbox launcher's command line names its script


@contextmanager
def kernel_thread() -> Iterator[threading.Lock]:
    """A second thread, idle, and a lock held across any fork made meanwhile."""
    lock = threading.Lock()
    lock.acquire()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        yield lock
    finally:
        stop.set()
        lock.release()


def stand_in(
    namespace: Mapping[str, Any], *, mode: Mode = Mode.RESTRICTED, cwd: Path | None = None
) -> tuple[DictKernel, ToolContext]:
    """A kernel over `namespace` and the context the kernel tools run with in a notebook."""
    kernel = DictKernel(namespace=dict(namespace))
    ctx = ToolContext(
        cwd=cwd or Path.cwd(),
        mode=mode,
        commands=CommandRunner(info=detect_sandbox()),
        kernel=kernel,
    )
    return kernel, ctx


def alive(pid: int) -> bool:
    """Running or sleeping anywhere (a zombie or a vanished pid is not alive)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(root: int) -> set[int]:
    """Live (non-zombie) descendants of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def forks_of(pids: set[int]) -> set[int]:
    """Leave out the sandbox launcher (a long-lived helper it may start or re-fork meanwhile)."""
    out = set()
    for pid in pids:
        try:
            if LAUNCHER not in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.add(pid)
        except OSError:
            pass
    return out
