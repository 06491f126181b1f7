"""Time to restore 1,000 conversations after a restart, and start-up flat in the store size.

Run: ``/work/venv/bin/python tests/benchmarks/bench_restore.py``

First, start-up cost against the number of stored conversations: `Phoenix()`
on a store of 10 and on one of 1,000 conversations (20 messages each, one of
them left mid-work in each store), median of several start-ups each. Start-up
reads only the histories of conversations left mid-work (runtime/claim.py), so
the ratio should stay near 1 (target ≤ 2).

A store holds 1,000 conversations of 20 messages each. "Restore" is what the
runtime's manager does on start: open the store, list every conversation
(sub-agents included), read each one's full history, and write each one's state
back to Idle. The read part is compared with reading the same data from a fresh
sqlite3 connection and from stock TinyDB `JSONStorage` (one JSON file).

The runtime line times the real thing: `Phoenix(...)` start-up on a copy of the
store in which 10% of the conversations were left mid-work (5% awaiting mode
approval, 5% running a tool with its tool_use unanswered), so start-up reads
everything, answers the orphan calls and sets those states back to Idle.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from tinydb import TinyDB
from tinydb.storages import JSONStorage

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.states import (
    AwaitingModeApproval,
    ConvState,
    ToolExecuting,
    persisted_fields,
)
from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.core.values import ToolUseBlock
from phoenix_nb.runtime.claim import claim
from phoenix_nb.runtime.manager import Phoenix
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.store import Store

CONVERSATIONS = 1_000
MESSAGES = 20


def _content(i: int) -> dict:
    return {"text": f"message {i} " + "lorem ipsum " * 20, "images": []}


def build(root: Path) -> None:
    store = Store(root / "phoenix")
    db = TinyDB(root / "tinydb.json", storage=JSONStorage)
    con = sqlite3.connect(root / "db.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE conversations (id TEXT PRIMARY KEY, doc TEXT)")
    con.execute(
        "CREATE TABLE messages (conversation_id TEXT, sequence_id INTEGER, doc TEXT,"
        " PRIMARY KEY (conversation_id, sequence_id))"
    )
    tconvs, tmsgs = [], []
    con.execute("BEGIN")
    for _ in range(CONVERSATIONS):
        c = store.create_conversation(cwd="/w", model="m", mode="restricted")
        recs = [
            m.row()
            for m in store.append_messages(
                c["id"], [StoredMessage(MessageKind.USER, _content(i)) for i in range(MESSAGES)]
            )
        ]
        tconvs.append(c)
        tmsgs.extend(recs)
        con.execute("INSERT INTO conversations VALUES (?, ?)", (c["id"], json.dumps(c)))
        con.executemany(
            "INSERT INTO messages VALUES (?, ?, ?)",
            [(r["conversation_id"], r["sequence_id"], json.dumps(r)) for r in recs],
        )
    con.execute("COMMIT")
    con.close()
    db.table("conversations").insert_multiple(tconvs)
    db.table("messages").insert_multiple(tmsgs)
    db.close()
    store.close()


def die_working(store: Store, conversation_id: str) -> None:
    """A kernel claims the conversation (its work marker is made) and then dies: the OS
    drops its lease; the marker stays."""
    claimed = claim(store, conversation_id, is_sub_agent=False)
    assert claimed is not None
    claimed.lease.release(force=True)


def leave_mid_work(root: Path) -> int:
    """Copy the store and leave every tenth conversation mid-work; returns how many."""
    shutil.copytree(root / "phoenix", root / "midwork")
    store = Store(root / "midwork")
    convs = store.list_conversations(include_sub_agents=True, include_archived=True)
    broken = 0
    for n, c in enumerate(convs):
        if n % 10:
            continue
        call = ToolUseBlock(f"toolu_{n}", "bash", {"command": "make"})
        if n % 20 == 0:
            call = ToolUseBlock(f"toolu_{n}", "request_mode_upgrade", {"reason": "edit"})
            phase: object = AwaitingModeApproval("edit", call.id)
        else:
            phase = ToolExecuting(call)
        die_working(store, c["id"])  # claimed first, as the runtime does, then killed mid-work
        store.append_message(
            c["id"],
            "agent",
            {"blocks": [to_json(call)], "stop_reason": "tool_use"},
        )
        store.update_conversation(c["id"], **persisted_fields(ConvState(phase)))  # type: ignore[arg-type]
        broken += 1
    store.close()
    return broken


def restore_runtime(root: Path) -> tuple[float, int]:
    """`Phoenix(...)` start-up: the manager's restore of every conversation."""
    t0 = time.perf_counter()
    phoenix = Phoenix(Settings(home=root / "midwork", model="claude-sonnet-5-5", base_url="x"))
    elapsed = time.perf_counter() - t0
    restored = len(phoenix.restored)
    asyncio.run(phoenix.aclose())
    return elapsed, restored


