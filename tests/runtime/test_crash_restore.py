"""Crash safety through the runtime: SIGKILL at random points, then restore (REQ-BED-007).

Each trial forks a victim (`crash_child.main`) that opens a `Phoenix` on a
store shared with the earlier trials of its lane and works through scripted
scenarios against a fake Messages API of its own. After it reports ready,
the victim is killed with SIGKILL at a random point of its progress, wherever
it is: streaming, running a tool, awaiting approval, in a retry timer,
persisting. The point is a random number of progress lines (phase changes and
acknowledged messages) plus a short random delay, not a wall-clock delay alone:
a loaded machine slows the victim, and a kill chosen by time alone then lands
ever earlier in its work.
The parent then opens a `Phoenix` on the store (which restores) and checks
what a user relies on after a crash: the store loads; every conversation is
at rest (Idle, or still ContextExhausted when it was); its history is valid
for the API; restore only appended to it; every acknowledged message is
there with its id and sequence id; sequence ids are gap-free.

Victims are forked from a forkserver that has imported the project once, so
a trial costs about the kill delay rather than the ~2 s of a cold start.
Seeds: ``PHOENIX_CRASH_SEED`` reproduces a run, ``PHOENIX_CRASH_TRIALS``
changes the number of trials (default 50, two lanes in parallel).
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import random
import signal
import socket
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.messages import to_api_messages, validate_chain
from phoenix_nb.core.states import ContextExhausted, ConvState, Idle, from_persisted
from phoenix_nb.runtime.manager import Phoenix
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.store import Store
from tests.seeds import phoenix_seed

from . import crash_child

pytestmark = pytest.mark.timeout(240)

TRIALS = int(os.environ.get("PHOENIX_CRASH_TRIALS", "50"))
LANES = 2
KILL_AFTER_LINES = 16  # a kill waits for 0 .. 15 progress lines after "ready"
KILL_DELAY = (0.0, 0.3)  # then this much more, so kills also land between lines
PROGRESS_TIMEOUT = 30.0
READY_TIMEOUT = 30.0
BUSY_NAMES = {
    "llm_requesting",
    "tool_executing",
    "awaiting_mode_approval",
    "awaiting_continuation",
    "cancelling",
}


@dataclass
class Acks:
    """What one victim acknowledged before it died."""

    messages: dict[str, dict[int, str]] = field(default_factory=dict)  # conv -> seq -> id
    last_state: str = "start-up"
    ready: bool = False

    @classmethod
    def read(cls, path: Path) -> Acks:
        acks = cls()
        if not path.exists():
            return acks
        for line in path.read_text().splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "ack" and len(parts) == 4:
                acks.messages.setdefault(parts[1], {})[int(parts[2])] = parts[3]
            elif parts[0] == "state" and len(parts) == 2:
                acks.last_state = parts[1]
            elif parts[0] == "ready":
                acks.ready = True
        return acks


def _context() -> Any:
    """A forkserver that imported the victim (and so the whole runtime) once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.runtime.crash_child"])
    return ctx


def _wait_ready(path: Path, process: Any) -> float:
    """Bounded polling on the ack file until the victim says it is ready."""
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT:
        if path.exists() and path.read_bytes().startswith(b"ready"):
            return time.monotonic() - started
        if not process.is_alive():
            raise AssertionError(f"victim exited with {process.exitcode} before it was ready")
        time.sleep(0.005)  # polling interval, not a stand-in for synchronisation
    raise AssertionError(f"victim not ready after {READY_TIMEOUT} s")


def _wait_progress(path: Path, process: Any, lines: int) -> None:
    """Bounded polling until the victim has written `lines` lines after "ready".

    A victim that stops writing (it waits on a timer, say) is killed where it
    is once PROGRESS_TIMEOUT passes: that is a kill point like any other.
    """
    started = time.monotonic()
    while time.monotonic() - started < PROGRESS_TIMEOUT and process.is_alive():
        if path.read_bytes().count(b"\n") - 1 >= lines:
            return
        time.sleep(0.002)  # polling interval, not a stand-in for synchronisation


def _snapshot(store_root: Path) -> dict[str, tuple[ConvState, list[dict[str, Any]], str]]:
    """The store as the victim left it, before anything restores it."""
    with Store(store_root) as store:
        return {
            c["id"]: (from_persisted(c), store.messages(c["id"]), c["slug"])
            for c in store.list_conversations(include_sub_agents=True, include_archived=True)
        }


