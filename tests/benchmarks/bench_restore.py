"""Time to restore 1,000 conversations after a restart.

Run: ``/work/venv/bin/python tests/benchmarks/bench_restore.py``

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
from phoenix_nb.core.values import ToolUseBlock
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
        recs = store.append_messages(
            c["id"], [("user", _content(i), None, None) for i in range(MESSAGES)]
        )
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


def main() -> None:
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
