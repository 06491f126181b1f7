"""Rendering is linear in the record: the lead re-renders on every streaming update.

Sizes are compared by growth (the part above an empty record's fixed header and
stylesheet), so 10× the steps must give ~10× the bytes, not 100×.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.notebook.render import render_html, render_markdown, render_plain

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


def with_cycles(n: int) -> dict[str, Any]:
    base = json.loads(FIXTURE.read_text())
    cycles = base["cycles"]
    record = copy.deepcopy(base)
    record["cycles"] = [dict(copy.deepcopy(cycles[i % len(cycles)]), index=i) for i in range(n)]
    return record


@pytest.mark.parametrize("render", [render_html, render_markdown, render_plain])
def test_ten_times_the_steps_is_ten_times_the_bytes(render: Callable[[Any], str]) -> None:
    # The base is one period of the fixture's four cycles, not none: without the cycle
    # holding the pending approval step the record shows that request at record level.
    fixed = len(render(with_cycles(4)).encode())
    small = len(render(with_cycles(12)).encode()) - fixed
    large = len(render(with_cycles(84)).encode()) - fixed
    assert small > 0
    assert 9.5 <= large / small <= 10.5, large / small


@pytest.mark.parametrize("render", [render_html, render_markdown, render_plain])
def test_one_huge_output_does_not_blow_up_the_fallback(render: Callable[[Any], str]) -> None:
    record = with_cycles(1)
    call = record["cycles"][0]["steps"][2]["tool_groups"][1]["calls"][1]
    call["result"]["content"] = "x" * 100 + "\n" + ("y" * 79 + "\n") * 50_000  # ~4 MB
    baseline = len(render(with_cycles(1)))
    assert len(render(record)) < baseline + 60_000
