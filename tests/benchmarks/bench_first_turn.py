"""The kernel's event-loop lag during the first model turn after `%load_ext`.

`%load_ext phoenix_nb` starts importing the runtime and the SDK on a thread; the
first `%%phoenix` cell usually runs while that import is still under way (a
notebook run top to bottom). Whatever that first turn does for the first time —
waiting for the import, building the SDK's HTTP client and its TLS context,
first imports of its own — must not hold the kernel's event loop (Cancel,
Approve and widget clicks wait on it).

For each of several fresh kernels (default 3) it runs, in one go as Run All does:
a loop-lag sampler (a task that sleeps 10 ms at a time and records how late it
wakes), `%load_ext phoenix_nb`, the first `%%phoenix` turn (a streamed answer
from the fake Messages API over loopback), then a second turn. It prints the lag
(p50 / p99 / max) during each turn, against a baseline measured in the same
kernel: the sampler alone while a cell awaits `asyncio.sleep` for the same time.
Target: max <= 50 ms in the first turn on a quiet-ish machine (the load,
`uptime`, is printed before and after).

`--stacks` also runs a watchdog thread in the kernel that, whenever the loop is
more than 20 ms late, samples the loop thread's stack (`sys._current_frames`), and
prints the distinct stacks of the longest stalls: where the time goes.

`--against DIR` also runs each round in a kernel importing phoenix_nb from DIR (e.g.
`git archive <commit> phoenix_nb | tar -x -C DIR`), alternating with this checkout, so
a change is compared with what it changed in the same run.

`--providers` also runs each round with `c.Phoenix.provider = "openai"` (set by
`%config` right after `%load_ext`, in the same Run All) against the Chat Completions
fake, alternating with the Anthropic run: its SDK (`openai`, needs the extra) is
imported by the first turn, which must not hold the loop either.

Run: /work/venvs/<branch>/bin/python tests/benchmarks/bench_first_turn.py [KERNELS] [--stacks]
     [--against DIR] [--providers]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.notebook.kernel_harness import Kernel

REPO = Path(__file__).resolve().parents[2]
KERNELS = 3
STREAM = Turn([text("x" * 3_000, chunk=30, delay=0.01)])  # ~1 s of streaming

# The sampler records (when it woke, how late); the watchdog (with --stacks) reads the
# last wake-up and samples the loop thread's stack while it is overdue.
SAMPLER = r"""
import asyncio as _asyncio, sys as _sys, threading as _threading, time as _time, traceback as _tb
_lags = []
_last = [_time.perf_counter()]
_stacks = []
async def _sample():
    while True:
        t = _time.perf_counter()
        await _asyncio.sleep(0.01)
        _last[0] = now = _time.perf_counter()
        _lags.append((now, now - t - 0.01))
_sampler = _asyncio.get_running_loop().create_task(_sample())
_loop_thread = _threading.get_ident()
def _watch():
    stall = 0
    while True:
        _time.sleep(0.003)
        late = _time.perf_counter() - _last[0] - 0.01
        if late > 0.02:
            frames = _sys._current_frames()
            frame = frames.get(_loop_thread)
            if frame is not None:
                names = {t.ident: t.name for t in _threading.enumerate()}
                others = "".join(
                    f"  [{names.get(ident, ident)}] "
                    + " <- ".join(f"{f.f_code.co_filename.rsplit('/', 2)[-1]}:{f.f_lineno}"
                                  for f, _ in list(_tb.walk_stack(other))[:4]) + "\n"
                    for ident, other in frames.items()
                    if ident not in (_loop_thread, _threading.get_ident())
                )
                stack = "".join(_tb.format_stack(frame)[-14:])
                _stacks.append((stall, late, stack + "  other threads:\n" + others))
        else:
            stall += 1
if WATCH:
    _threading.Thread(target=_watch, daemon=True).start()
