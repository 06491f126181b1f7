"""A forked child gets its conversation's cgroup budget, or the fork is refused.

Where this host gives cgroups, ``child_cgroup`` never hands back "no group"
for a budget it could not apply: the kernel tool would then fork the child
without a whole-tree memory limit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from phoenix_nb import sandbox
from phoenix_nb.sandbox import SandboxError, SandboxLimits
from tests.tiers import needs_cgroup

HOLDER = (
    "import sys\n"
    "sys.stdin.readline()\n"
    "b = b'x' * (200 << 20)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
)


def _v1_memory() -> bool:
    return ":memory:/" in Path("/proc/self/cgroup").read_text()


@needs_cgroup
@pytest.mark.skipif(not _v1_memory(), reason="only cgroup v1 refuses a lower memory limit")
def test_a_budget_the_kernel_will_not_take_refuses_the_fork() -> None:
    """A member holds 200 MiB: cgroup v1 will not lower the group to 64 MiB (EBUSY)."""
    big = sandbox.child_cgroup("fork-budget-test", SandboxLimits(memory=512 << 20))
    assert big is not None
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        for procs in big.procs_files:  # join before allocating: v1 charges stay where made
            Path(procs).write_text(str(holder.pid))
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(SandboxError, match="cgroup budget could not be applied"):
            sandbox.child_cgroup("fork-budget-test", SandboxLimits(memory=64 << 20))
        memory_dir = Path(big.procs_files[0]).parent.parent
        assert (memory_dir / "memory.limit_in_bytes").read_text().strip() == str(512 << 20)
    finally:
        holder.kill()
        holder.wait()
        big.kill_members()
        big.remove()
