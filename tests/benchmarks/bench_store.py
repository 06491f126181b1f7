"""Time to persist one message, by conversation size and store size.

Run: ``/work/venv/bin/python tests/benchmarks/bench_store.py``

Scenarios, each with a fresh store in a temporary directory:
  small:  the conversation holds 100 messages, nothing else in the store
  large:  the conversation holds 10,000 messages
  crowd:  the conversation holds 100 messages, 1,000 other conversations exist

Stores: phoenix_nb's `Store` (fsynced per message), stock TinyDB with
`JSONStorage` (one file, rewritten per write, *no* fsync: it is given an
advantage), and sqlite3 in WAL mode with synchronous=NORMAL and =FULL (FULL is
the one with phoenix_nb's durability: every commit fsynced). The sqlite append
computes the next gap-free sequence id in the same transaction, as ours does.

Prints median microseconds per message and the ratios the issue asks for:
flat in store size (crowd/small, large/small) and at most 2x sqlite at 10,000.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tinydb import TinyDB
from tinydb.storages import JSONStorage

from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.store import Store

SAMPLES = 60
SIZES = {"small": (100, 0), "large": (10_000, 0), "crowd": (100, 1_000)}
OTHER_MESSAGES = 5


def _content(i: int) -> dict:
    return {"text": f"message {i} " + "lorem ipsum " * 20, "images": []}


Op = Callable[[int], None]


def bench_phoenix(root: Path, messages: int, others: int) -> Op:
    store = Store(root)
    for _ in range(others):
        c = store.create_conversation(cwd="/w", model="m", mode="restricted")
        store.append_messages(
            c["id"], [StoredMessage(MessageKind.USER, _content(i)) for i in range(OTHER_MESSAGES)]
        )
    conv = store.create_conversation(cwd="/w", model="m", mode="restricted")["id"]
    for start in range(0, messages, 500):
        n = min(500, messages - start)
        batch = [StoredMessage(MessageKind.USER, _content(start + i)) for i in range(n)]
        store.append_messages(conv, batch)
    return lambda i: store.append_message(conv, "user", _content(i))


def bench_tinydb(root: Path, messages: int, others: int) -> Op:
    db = TinyDB(root / "db.json", storage=JSONStorage)
    convs, msgs = db.table("conversations"), db.table("messages")
    convs.insert_multiple({"id": f"o{i}", "slug": f"o{i}"} for i in range(others))
    rows = [
        {"conversation_id": f"o{c}", "sequence_id": i + 1, "content": _content(i)}
        for c in range(others)
        for i in range(OTHER_MESSAGES)
    ]
    rows += [
        {"conversation_id": "c", "sequence_id": i + 1, "content": _content(i)}
        for i in range(messages)
    ]
    msgs.insert_multiple(rows)
    seq = [messages]

    def op(i: int) -> None:
        seq[0] += 1
        msgs.insert({"conversation_id": "c", "sequence_id": seq[0], "content": _content(i)})

    return op


def bench_sqlite(root: Path, messages: int, others: int, synchronous: str) -> Op:
    con = sqlite3.connect(root / "db.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute("CREATE TABLE conversations (id TEXT PRIMARY KEY, slug TEXT UNIQUE)")
    con.execute(
        "CREATE TABLE messages (id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL,"
        " sequence_id INTEGER NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL,"
        " UNIQUE (conversation_id, sequence_id))"
    )
    import json

    con.execute("BEGIN")
    con.executemany(
        "INSERT INTO conversations VALUES (?, ?)", ((f"o{i}", f"o{i}") for i in range(others))
    )
    rows = [
        (f"o{c}-{i}", f"o{c}", i + 1, json.dumps(_content(i)), "t")
        for c in range(others)
        for i in range(OTHER_MESSAGES)
    ]
    rows += [(f"c-{i}", "c", i + 1, json.dumps(_content(i)), "t") for i in range(messages)]
    con.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", rows)
    con.execute("COMMIT")

    def op(i: int) -> None:
        con.execute("BEGIN IMMEDIATE")
        (seq,) = con.execute(
            "SELECT coalesce(max(sequence_id), 0) + 1 FROM messages WHERE conversation_id = 'c'"
        ).fetchone()
        con.execute(
            "INSERT INTO messages VALUES (?, 'c', ?, ?, ?)",
            (f"n-{i}", seq, json.dumps(_content(i)), "t"),
        )
        con.execute("COMMIT")

    return op


def main() -> None:
    engines: dict[str, Callable[[Path, int, int], Op]] = {
        "phoenix_nb Store": bench_phoenix,
        "TinyDB JSONStorage (no fsync)": bench_tinydb,
        "sqlite WAL sync=NORMAL": lambda r, m, o: bench_sqlite(r, m, o, "NORMAL"),
        "sqlite WAL sync=FULL": lambda r, m, o: bench_sqlite(r, m, o, "FULL"),
    }
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        ops: dict[tuple[str, str], Op] = {}
        for engine, make in engines.items():
            for scenario, (messages, others) in SIZES.items():
                root = Path(tmp) / f"{len(ops)}"
                root.mkdir()
                ops[(engine, scenario)] = make(root, messages, others)
        # Round-robin, so the shared disk's fsync noise hits every case alike.
        times: dict[tuple[str, str], list[float]] = {k: [] for k in ops}
        for i in range(SAMPLES):
            for key, op in ops.items():
                if key[0].startswith("TinyDB") and i % 4:
                    continue  # stock TinyDB is slow at size; a quarter of the samples do
                t = time.perf_counter()
                op(i)
                times[key].append(time.perf_counter() - t)
        results = {k: statistics.median(v) * 1e6 for k, v in times.items()}

    print(
        f"\n{'median us per message':32s} {'100 msgs':>10s} {'10,000':>10s} {'+1,000 convs':>13s}"
    )
    for engine in engines:
        r = [results[(engine, s)] for s in SIZES]
        print(f"{engine:32s} {r[0]:10.1f} {r[1]:10.1f} {r[2]:13.1f}")
    ours = {s: results[("phoenix_nb Store", s)] for s in SIZES}
    stock = {s: results[("TinyDB JSONStorage (no fsync)", s)] for s in SIZES}
    full = results[("sqlite WAL sync=FULL", "large")]
    normal = results[("sqlite WAL sync=NORMAL", "large")]
    print("\nratios")
    rows = [
        ("phoenix 10,000 msgs / 100 msgs", ours["large"] / ours["small"], "target ~1"),
        ("phoenix +1,000 convs / alone", ours["crowd"] / ours["small"], "target ~1"),
        ("phoenix / sqlite FULL at 10,000", ours["large"] / full, "target <= 2"),
        ("phoenix / sqlite NORMAL at 10,000", ours["large"] / normal, "no fsync per commit"),
        ("stock TinyDB 10,000 msgs / 100 msgs", stock["large"] / stock["small"], ""),
        ("stock TinyDB +1,000 convs / alone", stock["crowd"] / stock["small"], ""),
        ("stock TinyDB / phoenix at 10,000", stock["large"] / ours["large"], ""),
    ]
    for label, ratio, note in rows:
        print(f"  {label:38s} {ratio:7.2f}  {note}")


if __name__ == "__main__":
    main()
