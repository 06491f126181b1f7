"""What one turn costs as a conversation grows, measured through a real kernel.

The same one-round turn (a user message, one streamed answer, end of turn) runs
in conversations holding 100, 1,000 and 10,000 stored messages (a realistic mix:
a user message, an answer with a tool call, its result, a final answer). For
each size it prints:

* turn overhead: the cell's wall time minus the time the fake Messages API
  spent answering (reading and checking the request, streaming the reply), the
  median of several turns after a warm-up turn;
* the kernel's event-loop lag while an answer streams: a task in the kernel
  sleeps 10 ms at a time and records how late it wakes (p50 / p99 / max).

Both are printed as ratios against the 100-message run of the same process.
Targets: overhead at 10,000 <= 1.5x at 100; lag p99 <= 50 ms at 10,000.

Then the kernel restarts (same store) and the loop's lag is sampled the same way
during the first `%phoenix history` and `export` of each conversation, cold (its
messages not yet read by this kernel), and, after another restart, during the
first turn of each cold conversation: the figures at the smallest size are the baseline.
Target: max <= 50 ms at every size.
The machine is shared: the load (`uptime`) is printed before and after.

It also prints what building the request body costs alone at each size: encoding
every message (what the SDK's own path does each round) and the provider's
incremental body (only new messages encoded), timed in the kernel.

Run: /work/venvs/<branch>/bin/python tests/benchmarks/bench_long_conversation.py [sizes...]
     [--sdk-body]  (attribution: the SDK prepares and encodes the whole body every round,
                    as before the provider encoded it incrementally)
     [--cold-only] (only the cold figures: the conversations are seeded, no warm turns)
     [--openai]    (the OpenAI-compatible provider against the fake Chat Completions server,
                    as a local Ollama / vLLM / LM Studio is used; the body figures are then
                    the whole history converted and encoded / the provider's incremental one)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.notebook.kernel_harness import Kernel
from tests.notebook.long_history import SEED

SIZES = (100, 1_000, 10_000)
TURNS = 9  # measured turns per size (after one warm-up); a median of more holds better under load
STREAM_CHARS = 6_000  # the streamed answer of the lag turn
STREAM_CHUNK = 30
STREAM_DELAY = 0.01  # seconds between deltas: ~2 s of streaming
# The model's figures, fixed: estimated from the request, 10,000 messages would fill the
# context window and end the conversation (a continuation), which is not what is measured.
USAGE = Usage(input_tokens=2_000, output_tokens=50, cache_read_input_tokens=20_000)


class TimedFake(FakeAnthropic):
    """The fake server, timing how long it spends on each request (the model's time)."""

    def __init__(self) -> None:
        super().__init__()
        self.busy: list[float] = []
        self._lock = threading.Lock()

    async def _timed(self, handling: Any) -> Any:
        started = time.perf_counter()
        try:
            return await handling
        finally:
            with self._lock:
                self.busy.append(time.perf_counter() - started)

    async def _handle_messages(self, request: Any) -> Any:
        return await self._timed(super()._handle_messages(request))

    def take_busy(self) -> float:
        with self._lock:
            total, self.busy = sum(self.busy), []
        return total


class TimedChatFake(TimedFake, FakeOpenAI):
    """The fake Chat Completions server, timed the same way."""

    async def _handle_chat(self, request: Any) -> Any:
        return await self._timed(super()._handle_chat(request))


# The request body alone: every message encoded (a fresh encoder: the SDK's own path
# encodes, and first deep-copies, them all every round) and the provider's body, whose
# messages are already encoded except the ones the last round added.
BODY_COST = """
def _body_cost(slug):
    import time as _t
    from phoenix_nb.llm.body import MessagesBody as _MB
    runtime = _gs(get_ipython()).phoenix.get(slug).runtime
    provider = runtime.services.provider
    provider = getattr(provider, "built", None) or provider  # a LazyProvider's, once built
    if not hasattr(provider, "body"):
        return (-1.0, -1.0)
    request = runtime.build_request()
    if hasattr(provider, "_messages"):  # Chat Completions: converted, then encoded
        from phoenix_nb.llm.body import encode as _encode
        from phoenix_nb.llm.openai_chat import to_chat_messages as _chat
        every = lambda: _encode(_chat(request.system, request.messages))
        ours = lambda: provider._messages(request, True)
    else:
        params = provider._params(request)
        every = lambda: _MB().body(params)
        ours = lambda: provider.body.body(params)
    ours()  # what the turns sent is encoded; this request's tail too
    timed = []
    for build in (every, ours):
        started = _t.perf_counter()
        for _ in range(3):
            build()
        timed.append((_t.perf_counter() - started) / 3)
    return tuple(timed)
"""

# `--sdk-body`: attribution only, never the product. The provider hands the SDK the
# parameters (its `messages.create`), which deep-copies and encodes the whole history on
# every round, as it did before the provider encoded the body itself.
SDK_BODY = """
def _sdk_body(slug):
    provider = _gs(get_ipython()).phoenix.get(slug).runtime.services.provider
    provider._encoded = False
"""

LAG_START = """
import asyncio as _asyncio, time as _time
_lags = []
async def _sample():
    while True:
        t = _time.perf_counter()
        await _asyncio.sleep(0.01)
        _lags.append(_time.perf_counter() - t - 0.01)
_sampler = _asyncio.get_running_loop().create_task(_sample())
"""


# The SDK import `%load_ext` starts in a thread sets off full collections of its own
# (what the first turn still waits for is measured by bench_startup): let it finish, so
# the cold figures are the command's.
WARM_IMPORTS_DONE = """
import threading as _threading
for _thread in _threading.enumerate():
    if _thread.name == "phoenix-warm-imports":
        _thread.join()
"""


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def one_turn(kernel: Kernel, fake: TimedFake, slug: str, turn: Turn, message: str) -> float:
    """The cell's overhead: wall time minus the fake's time answering."""
    fake.clear()
    fake.script(turn)
    fake.take_busy()
    started = time.perf_counter()
    cell = kernel.run(f"%%phoenix --name {slug}\n{message}", timeout=600)
    wall = time.perf_counter() - started
    assert cell.status == "ok", (cell.error(), cell.text())
    records = cell.records()
    assert records, "no record displayed"
    state = records[-1]["conversation"]["state"]["name"]
    assert state == "idle", state
    return wall - fake.take_busy()


def measure(kernel: Kernel, fake: TimedFake, size: int, sdk_body: bool) -> dict[str, float]:
    slug = f"long-{size}"
    kernel.ok(f"print(_seed({slug!r}, {size}))", timeout=600)
    if sdk_body:
        kernel.ok(f"_sdk_body({slug!r})")
    short = Turn([text("Done: the answer is short.")], usage=USAGE)
    one_turn(kernel, fake, slug, short, "Warm-up question.")
    overheads = [one_turn(kernel, fake, slug, short, f"Question {i}.") for i in range(TURNS)]
    # the event loop's lag while an answer streams
    kernel.ok(LAG_START)
    streamed = Turn([text("x" * STREAM_CHARS, chunk=STREAM_CHUNK, delay=STREAM_DELAY)], usage=USAGE)
    one_turn(kernel, fake, slug, streamed, "Explain it at length.")
    lags = kernel.eval("(_sampler.cancel(), _lags)[1]")
    every, incremental = kernel.eval(f"_body_cost({slug!r})")
    return {
        "every": every,
        "incremental": incremental,
        "overhead": statistics.median(overheads),
        "p50": percentile(lags, 0.50),
        "p99": percentile(lags, 0.99),
        "max": max(lags) if lags else 0.0,
        "samples": float(len(lags)),
    }


def lag_of(kernel: Kernel, work: Callable[[], None]) -> dict[str, float]:
    """The loop's lag (p50/p99/max) sampled while `work` runs in the kernel."""
    kernel.ok(LAG_START)
    work()
    lags = kernel.eval("(_sampler.cancel(), _lags)[1]")
    return {
        "p50": percentile(lags, 0.50),
        "p99": percentile(lags, 0.99),
        "max": max(lags) if lags else 0.0,
        "samples": float(len(lags)),
    }


def cold(
    kernel: Kernel, fake: TimedFake, sizes: tuple[int, ...], configure: tuple[str, ...] = ()
) -> dict[str, dict[int, Any]]:
    """The lag during the first `%phoenix history`, then the first `export`, and (after
    another restart) the first turn of each cold conversation: a fresh kernel on the
    same store, where history and export leave the conversation unread by the kernel.
    `configure`: the `%config` lines each fresh kernel runs after `%load_ext`."""
    out: dict[str, dict[int, Any]] = {"history": {}, "export": {}, "turn": {}}

    def history(slug: str) -> None:
        cell = kernel.run(f"%phoenix history {slug}", timeout=600)
        assert cell.status == "ok" and cell.records(), (cell.error(), cell.text())

    def export(slug: str) -> None:
        target = kernel.project / f"{slug}.html"
        cell = kernel.run(f"%phoenix export {slug} --output {target}", timeout=600)
        assert cell.status == "ok" and "Exported" in cell.text(), (cell.error(), cell.text())

    short = Turn([text("Done: the answer is short.")], usage=USAGE)
    kernels: list[dict[str, Callable[[str], Any]]] = [
        {"history": history, "export": export},
        {"turn": lambda slug: one_turn(kernel, fake, slug, short, "A cold question.")},
    ]
    for works in kernels:
        kernel.restart()
        kernel.ok("%load_ext phoenix_nb")
        for line in configure:
            kernel.ok(line)
        kernel.ok(WARM_IMPORTS_DONE)
        for size in sizes:
            for what, work in works.items():
                out[what][size] = lag_of(kernel, partial(work, f"long-{size}"))
    return out


def main() -> None:
    args = sys.argv[1:]
    sdk_body = "--sdk-body" in args
    chat = "--openai" in args
    cold_only = "--cold-only" in args
    sizes = tuple(int(a) for a in args if a.isdigit()) or SIZES
    print(f"load before: {uptime()}")
    if chat:
        print("(--openai: the OpenAI-compatible provider, Chat Completions)")
    env = {"OPENAI_API_KEY": "sk-bench", "PHOENIX_MODEL": "gpt-bench"} if chat else {}
    with TimedChatFake() if chat else TimedFake() as fake, tempfile.TemporaryDirectory() as tmp:
        kernel = Kernel(Path(tmp), fake.base_url, extra_env=env)
        try:
            kernel.ok("%load_ext phoenix_nb")
            configure = (
                (
                    "%config Phoenix.provider = 'openai'",
                    f"%config Phoenix.base_url = {fake.base_url!r}",
                )
                if chat
                else ()
            )
            for line in configure:
                kernel.ok(line)
            kernel.ok(SEED)
            kernel.ok(BODY_COST)
            if sdk_body:
                kernel.ok(SDK_BODY)
                print("(--sdk-body: the SDK copies and encodes the whole body every round)")
            if cold_only:
                for size in sizes:
                    kernel.ok(f"print(_seed('long-{size}', {size}))", timeout=600)
                results = {}
            else:
                results = {size: measure(kernel, fake, size, sdk_body) for size in sizes}
            colds = cold(kernel, fake, sizes, configure)
        finally:
            kernel.shutdown()
    if results:
        warm(results, sizes)
    cold_figures(colds, sizes)
    print(f"load after: {uptime()}")
    print(json.dumps({"warm": {str(k): v for k, v in results.items()}, "cold": colds}))


def warm(results: dict[int, dict[str, float]], sizes: tuple[int, ...]) -> None:
    base = results[sizes[0]]
    print(f"\nturn overhead (median of {TURNS}, model time excluded) and event-loop lag")
    print("  messages   overhead  ratio    lag p50    p99      max   (ratio p99)  samples")
    for size in sizes:
        r = results[size]
        print(
            f"  {size:>8}  {r['overhead'] * 1000:7.1f} ms {r['overhead'] / base['overhead']:5.2f}x"
            f"  {r['p50'] * 1000:6.1f} ms {r['p99'] * 1000:6.1f} ms {r['max'] * 1000:7.1f} ms"
            f"  ({r['p99'] / base['p99'] if base['p99'] else 0:5.2f}x)  {int(r['samples'])}"
        )
    print(
        "\nthe request body, timed alone: every message encoded (converted too, for Chat"
        " Completions) / the provider's body (only new messages; built in a worker thread):"
    )
    for size in sizes:
        every, incremental = results[size]["every"], results[size]["incremental"]
        if every < 0:
            print(f"  {size:>8}  n/a")
        else:
            print(f"  {size:>8}  {every * 1000:7.1f} ms / {incremental * 1000:6.1f} ms")
    last = results[sizes[-1]]
    print(
        f"\ntargets at {sizes[-1]}: overhead <= 1.5x ({last['overhead'] / base['overhead']:.2f}x), "
        f"lag p99 <= 50 ms ({last['p99'] * 1000:.1f} ms)"
    )


def cold_figures(colds: dict[str, dict[int, Any]], sizes: tuple[int, ...]) -> None:
    print("\nthe event loop's lag in a fresh kernel (same store), cold conversations:")
    print("  first      messages   lag p50    p99      max   (ratio max)  samples")
    for what in ("history", "export", "turn"):
        cold_base = colds[what][sizes[0]]
        for size in sizes:
            r = colds[what][size]
            ratio = r["max"] / cold_base["max"] if cold_base["max"] else 0
            print(
                f"  {what:<9} {size:>8}  {r['p50'] * 1000:6.1f} ms {r['p99'] * 1000:6.1f} ms"
                f" {r['max'] * 1000:7.1f} ms  ({ratio:5.2f}x)  {int(r['samples'])}"
            )
    worst = max(colds[w][sizes[-1]]["max"] for w in ("history", "export", "turn"))
    print(f"target at {sizes[-1]}, cold: lag max <= 50 ms ({worst * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
