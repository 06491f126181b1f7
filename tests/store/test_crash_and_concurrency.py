"""Crash safety and two-process use of one store, with real processes and SIGKILL.

The writer is `store_child.py`, a separate Python process; the parent treats as
acknowledged exactly the messages the child printed after `append_message(s)`
returned, then opens the store afresh and checks it.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from phoenix_nb.store import Store
from phoenix_nb.store.journal import decode_line

CHILD = Path(__file__).with_name("store_child.py")
REPO = Path(__file__).resolve().parents[2]

Ack = tuple[str, int, str, str, int]  # conv, sequence_id, message id, writer, counter


def _start(
    root: Path, writer: str, seed: int, seconds: float, convs: list[str]
) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(root), writer, str(seed), str(seconds), *convs],
        stdout=subprocess.PIPE,
        env=env,
    )


def _parse(lines: list[str]) -> tuple[list[Ack], list[str]]:
    acks: list[Ack] = []
    stale: list[str] = []
    for line in lines:
        parts = line.split()
        if parts and parts[0] == "ack" and len(parts) == 6:
            acks.append((parts[1], int(parts[2]), parts[3], parts[4], int(parts[5])))
        elif parts and parts[0] == "stale":
            stale.append(line)
    return acks, stale


def _read_until_ready(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if ready:
            line = proc.stdout.readline().decode()
            assert line, "child exited before it was ready"
            if line.strip() == "ready":
                return
    raise AssertionError("child did not become ready")


def _check_store(root: Path, convs: list[str], acks: list[Ack]) -> dict[str, list[dict]]:
    """Every file loads, sequences are gap-free, acks survive, batches are whole."""
    for path in [root / "index.jsonl", *(root / "conversations").glob("*.jsonl")]:
        data = path.read_bytes()
        lines = data.split(b"\n")
        intact = [decode_line(x + b"\n") is not None for x in lines[:-1]]
        # Only the last line may be torn (a crash mid-write); all before it are intact.
        assert all(intact[:-1]), f"damaged line before the end of {path}"
    store = Store(root)
    try:
        history: dict[str, list[dict]] = {}
        for conv in convs:
            assert store.get_conversation(conv) is not None
            msgs = store.messages(conv)
            assert [m["sequence_id"] for m in msgs] == list(range(1, len(msgs) + 1))
            history[conv] = msgs
        by_key = {(c, m["sequence_id"]): m for c, ms in history.items() for m in ms}
        for conv, seq, mid, writer, counter in acks:
            stored = by_key.get((conv, seq))
            assert stored is not None, f"acknowledged message {conv}#{seq} lost"
            assert stored["id"] == mid
            assert (stored["content"]["writer"], stored["content"]["counter"]) == (writer, counter)
        batches: Counter[str] = Counter()
        sizes: dict[str, int] = {}
        for msgs in history.values():
            for m in msgs:
                batches[m["content"]["batch"]] += 1
                sizes[m["content"]["batch"]] = m["content"]["batch_size"]
        partial = {b: n for b, n in batches.items() if n != sizes[b]}
        assert not partial, f"batches stored in part: {partial}"
        keys = [
            (m["content"]["writer"], m["content"]["counter"]) for ms in history.values() for m in ms
        ]
        assert len(keys) == len(set(keys)), "a message was stored twice"
        return history
    finally:
        store.close()


@pytest.mark.slow
def test_sigkill_at_random_points_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """REQ-BED-007: 50 kill -9 trials on one store; each restart must load everything."""
    rng = random.Random(20261122)
    root = tmp_path / "store"
    store = Store(root)
    convs = [
        store.create_conversation(cwd="/tmp", model="m", mode="restricted")["id"] for _ in range(3)
    ]
    store.close()
    all_acks: list[Ack] = []
    killed_mid_run = 0
    for trial in range(50):
        proc = _start(root, f"w{trial}", rng.randrange(1 << 30), 30, convs)
        _read_until_ready(proc)
        assert proc.stdout is not None
        delay = rng.uniform(0.0, 0.25)
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:  # wait the random moment without blocking the pipe
            select.select([], [], [], deadline - time.monotonic())
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == -signal.SIGKILL
        acks, stale = _parse(out.decode().splitlines())
        assert not stale, stale
        killed_mid_run += bool(acks)
        all_acks.extend(acks)
        _check_store(root, convs, all_acks)
    assert killed_mid_run >= 25, "most kills should land after some writes"
    assert len(all_acks) > 100


@pytest.mark.slow
def test_two_processes_appending_concurrently_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """Two writers on the same conversations for 3 s: every ack stored once, in order."""
    root = tmp_path / "store"
    store = Store(root)
    convs = [
        store.create_conversation(cwd="/tmp", model="m", mode="restricted")["id"] for _ in range(2)
    ]
    store.close()
    procs = [_start(root, name, seed, 3.0, convs) for name, seed in (("a", 1), ("b", 2))]
    outs = [p.communicate(timeout=60)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    acks: list[Ack] = []
    for out in outs:
        assert out.rstrip().endswith("done")
        parsed, stale = _parse(out.splitlines())
        assert not stale, stale
        acks.extend(parsed)
    history = _check_store(root, convs, acks)
    total = sum(len(ms) for ms in history.values())
    assert total == len(acks), "stored messages must be exactly the acknowledged ones"
    writers = Counter(a[3] for a in acks)
    assert writers["a"] > 20 and writers["b"] > 20, writers
    interleaved = [
        conv for conv, ms in history.items() if len({m["content"]["writer"] for m in ms[:-1]}) == 2
    ]
    assert interleaved, "the two writers should have shared a conversation"
    for ms in history.values():  # each writer's own messages keep their order
        for w in ("a", "b"):
            counters = [m["content"]["counter"] for m in ms if m["content"]["writer"] == w]
            assert counters == sorted(counters)
