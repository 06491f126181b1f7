"""Cost in a real kernel: the cell's record, `%phoenix status` and `%phoenix history`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.core.prices import cost, format_usd
from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import MIME, MODEL, Kernel

pytestmark = pytest.mark.timeout(180)

USAGE = Usage(
    input_tokens=1_000,
    output_tokens=200,
    cache_creation_input_tokens=3_000,
    cache_read_input_tokens=40_000,
    cache_creation_1h_input_tokens=3_000,
)


@pytest.fixture
def kernel(fake_anthropic: FakeAnthropic, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(tmp_path, fake_anthropic.base_url)
    try:
        k.ok("%load_ext phoenix_nb")
        yield k
    finally:
        k.shutdown()


def test_cell_status_and_history_show_the_cost(kernel: Kernel, fake_anthropic: FakeAnthropic):
    fake_anthropic.script(Turn([text("One.")], usage=USAGE), Turn([text("Two.")], usage=USAGE))
    one = cost(USAGE, MODEL)
    assert one is not None
    kernel.ok("%%phoenix\nfirst")
    cell = kernel.ok("%%phoenix\nsecond")
    line = f"this turn {format_usd(one)} · conversation {format_usd(2 * one)} · 91% cache hits"
    [record] = [o["data"] for o in cell.final_outputs() if MIME in o.get("data", {})]
    assert record[MIME]["usage"]["total"]["cost_usd"] == pytest.approx(2 * one)
    assert line in record["text/plain"]
    assert line in record["text/html"]
    status = kernel.ok("%phoenix status").text("stdout")
    assert f"cost          {line}" in status
    history = kernel.ok("%phoenix history")
    shown = [o["data"] for o in history.final_outputs() if MIME in o.get("data", {})]
    assert shown and line in shown[-1]["text/plain"]
