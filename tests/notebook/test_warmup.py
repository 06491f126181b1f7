"""The warm-up `%load_ext` starts: awaited on the loop without holding it, best effort.

A real thread imports real modules from a temporary folder; one of them waits in its
module code on an event the test sets, as a slow import does (the loop's progress is
counted in its own turns, never timed).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.notebook.warmup import WarmUp

SLOW = "phoenix_test_slow_import"
MISSING = "phoenix_test_no_such_module"
GATE = "phoenix_test_import_gate"
WAIT = 60.0


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[types.SimpleNamespace]:
    """A module SLOW whose import waits for `gate.open` (and says it started)."""
    events = types.SimpleNamespace(started=threading.Event(), open=threading.Event())
    holder = types.ModuleType(GATE)
    holder.STARTED, holder.OPEN = events.started, events.open  # type: ignore[attr-defined]
    (tmp_path / f"{SLOW}.py").write_text(
        f"import {GATE}\n{GATE}.STARTED.set()\n{GATE}.OPEN.wait({WAIT})\nVALUE = 42\n"
    )
    sys.modules[GATE] = holder
    sys.path.insert(0, str(tmp_path))
    collecting = gc.isenabled()
    try:
        yield events
    finally:
        events.open.set()
        sys.path.remove(str(tmp_path))
        for name in (GATE, SLOW):
            sys.modules.pop(name, None)
        gc.unfreeze()  # the rest of the session collects as before
        if collecting:
            gc.enable()


def test_before_start_nothing_is_waited_for() -> None:
    warm = WarmUp(["json"])
    assert warm.is_ready() and warm.is_ready("json")
    asyncio.run(asyncio.wait_for(warm.ready(), WAIT))


def test_the_loop_runs_while_a_module_is_awaited_and_a_failed_import_ends_the_wait(
    gate: types.SimpleNamespace,
) -> None:
    warm = WarmUp(["json", SLOW, MISSING])
    collecting = gc.isenabled()

    async def scenario() -> int:
        warm.start()
        await asyncio.to_thread(gate.started.wait, WAIT)
        await warm.ready("json")  # imported before the slow one: no waiting for the rest
        waiting = asyncio.ensure_future(warm.ready(SLOW))
        ticks = 0
        for _ in range(50):  # the loop keeps turning while the import is held
            await asyncio.sleep(0)
            ticks += 1
        assert not waiting.done(), "the wait ended before the import did"
        assert not warm.is_ready(SLOW) and not warm.is_ready()
        gate.open.set()
        await asyncio.wait_for(waiting, WAIT)
        assert sys.modules[SLOW].VALUE == 42
        await asyncio.wait_for(warm.ready(), WAIT)  # the missing module does not hang it
        assert warm.is_ready(MISSING)
        return ticks

    assert asyncio.run(scenario()) == 50
    assert gc.isenabled() == collecting, "the collector runs again after the warm-up"
    assert gc.get_freeze_count() > 0, "what the imports made is out of the collector's way"


def test_a_wait_cancelled_by_an_interrupt_does_not_break_the_warm_up(
    gate: types.SimpleNamespace,
) -> None:
    warm = WarmUp([SLOW])

    async def scenario() -> None:
        warm.start()
        await asyncio.to_thread(gate.started.wait, WAIT)
        waiting = asyncio.ensure_future(warm.ready())
        await asyncio.sleep(0)
        waiting.cancel()  # kernel interrupt while the first cell waits
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.open.set()
        await asyncio.wait_for(warm.ready(), WAIT)  # a later cell still gets its answer

    asyncio.run(scenario())
