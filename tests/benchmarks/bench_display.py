"""What streaming into a cell costs the front end, measured on a real kernel.

1. Bytes and number of display messages (display_data + update_display_data on
   iopub) for a 100 KB answer streamed at full speed, against a baseline
   measured in the same run on the same kernel: a cell that re-sends the
   growing answer on every delta, as a display updated naively would.
   Target: bytes <= 5x the answer.
2. How long a widget click (Cancel) waits while an answer streams at full
   speed, against the same click while the cell awaits an idle tool.

Run: /work/venv/bin/python tests/benchmarks/bench_display.py
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Execution, Kernel, state_name

ANSWER_BYTES = 100_000
CHUNK = 100  # characters per text delta
_MESSAGES = itertools.count(1)


def display_traffic(execution: Execution) -> tuple[int, int]:
    """(messages, bytes of their content) of display messages a cell sent."""
    msgs = [
        o for o in execution.outputs if o["msg_type"] in ("display_data", "update_display_data")
    ]
    return len(msgs), sum(len(json.dumps(o["content"])) for o in msgs)


def answer_text(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog, and the agent explains why. "
    return (line * (size // len(line) + 1))[:size]


def bench_bytes(kernel: Kernel, fake: FakeAnthropic) -> None:
    answer = answer_text(ANSWER_BYTES)
    fake.clear()
    fake.script(Turn([text(answer, chunk=CHUNK)]))
    started = time.monotonic()
    cell = kernel.run("%%phoenix --new\nWrite a long answer.", timeout=120)
    elapsed = time.monotonic() - started
    assert cell.status == "ok", cell.error()
    n, size = display_traffic(cell)

    naive = kernel.run(
        "from IPython.display import display\n"
        f"_answer = {answer!r}\n"
        "_h = display({'text/plain': ''}, raw=True, display_id=True)\n"
        f"for _i in range({CHUNK}, len(_answer) + {CHUNK}, {CHUNK}):\n"
        "    _h.update({'text/plain': _answer[:_i]}, raw=True)\n",
        timeout=300,
    )
    assert naive.status == "ok", naive.error()
    bn, bsize = display_traffic(naive)
    print(f"100 KB answer streamed in {len(answer) // CHUNK} deltas ({elapsed:.2f} s):")
    print(
        f"  phoenix : {n:5d} display messages, {size / 1e6:8.3f} MB"
        f" = {size / len(answer):.2f}x answer"
    )
    print(
        f"  naive   : {bn:5d} display messages, {bsize / 1e6:8.3f} MB"
        f" = {bsize / len(answer):.2f}x answer"
    )
    print(
        f"  ratio phoenix/naive bytes: {size / bsize:.4f}  (target: phoenix <= 5x answer: "
        f"{'met' if size <= 5 * len(answer) else 'NOT met'})"
    )


def _streamed(cell: Execution) -> int:
    """Characters of answer the newest record shows while streaming."""
    records = cell.records()
    if not records:
        return 0
    return sum(
        len(step["item"]["text"])
        for cycle in records[-1]["cycles"]
        for step in cycle["steps"]
        if step.get("streaming")
    )


def click_latency(kernel: Kernel, fake: FakeAnthropic, turn: Turn, *, streaming: bool) -> float:
    """Seconds from a Cancel click to the record showing the turn stopped."""
    message = f"go {next(_MESSAGES)}"
    # A rule on this cell's own message, not the FIFO: the fake may still be busy writing
    # the previous, cancelled 5 MB stream when this cell's request arrives.
    fake.add_rule(lambda r: r.last_user_text == message, turn, times=1)
    since = time.monotonic()
    cell = kernel.submit(f"%%phoenix --new --mode unrestricted\n{message}")
    button = kernel.wait_for_button("Cancel", since, timeout=30)
    busy = "llm_requesting" if streaming else "tool_executing"
    kernel.wait_until(
        lambda: bool(cell.records()) and state_name(cell.records()[-1]) == busy,
        30,
        busy,
    )
    if streaming:  # click only once the answer is visibly streaming at full speed
        kernel.wait_until(lambda: _streamed(cell) >= 20_000, 30, "20 KB of streamed answer")
    clicked = kernel.click(button)
    seen = len(cell.outputs)

    def stopped() -> bool:
        return any(
            # The final record replaces the controls too: a display_data after clear_output.
            o["msg_type"] in ("update_display_data", "display_data")
            and state_name(
                o["content"]["data"].get("application/vnd.phoenix.conversation+json", {})
            )
            in ("idle", "cancelling")
            for o in cell.outputs[seen:]
        )

    done = kernel.wait_until(stopped, 30, "the cancel to show")
    kernel.finish(cell, 60)
    return done - clicked


def bench_click(kernel: Kernel, fake: FakeAnthropic, runs: int = 5) -> None:
    long_answer = answer_text(5_000_000)
    streaming = [
        click_latency(kernel, fake, Turn([text(long_answer, chunk=CHUNK)]), streaming=True)
        for _ in range(runs)
    ]
    idle = [
        click_latency(
            kernel, fake, Turn([tool_use("bash", {"command": "sleep 30"})]), streaming=False
        )
        for _ in range(runs)
    ]
    s, i = statistics.median(streaming), statistics.median(idle)
    print(f"Cancel click -> record shows the stop (median of {runs}):")
    print(
        f"  while a 5 MB answer streams at full speed: {s * 1000:7.1f} ms "
        f"(max {max(streaming) * 1000:.1f})"
    )
    print(
        f"  while the cell awaits an idle tool       : {i * 1000:7.1f} ms "
        f"(max {max(idle) * 1000:.1f})"
    )
    print(f"  ratio streaming/idle: {s / i:.2f}")


def main() -> None:
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
        kernel = Kernel(Path(tmp), fake.base_url)
        try:
            kernel.ok("%load_ext phoenix_nb")
            bench_bytes(kernel, fake)
            bench_click(kernel, fake)
        finally:
            kernel.shutdown()


if __name__ == "__main__":
    main()
