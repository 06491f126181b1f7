"""How long `%load_ext phoenix_nb` takes, against `import IPython` and bare Python.

Run: ``/work/venv/bin/python tests/benchmarks/bench_startup.py [RUNS]``

Each figure is a fresh process, run RUNS times (default 7) in turn A B C A B C …
so a drifting machine affects all three alike; medians are printed with the
ratios. Inside the third process the `%load_ext` call itself is timed too (an
IPython shell is started first, as in a kernel), which is the number the issue
bounds (≤ 0.3 s): the SDK and the runtime must not be imported before first use.

  bare:     python -c pass
  ipython:  import IPython and start an InteractiveShell
  load_ext: the same, then %load_ext phoenix_nb (the store is a temporary one)

A bare InteractiveShell has not imported what a Jupyter kernel has (asyncio,
zmq, tornado …), so the call is also timed inside a real kernel (jupyter_client),
fresh for each run: that is the figure a notebook user waits for.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

SHELL = (
    "import time; t0 = time.perf_counter(); "
    "from IPython.core.interactiveshell import InteractiveShell; "
    "shell = InteractiveShell.instance(); t1 = time.perf_counter(); "
)
LOAD = (
    "shell.run_line_magic('load_ext', 'phoenix_nb'); t2 = time.perf_counter(); "
    "import sys; print(f'{t1 - t0:.6f} {t2 - t1:.6f} "
    '{int("anthropic" in sys.modules)} {int("phoenix_nb.runtime.manager" in sys.modules)}\')'
)

COMMANDS = {
    "bare": [sys.executable, "-c", "pass"],
    "ipython": [sys.executable, "-c", SHELL + "print(f'{t1 - t0:.6f}')"],
    "load_ext": [sys.executable, "-c", SHELL + LOAD],
}


KERNEL_CODE = (
    "import time as _t; _t0 = _t.perf_counter(); "
    "get_ipython().run_line_magic('load_ext', 'phoenix_nb'); "
    "print(f'LOAD_EXT {_t.perf_counter() - _t0:.6f}')"
)


def in_kernel(env: dict[str, str]) -> float:
    """%load_ext timed inside a fresh real kernel."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        out: list[str] = []
        kc.execute_interactive(
            KERNEL_CODE,
            timeout=60,
            output_hook=lambda msg: out.append(msg["content"].get("text", "")),
        )
        line = next(t for t in "".join(out).splitlines() if t.startswith("LOAD_EXT"))
        return float(line.split()[1])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main(runs: int) -> None:
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    load_ext: list[float] = []
    sdk_at_load = runtime_at_load = 0
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PHOENIX_HOME": home}
        env.pop("ANTHROPIC_API_KEY", None)
        for _ in range(runs + 1):  # the first round warms the page cache and is dropped
            for name, command in COMMANDS.items():
                started = time.perf_counter()
                out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
                walls[name].append(time.perf_counter() - started)
                if name == "load_ext":
                    _, load, sdk, runtime = out.stdout.split()[-4:]
                    load_ext.append(float(load))
                    # the warm-up thread may import them after load_ext returned
                    sdk_at_load, runtime_at_load = int(sdk), int(runtime)
        for values in (*walls.values(), load_ext):
            del values[0]
        kernel = [in_kernel(env) for _ in range(runs)]
    med = {name: statistics.median(v) for name, v in walls.items()}
    load = statistics.median(load_ext)
    print(f"{runs} runs each, medians (wall time of the whole process):")
    for name, value in med.items():
        print(f"  {name:9s} {value * 1e3:8.1f} ms")
    print(f"  %load_ext call itself: {load * 1e3:.1f} ms in a bare InteractiveShell")
    in_k = statistics.median(kernel)
    print(f"  %load_ext call in a real kernel: {in_k * 1e3:.1f} ms (target ≤ 300 ms)")
    print(f"ratio load_ext/ipython process: {med['load_ext'] / med['ipython']:.2f}")
    print(f"ratio ipython/bare process:     {med['ipython'] / med['bare']:.2f}")
    print(f"%load_ext call / (ipython - bare): {load / (med['ipython'] - med['bare']):.2f}")
    print(f"%load_ext in kernel / (ipython - bare): {in_k / (med['ipython'] - med['bare']):.2f}")
    print(f"anthropic imported when load_ext returned: {bool(sdk_at_load)} (warming thread)")
    print(f"runtime imported when load_ext returned:   {bool(runtime_at_load)} (warming thread)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
