"""What an open side panel adds to a streamed turn's work in the kernel, on a real kernel.

The same `%%phoenix` turn (a 1 MB answer in 10,000 deltas at full speed) runs with no
panel open (the baseline, measured in the same run on the same kernel) and with one panel
following the conversation over its comm (notebook/panel_comm.py), alternating, several
rounds each. Two figures per round, read from the kernel itself:

* CPU time of the kernel process during the turn (utime + stime from /proc/PID/stat),
  the event loop's work plus the SDK's; ratio panel/cell alone. Target: <= 1.2x.
* The event loop's lag, p99: a task in the kernel sleeps 5 ms in a loop and records how
  late it wakes up. Target: unchanged within noise.

Run: .venv/bin/python tests/benchmarks/bench_panel.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_panel import PanelClient

ANSWER_BYTES = 1_000_000
CHUNK = 100
LAG_MONITOR = """
import asyncio as _a, time as _t
_phoenix_lags = []
async def _phoenix_lag_monitor():
    while True:
        _start = _t.perf_counter()
        await _a.sleep(0.005)
        _phoenix_lags.append(_t.perf_counter() - _start - 0.005)
_phoenix_lag_task = _a.get_event_loop().create_task(_phoenix_lag_monitor())
"""
LAG_P99 = "sorted(_phoenix_lags)[int(len(_phoenix_lags) * 0.99)] * 1000 if _phoenix_lags else 0.0"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answer_text(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog, and the agent explains why. "
    return (line * (size // len(line) + 1))[:size]


def one_turn(kernel: Kernel, fake: FakeAnthropic, pid: int, *, panel: bool) -> tuple[float, float]:
    """(kernel CPU seconds, loop lag p99 in ms) of one streamed turn."""
    kernel.ok("%phoenix new")
    client = None
    if panel:
        client = PanelClient(kernel)
        client.wait("the panel's first record", lambda p: bool(p.records()), 60)
    kernel.ok(LAG_MONITOR)
    fake.clear()
    fake.script(Turn([text(answer_text(ANSWER_BYTES), chunk=CHUNK)]))
    seen = len(client.records()) if client is not None else 0
    before = cpu_seconds(pid)
    cell = kernel.run("%%phoenix\nWrite a long answer.", timeout=120)
    if client is not None:  # the panel has had the whole turn, to its final record
        client.wait("the panel's final record", lambda p: any(
            r["final"] and "lazy dog" in json.dumps(r["bundle"]) for r in p.records()[seen:]
        ), 60)  # fmt: skip
    spent = cpu_seconds(pid) - before
    assert cell.status == "ok", cell.error()
    lag = float(kernel.eval(LAG_P99))
    kernel.ok("_phoenix_lag_task.cancel()")
    if client is not None:
        client.close()
        kernel.wait_until(lambda: True, 1, "the close to be sent")
    return spent, lag


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
        kernel = Kernel(Path(tmp), fake.base_url)
        try:
            kernel.ok("%load_ext phoenix_nb")
            pid = int(kernel.eval("__import__('os').getpid()"))
            one_turn(kernel, fake, pid, panel=True)  # warm-up: imports, first request
            alone: list[tuple[float, float]] = []
            with_panel: list[tuple[float, float]] = []
            for _ in range(rounds):
                alone.append(one_turn(kernel, fake, pid, panel=False))
                with_panel.append(one_turn(kernel, fake, pid, panel=True))
        finally:
            kernel.shutdown()
    cpu_a = statistics.median(c for c, _ in alone)
    cpu_p = statistics.median(c for c, _ in with_panel)
    lag_a = statistics.median(lag for _, lag in alone)
    lag_p = statistics.median(lag for _, lag in with_panel)
    print(f"streamed turn: {ANSWER_BYTES // 1000} KB in {ANSWER_BYTES // CHUNK} deltas, "
          f"median of {rounds} rounds (load {os.getloadavg()[0]:.2f})")  # fmt: skip
    print(f"  kernel CPU, cell alone   : {cpu_a * 1000:8.1f} ms")
    print(f"  kernel CPU, cell + panel : {cpu_p * 1000:8.1f} ms")
    verdict = "met" if cpu_p <= 1.2 * cpu_a else "NOT met"
    print(f"  ratio panel/alone: {cpu_p / cpu_a:.2f}  (target <= 1.2: {verdict})")
    print(f"  loop lag p99: alone {lag_a:.1f} ms, with panel {lag_p:.1f} ms "
          f"(ratio {lag_p / lag_a if lag_a else float('nan'):.2f})")  # fmt: skip


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"({time.monotonic() - started:.0f} s)")
