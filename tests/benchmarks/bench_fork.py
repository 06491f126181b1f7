"""run_python("1") round trip while the kernel holds 10 MB, 1 GB and 4 GB of data.

This process plays the kernel: it holds the data (resident, written once so
every page is really there) and the modules a kernel running phoenix has
loaded (IPython, ipykernel, the Anthropic SDK: the heap the scrub searches),
runs an idle second thread as a kernel does, and
calls `RunPythonTool.run` through a `DictKernel` — the same code path as in a
notebook, minus ZMQ. Baselines measured in the same run, interleaved round by
round so load from the shared machine falls on all alike:

* a plain `subprocess` of Python (`python -c 1`): what a fresh interpreter costs,
  without the data;
* `exec` in-process: no isolation at all;
* the same run_python with the scrub a no-op (what the scrub adds);
* the same fork without the sandbox (what confinement adds).

Also: the kernel's RSS before and after the rounds (target: no growth), and
cancel latency of `while True: pass` (target ≤ 100 ms until the fork is gone).

The scrub (`sandbox/fork_memory.py`): the fork overwrites every secret in its own
memory before the job. The kernel here holds a provider key in its
environment and secret-named variables; printed: the round trip with the
scrub against the same confined fork without it (their difference is what
the scrub adds), and the scrub's own time as the fork measures it, wall
clock and CPU (user + system of the fork: what the scrub costs on an idle
machine, much less sensitive to the load of the shared one), for 1, 10 and
50 secrets — each secret is three needles (UTF-8, UCS-2, UCS-4) — with the
one-pass window search (NumPy) and with one memmem pass per needle (the
fallback without NumPy; fewer rounds: it is slow). Target: the round trip at
1 GB ≤ 150 ms and the scrub flat in the number of secrets.
Run: `python tests/benchmarks/bench_fork.py [sizes in MB]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import anthropic  # noqa: F401 - a kernel running phoenix holds these: its heap's size
import ipykernel.ipkernel  # noqa: F401
import IPython  # noqa: F401
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.sandbox import detect_sandbox, fork_memory
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.kernel import RunPythonTool
from phoenix_nb.tools.kernel import fork as kernel_fork
from phoenix_nb.tools.kernel.access import fork_secrets
from phoenix_nb.tools.kernel.fork import run_in_fork
from tests.benchmarks.tiers import run_in_both_tiers
from tests.tools.kernel_stand_in import (
    alive,
    descendants,
    forks_of,
    kernel_thread,
    stand_in,
)

ROUNDS = 15
SIZES_MB = (10, 1024, 4096)
SECRET_COUNTS = (1, 10, 50)
os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-api03-bench-" + "k" * 80)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def cancel_latency(tool: RunPythonTool, ctx: ToolContext) -> float:
    """From task.cancel() until the fork (intermediate and PID 1) is gone from /proc."""
    before = descendants(os.getpid())
    task = asyncio.ensure_future(tool.run({"code": "while True: pass"}, ctx, "c"))
    await asyncio.sleep(0.3)
    forks = forks_of(descendants(os.getpid()) - before)  # the sandbox launcher is not the fork
    start = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # Alive anywhere: the namespace's PID 1 is re-parented to init when the intermediate dies.
    while any(alive(pid) for pid in forks):
        await asyncio.sleep(0.0005)
    return (time.perf_counter() - start) * 1000


def _no_scrub(
    forms: Sequence[tuple[bytes, bytes]],
    skip: Sequence[tuple[int, int]] = (),
    pagemap: int | None = None,
) -> fork_memory.ScrubReport:
    if pagemap is not None:
        os.close(pagemap)  # scrub_secrets takes it over, and closes it
    return fork_memory.ScrubReport(0, 0, 0, 0, 0.0)


@contextlib.contextmanager
def scrub_off() -> Iterator[None]:
    """The same tool run with the fork's scrub a no-op (the fork inherits the patch)."""
    saved = kernel_fork.scrub_secrets
    kernel_fork.scrub_secrets = _no_scrub
    try:
        yield
    finally:
        kernel_fork.scrub_secrets = saved


def _secrets(n: int) -> dict[str, str]:
    """`n` key-like values (fixed, distinct, no shared runs: like real tokens)."""
    return {
        f"SECRET_{i}_TOKEN": "tok-" + hashlib.sha256(f"bench {i}".encode()).hexdigest()[:36]
        for i in range(n)
    }


async def scrub_cost(
    kernel: object, secrets: SecretValues, one_pass: bool, rounds: int
) -> tuple[float, float, int]:
    """The scrub's own time in the fork for `secrets`.

    Medians in ms of (wall clock, CPU time), and the bytes searched.
    """
    saved = fork_memory._MEMMEM_MAX
    fork_memory._MEMMEM_MAX = saved if one_pass else 1 << 30
    try:
        wall, cpu, searched = [], [], []
        for _ in range(rounds):
            outcome = await run_in_fork(
                lambda emit, _sink: emit({"r": 1}),
                port=kernel,  # type: ignore[arg-type]
                env={},
                cwd="/",
                confine=CommandRunner(group="bench-fork", info=detect_sandbox()),
                secrets=secrets,
                report_scrub=True,
            )
            assert outcome.scrub is not None, outcome.stderr
            wall.append(outcome.scrub["seconds"])
            cpu.append(outcome.scrub["cpu_seconds"])
            searched.append(outcome.scrub["searched"])
    finally:
        fork_memory._MEMMEM_MAX = saved
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000, max(searched)