def check_restored(store_root: Path, acks: Acks) -> None:
    """Open a Phoenix on the killed victim's store and hold it to every promise."""
    before = _snapshot(store_root)
    phoenix = Phoenix(
        Settings(home=store_root, model=crash_child.MODEL, base_url="http://127.0.0.1:9")
    )
    try:
        store = phoenix.store
        records = {
            c["id"]: c
            for c in store.list_conversations(include_sub_agents=True, include_archived=True)
        }
        assert set(acks.messages) <= set(records), "an acknowledged conversation is missing"
        assert set(records) == set(before)
        for conv_id, record in records.items():
            state = from_persisted(record)
            old_state, old_history, slug = before[conv_id]
            if isinstance(old_state.phase, ContextExhausted):
                assert state == old_state, "an exhausted conversation must stay exhausted"
            else:
                assert isinstance(state.phase, Idle), (slug, state)
                assert state.mode == old_state.mode
            if old_state.busy or old_state.name == "awaiting_mode_approval":
                assert slug in phoenix.restored, (slug, phoenix.restored)
            history = store.messages(conv_id)
            assert history[: len(old_history)] == old_history, "restore may only append"
            assert validate_chain(history) == [], (slug, validate_chain(history))
            roles = [m["role"] for m in to_api_messages(history)]
            assert all(a != b for a, b in itertools.pairwise(roles)), roles
            assert [m["sequence_id"] for m in history] == list(range(1, len(history) + 1))
            for seq, message_id in acks.messages.get(conv_id, {}).items():
                assert seq <= len(history), f"acknowledged message {seq} of {slug} lost"
                assert history[seq - 1]["id"] == message_id, (slug, seq)
    finally:
        asyncio.run(phoenix.aclose())


@dataclass
class LaneReport:
    phases: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    start_up: list[float] = field(default_factory=list)


def run_lane(ctx: Any, lane_dir: Path, seed: int, trials: int) -> LaneReport:
    rng = random.Random(seed)
    project = lane_dir / "project"
    project.mkdir(parents=True)
    (project / "app.py").write_text("def add(a, b):\n    return a - b\n")
    store_root = lane_dir / "store"
    report = LaneReport()
    # One port for the lane's fake servers: a conversation an earlier victim started
    # keeps that server (its base URL), so every later victim must serve it there.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for trial in range(trials):
        ack_path = lane_dir / f"ack-{trial}"
        victim = ctx.Process(
            target=crash_child.main,
            args=(str(store_root), str(project), rng.randrange(2**32), str(ack_path), port),
            daemon=True,
        )
        started = time.monotonic()
        victim.start()
        try:
            _wait_ready(ack_path, victim)
            report.start_up.append(time.monotonic() - started)
            # The random kill point: so much progress, then a random delay.
            _wait_progress(ack_path, victim, rng.randrange(KILL_AFTER_LINES))
            time.sleep(rng.uniform(*KILL_DELAY))
            assert victim.is_alive(), f"victim died on its own: exit {victim.exitcode}"
        finally:
            if victim.pid is not None:
                os.kill(victim.pid, signal.SIGKILL)
            victim.join(10)
        assert victim.exitcode == -signal.SIGKILL
        acks = Acks.read(ack_path)
        report.phases[acks.last_state] += 1
        report.acked += sum(len(v) for v in acks.messages.values())
        try:
            check_restored(store_root, acks)
        except AssertionError as exc:
            raise AssertionError(
                f"lane seed {seed}, trial {trial}, killed in {acks.last_state}: {exc}"
            ) from exc
    return report


def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """REQ-BED-007: ≥ 50 SIGKILLs anywhere in a turn; restore brings every conversation back."""
    base = int(os.environ.get("PHOENIX_CRASH_SEED", phoenix_seed()))
    ctx = _context()
    per_lane = [TRIALS // LANES + (1 if i < TRIALS % LANES else 0) for i in range(LANES)]
    with ThreadPoolExecutor(LANES) as pool:
        futures = [
            pool.submit(run_lane, ctx, tmp_path / f"lane{i}", base + i, n)
            for i, n in enumerate(per_lane)
        ]
        reports = [f.result() for f in futures]
    phases: Counter[str] = sum((r.phases for r in reports), Counter())
    start_up = sorted(t for r in reports for t in r.start_up)
    print(
        f"\nseed {base}: {TRIALS} kills, phases {dict(phases)}, "
        f"{sum(r.acked for r in reports)} acknowledged messages, "
        f"victim start-up median {start_up[len(start_up) // 2] * 1e3:.0f} ms"
    )
    assert sum(phases.values()) == TRIALS
    # The kills must land while work is under way, not only at rest.
    assert sum(phases[name] for name in BUSY_NAMES) >= TRIALS // 4, phases
    # Half an acknowledged message per kill still shows the victims were working; a
    # loaded machine starts them slower, so a floor of one per kill was load-dependent.
    assert sum(r.acked for r in reports) >= TRIALS // 2, "victims barely persisted anything"