"""

MARK = "_marks.append(_time.perf_counter())"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


OPENAI_KEY = "sk-bench"


def one_kernel(
    fake: FakeAnthropic, watch: bool, source: Path | None, provider: str = "anthropic"
) -> dict[str, Any]:
    env = {"PYTHONPATH": f"{source}:{REPO}"} if source else {}
    configure: list[str] = []
    if provider == "openai":
        env.update(OPENAI_API_KEY=OPENAI_KEY, PHOENIX_MODEL="gpt-bench-unknown")
        configure = [
            "%config Phoenix.provider = 'openai'",
            f"%config Phoenix.base_url = {fake.base_url!r}",
        ]
    with tempfile.TemporaryDirectory() as tmp:
        kernel = Kernel(Path(tmp), fake.base_url, extra_env=env)
        try:
            fake.clear()
            fake.script(STREAM, STREAM)
            kernel.ok(f"WATCH = {watch}\n_marks = []\n" + SAMPLER)
            # Submitted at once, as Run All does: the first turn starts while the
            # warm-up import `%load_ext` started is still under way.
            cells = [
                kernel.submit("%load_ext phoenix_nb"),
                *(kernel.submit(line) for line in configure),
                kernel.submit(MARK),
                kernel.submit("%%phoenix --name first\nhello"),
                kernel.submit(MARK),
                kernel.submit("%%phoenix --name first\nagain"),
                kernel.submit(MARK),
            ]
            for cell in cells:
                kernel.finish(cell, timeout=300)
                assert cell.status == "ok", (cell.error(), cell.text())
            # the baseline: the sampler alone, for as long as the second turn took
            marks = kernel.eval("_marks")
            idle = max(0.5, marks[2] - marks[1])
            kernel.ok(f"{MARK}\nawait _asyncio.sleep({idle})\n{MARK}", timeout=300)
            marks = kernel.eval("_marks")
            lags = kernel.eval("_lags")
            stacks = kernel.eval("_stacks") if watch else []
        finally:
            kernel.shutdown()

    def window(start: float, end: float) -> list[float]:
        """The lag of each wake-up in [start, end], counting only the part of a stall
        inside the window (`%load_ext` itself may hold the loop: it is not the turn)."""
        return [min(lag, when - start) for when, lag in lags if start <= when <= end]

    return {
        "first": window(marks[0], marks[1]),
        "second": window(marks[1], marks[2]),
        "idle": window(marks[3], marks[4]),
        "stacks": stacks,
    }


def show_stacks(stacks: list[tuple[int, float, str]]) -> None:
    """Each stall's longest sample, and the distinct stacks seen during it."""
    stalls: dict[int, list[tuple[float, str]]] = {}
    for stall, late, stack in stacks:
        stalls.setdefault(stall, []).append((late, stack))
    ranked = sorted(stalls.values(), key=lambda s: -max(late for late, _ in s))
    for samples in ranked[:6]:
        longest = max(late for late, _ in samples)
        print(f"\n--- stall of >= {longest * 1000:.0f} ms ({len(samples)} samples)")
        seen: set[str] = set()
        for _, stack in samples:
            if stack not in seen:
                seen.add(stack)
                print(stack)


def label(source: tuple[Path | None, str]) -> str:
    folder, provider = source
    return f"{folder or 'this checkout'}, provider {provider}"


def main() -> None:
    args = sys.argv[1:]
    watch = "--stacks" in args
    against = Path(args[args.index("--against") + 1]) if "--against" in args else None
    kernels = next((int(a) for a in args if a.isdigit()), KERNELS)
    dirs: list[Path | None] = [None] if against is None else [None, against]
    providers = ["anthropic", "openai"] if "--providers" in args else ["anthropic"]
    sources = [(d, p) for d in dirs for p in providers]
    print(f"load before: {uptime()}")
    rows: dict[tuple[Path | None, str], list[dict[str, Any]]] = {s: [] for s in sources}
    fakes = {"anthropic": FakeAnthropic(), "openai": FakeOpenAI(api_key=OPENAI_KEY)}
    for fake in fakes.values():
        fake.start()
    try:
        for _ in range(kernels):
            for source in sources:  # alternated: a drifting load affects all alike
                started = time.perf_counter()
                folder, provider = source
                rows[source].append(one_kernel(fakes[provider], watch, folder, provider))
                print(f"  kernel ({label(source)}) done in {time.perf_counter() - started:.1f} s")
    finally:
        for fake in fakes.values():
            fake.stop()
    for source in sources:
        print(f"\nevent-loop lag (10 ms sampler), per fresh kernel, {label(source)}:")
        print("  kernel  window        p50       p99       max   samples  (max / baseline max)")
        for i, row in enumerate(rows[source]):
            base = max(row["idle"], default=0.0)
            for name in ("idle", "first", "second"):
                lags = row[name]
                top = max(lags, default=0.0)
                print(
                    f"  {i:>6}  {name:<9} {percentile(lags, 0.5) * 1000:6.1f} ms"
                    f" {percentile(lags, 0.99) * 1000:6.1f} ms {top * 1000:6.1f} ms"
                    f"  {len(lags):>7}  ({top / base if base else 0.0:5.1f}x)"
                )
        worst = max(max(row["first"], default=0.0) for row in rows[source])
        print(f"  first-turn max, worst of {kernels}: {worst * 1000:.1f} ms (target <= 50 ms)")
    if len(providers) > 1:
        for folder in dirs:
            worst_of = {
                p: max(max(row["first"], default=0.0) for row in rows[(folder, p)])
                for p in providers
            }
            ratio = worst_of["openai"] / worst_of["anthropic"] if worst_of["anthropic"] else 0.0
            print(
                f"\nfirst-turn max, {folder or 'this checkout'}: openai"
                f" {worst_of['openai'] * 1000:.1f} ms / anthropic"
                f" {worst_of['anthropic'] * 1000:.1f} ms = {ratio:.2f}x"
            )
    print(f"\nload after: {uptime()}")
    if watch:
        for source in sources:
            for i, row in enumerate(rows[source]):
                print(f"\n===== {label(source)}, kernel {i}: the loop thread in stalls")
                show_stacks(row["stacks"])


if __name__ == "__main__":
    main()