async def measure(size_mb: int) -> None:
    data = np.ones(size_mb * (1 << 20) // 8)  # written: every page resident
    kernel, ctx = stand_in({"data": data, **_secrets(3)})
    tool = RunPythonTool()
    await tool.run({"code": "1"}, ctx, "warm")
    gc.collect()
    rss_before = rss_mb()
    times: dict[str, list[float]] = {
        "fork": [],
        "unscrubbed": [],
        "bare": [],
        "subprocess": [],
        "exec": [],
    }
    namespace: dict[str, object] = {"data": data}
    code = compile("1", "<bench>", "eval")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        result = await tool.run({"code": "1"}, ctx, "b")
        times["fork"].append((time.perf_counter() - start) * 1000)
        assert not result.is_error and "Result:\n1" in result.content, result.content
        start = time.perf_counter()
        with scrub_off():
            result = await tool.run({"code": "1"}, ctx, "b")
        times["unscrubbed"].append((time.perf_counter() - start) * 1000)
        assert not result.is_error and "Result:\n1" in result.content, result.content
        start = time.perf_counter()
        await run_in_fork(
            lambda emit, _sink: emit({"r": 1}), port=kernel, env={}, cwd="/", confine=None
        )
        times["bare"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "1"], check=True, start_new_session=True)
        times["subprocess"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        eval(code, namespace)
        times["exec"].append((time.perf_counter() - start) * 1000)
    gc.collect()
    rss_after = rss_mb()
    cancel = statistics.median([await cancel_latency(tool, ctx) for _ in range(3)])
    fork, unscrubbed, bare, sub, inproc = (
        statistics.median(times[k]) for k in ("fork", "unscrubbed", "bare", "subprocess", "exec")
    )
    secrets_now = fork_secrets(ctx, kernel)
    print(f"kernel holding {size_mb:,} MB (RSS {rss_before:,.0f} MB):")
    print(
        f"  run_python('1') in a confined fork: {fork:8.2f} ms (median of {ROUNDS}; "
        f"scrubs {len(secrets_now.values)} secrets)"
    )
    print(
        f"  the same run_python, no scrub:      {unscrubbed:8.2f} ms  "
        f"(with scrub/without {fork / unscrubbed:.2f}x)"
    )
    print(f"  what the scrub adds to the round trip: {fork - unscrubbed:8.2f} ms")
    own = await scrub_cost(kernel, secrets_now, one_pass=True, rounds=7)
    short = [v for v in secrets_now.values if len(v.encode()) < 15]
    print(
        f"  scrub alone, run_python's own {len(secrets_now.values)} secrets "
        f"({len(secrets_now.memory_forms())} needles; {len(short)} under 15 bytes: "
        f"4-byte windows too): {own[0]:6.1f} ms (CPU {own[1]:5.1f})"
    )
    for n in SECRET_COUNTS:
        values = SecretValues.of(_secrets(n).values())
        one, one_cpu, searched = await scrub_cost(kernel, values, one_pass=True, rounds=7)
        each, each_cpu, _ = await scrub_cost(kernel, values, one_pass=False, rounds=3)
        print(
            f"  scrub alone, {n:>2} secrets ({3 * n:>3} needles, {searched / (1 << 20):.0f} MB "
            f"searched): one pass {one:6.1f} ms (CPU {one_cpu:5.1f}), memmem per needle "
            f"{each:7.1f} ms (CPU {each_cpu:6.1f}; {each_cpu / one_cpu:.1f}x the CPU)"
        )
    print(
        f"  the same fork without the sandbox:  {bare:8.2f} ms  (confined/bare {fork / bare:.2f}x)"
    )
    print(f"  plain subprocess `python -c 1`:     {sub:8.2f} ms")
    print(f"  exec in-process:                    {inproc:8.4f} ms")
    print(f"  ratios: fork/subprocess {fork / sub:.2f}x, fork/exec {fork / inproc:,.0f}x")
    target = " (target <= 150 ms at 1 GB)" if size_mb == 1024 else ""
    print(f"  fork round trip vs 150 ms target: {fork / 150:.2f}x{target}")
    print(
        f"  kernel RSS after {ROUNDS + 1} runs: {rss_after - rss_before:+.1f} MB "
        f"({rss_after / rss_before:.3f}x)"
    )
    print(f"  cancel of `while True: pass` until the fork is gone: {cancel:.1f} ms (target 100)")
    del data, namespace, kernel
    gc.collect()


async def main() -> None:
    if not detect_sandbox().available:
        print(f"sandbox unavailable: {detect_sandbox().reason}")
        return
    sizes = tuple(int(a) for a in sys.argv[1:]) or SIZES_MB
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs")
    with kernel_thread():  # a kernel has threads
        for size in sizes:
            await measure(size)


if __name__ == "__main__" and not run_in_both_tiers(__file__):
    asyncio.run(main())
