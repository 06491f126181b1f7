"""Sandbox cost: `true` Restricted vs Unrestricted vs direct, cancel p99, namespace set-up.

Three figures, each against a baseline measured in the same run:

1. `true` through the bash tool, Restricted vs Unrestricted vs a direct
   ``subprocess.run``, interleaved round by round so load from other work on
   the machine (2 shared cores) falls on all alike. Target:
   Restricted adds <= 20 ms over Unrestricted at the median.
2. Cancel: bench_cancel.py's busy tree (four spinning subshells, sleepers,
   setsid ones where the mode allows) is cancelled, measured by its
   `cancel_busy_tree`: time until the tool returned and until a /proc scan
   finds none of it alive. Target: p99 <= 20 ms for the tree to be gone in Restricted mode
   (killing the namespace's PID 1 ends it in one syscall).
3. Namespace set-up alone: user+network+IPC+mount+PID namespaces, id maps,
   loopback up, PID 1 with its own /proc, capped tmpfs — what the launcher's
   pre-forked spare does *before* a request arrives, so it is off the path a
   command waits on. Printed as a ratio to the Unrestricted `true`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox, guarantees
from phoenix_nb.sandbox.child import confine
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.benchmarks.bench_cancel import cancel_busy_tree, p99
from tests.benchmarks.tiers import run_in_both_tiers

ROUNDS = 60
CANCEL_RUNS = 30
SETUP_RUNS = 40


async def overhead(tool: BashTool, ctxs: dict[Mode, ToolContext]) -> dict[str, float]:
    times: dict[str, list[float]] = {"direct": [], **{m.value: [] for m in ctxs}}
    for _ in range(ROUNDS):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], start_new_session=True, check=True)
        times["direct"].append((time.perf_counter() - start) * 1000)
        for mode, ctx in ctxs.items():
            start = time.perf_counter()
            result = await tool.run({"command": "true"}, ctx, "b")
            times[mode.value].append((time.perf_counter() - start) * 1000)
            assert not result.is_error, result.content
            await asyncio.sleep(0.01)  # the launcher replaces its spare, as between tool calls
    return {k: statistics.median(v) for k, v in times.items()}


def namespace_setup_ms() -> float:
    """One spare's namespace work, from fork to a ready PID 1, then torn down."""
    r, w = os.pipe()
    back_r, back_w = os.pipe()
    tmp = tempfile.mkdtemp(prefix="phoenix-bench-")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            confine.unshare(confine.CLONE_NEWUSER | confine.SANDBOX_NAMESPACES)
            os.write(w, b"U")
            os.read(back_r, 1)
            confine.make_mounts_private()
            confine.loopback_up()
            init = os.fork()
            if init == 0:
                confine.mount_proc()
                confine.mount_tmpfs(tmp, 1 << 30, 65536)
                os._exit(0)
            os.waitpid(init, 0)
        finally:
            os._exit(0)
    os.read(r, 1)
    confine.write_id_maps(pid, full=os.geteuid() == 0)
    os.write(back_w, b"M")
    os.waitpid(pid, 0)
    elapsed = (time.perf_counter() - start) * 1000
    for fd in (r, w, back_r, back_w):
        os.close(fd)
    os.rmdir(tmp)
    return elapsed


async def main() -> None:
    info = detect_sandbox()
    if not info.available:
        sys.exit(f"Restricted mode unavailable: {info.reason}")
    lost = [g.name for g in guarantees() if not g.holds]
    print(f"host: {info.reason.split('.')[0]}; lost here: {lost or 'nothing'}")
    tool = BashTool()
    cwd = Path(tempfile.gettempdir())
    ctxs = {
        mode: ToolContext(
            cwd=cwd,
            mode=mode,
            commands=CommandRunner(group="bench", info=info),
            conversation_id="bench",
        )
        for mode in (Mode.UNRESTRICTED, Mode.RESTRICTED)
    }
    for ctx in ctxs.values():  # start the launcher, warm caches
        await tool.run({"command": "true"}, ctx, "warm")

    med = await overhead(tool, ctxs)
    base, unr, res = med["direct"], med["unrestricted"], med["restricted"]
    print(f"`true`, median of {ROUNDS} interleaved rounds:")
    print(f"  direct subprocess bash -c true: {base:.2f} ms (baseline)")
    print(f"  Unrestricted (launcher):        {unr:.2f} ms = {unr / base:.2f}x direct")
    print(f"  Restricted (namespaces+Landlock+seccomp+cgroup): {res:.2f} ms = {res / base:.2f}x")
    print(
        f"  Restricted over Unrestricted: +{res - unr:.2f} ms, ratio {res / unr:.2f}x "
        f"(target <= +20 ms)"
    )

    results: dict[Mode, list[tuple[float, float]]] = {m: [] for m in ctxs}
    for _ in range(CANCEL_RUNS):
        for mode, ctx in ctxs.items():
            results[mode].append(await cancel_busy_tree(tool, ctx))
    print(f"cancel of a busy tree, {CANCEL_RUNS} runs per mode:")
    for mode in ctxs:
        returned = [r for r, _ in results[mode]]
        gone = [g for _, g in results[mode]]
        print(
            f"  {mode.value}: returned p50 {statistics.median(returned):.1f} ms, "
            f"p99 {p99(returned):.1f} ms; tree gone p50 {statistics.median(gone):.1f} ms, "
            f"p99 {p99(gone):.1f} ms = {p99(gone) / unr:.2f}x Unrestricted `true` "
            "(target p99 <= 20 ms)"
        )

    setups = [namespace_setup_ms() for _ in range(SETUP_RUNS)]
    setup = statistics.median(setups)
    print(
        f"namespace set-up alone (pre-forked spare, off the request path): median "
        f"{setup:.2f} ms, p99 {p99(setups):.2f} ms = {setup / unr:.2f}x Unrestricted `true`"
    )


if __name__ == "__main__" and not run_in_both_tiers(__file__):
    asyncio.run(main())