def restore_phoenix(root: Path) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    store = Store(root / "phoenix")
    convs = store.list_conversations(include_sub_agents=True, include_archived=True)
    n = sum(len(store.messages(c["id"])) for c in convs)
    t1 = time.perf_counter()
    for c in convs:
        store.update_conversation(c["id"], state={"type": "idle"})
    t2 = time.perf_counter()
    store.close()
    return t1 - t0, t2 - t1, n


def restore_sqlite(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    con = sqlite3.connect(root / "db.sqlite")
    convs = [json.loads(d) for (d,) in con.execute("SELECT doc FROM conversations")]
    n = 0
    for c in convs:
        rows = con.execute(
            "SELECT doc FROM messages WHERE conversation_id = ? ORDER BY sequence_id", (c["id"],)
        )
        n += len([json.loads(d) for (d,) in rows])
    con.close()
    return time.perf_counter() - t0, n


def restore_tinydb(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    db = TinyDB(root / "tinydb.json", storage=JSONStorage)
    by_conv: dict[str, list[dict]] = {}
    for m in db.table("messages").all():  # one pass: per-conversation queries would be O(n^2)
        by_conv.setdefault(m["conversation_id"], []).append(m)
    convs = db.table("conversations").all()
    n = sum(len(by_conv.get(c["id"], [])) for c in convs)
    db.close()
    return time.perf_counter() - t0, n


def flat_store(root: Path, conversations: int) -> Path:
    """A store of `conversations` at rest, one of them left running a tool."""
    store = Store(root / f"flat{conversations}")
    for n in range(conversations):
        c = store.create_conversation(cwd="/w", model="m", mode="restricted")
        batch = [StoredMessage(MessageKind.USER, _content(i)) for i in range(MESSAGES)]
        store.append_messages(c["id"], batch)
        if n == 0:
            call = ToolUseBlock("toolu_0", "bash", {"command": "make"})
            die_working(store, c["id"])  # claimed first, as the runtime does, then killed
            store.append_message(
                c["id"], "agent", {"blocks": [to_json(call)], "stop_reason": "tool_use"}
            )
            store.update_conversation(c["id"], **persisted_fields(ConvState(ToolExecuting(call))))
    store.close()
    return root / f"flat{conversations}"


def start_up(home: Path) -> float:
    t0 = time.perf_counter()
    phoenix = Phoenix(Settings(home=home, model="claude-sonnet-5-5", base_url="x"))
    elapsed = time.perf_counter() - t0
    asyncio.run(phoenix.aclose())
    return elapsed


def startup_against_store_size(root: Path, runs: int = 7) -> None:
    small, large = flat_store(root, 10), flat_store(root, CONVERSATIONS)
    # The first start-up restores the conversation left mid-work (it opens the
    # store, whose index is read whole); later ones find nothing to restore.
    first = {home: start_up(home) for home in (small, large)}
    times: dict[Path, list[float]] = {small: [], large: []}
    for _ in range(runs):
        for home in (small, large):
            times[home].append(start_up(home))
    a, b = statistics.median(times[small]), statistics.median(times[large])
    print(f"Phoenix() start-up, 10 conversations     {a * 1e3:8.2f} ms (median of {runs})")
    print(f"Phoenix() start-up, 1,000 conversations  {b * 1e3:8.2f} ms")
    print(f"  ratio 1,000 / 10                        {b / a:6.2f}  (target <= 2)")
    print(f"restoring one left mid-work, 10 conv.    {first[small] * 1e3:8.2f} ms (one run)")
    print(f"restoring one left mid-work, 1,000 conv. {first[large] * 1e3:8.2f} ms")
    print(f"  ratio 1,000 / 10                        {first[large] / first[small]:6.2f}")


def main() -> None:
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        startup_against_store_size(Path(tmp))
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        build(root)
        print(f"built {CONVERSATIONS} conversations x {MESSAGES} messages in "
              f"{time.perf_counter() - t:.1f} s")  # fmt: skip
        broken = leave_mid_work(root)
        read, idle, n = restore_phoenix(root)
        runtime, restored = restore_runtime(root)
        assert restored == broken, (restored, broken)
        sq, n_sq = restore_sqlite(root)
        tdb, n_tdb = restore_tinydb(root)
        assert n == n_sq == n_tdb == CONVERSATIONS * MESSAGES
        print(f"phoenix_nb read all            {read * 1e3:9.1f} ms")
        print(f"phoenix_nb write 1,000 x Idle  {idle * 1e3:9.1f} ms  (one fsync each)")
        print(f"Phoenix() start-up restore     {runtime * 1e3:9.1f} ms  "
              f"({restored} left mid-work brought to Idle)")  # fmt: skip
        print(f"sqlite3 read all               {sq * 1e3:9.1f} ms")
        print(f"stock TinyDB read all          {tdb * 1e3:9.1f} ms")
        print("ratios")
        print(f"  phoenix read / sqlite read         {read / sq:6.2f}")
        print(f"  phoenix read / stock TinyDB read   {read / tdb:6.2f}")
        print(f"  Phoenix() restore / sqlite read    {runtime / sq:6.2f}")


if __name__ == "__main__":
    main()
