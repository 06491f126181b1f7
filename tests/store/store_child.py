"""A separate process writing to a store, for the crash and concurrency tests.

Usage: ``python store_child.py ROOT WRITER SEED SECONDS CONV_ID...``

Writes a random mix of single appends, atomic batches and conversation updates
to the given conversations until SECONDS pass (or it is killed). After each
``append_message(s)`` returns it prints one line per message to stdout:
``ack <conversation_id> <sequence_id> <message_id> <writer> <counter>`` — the
parent treats exactly these as acknowledged. Every message's content carries
``writer``, ``counter`` and its batch (``batch``, ``batch_size``) so the parent
can find lost, duplicated or partial batches. It also checks, as it goes, that
what it reads is never older than what it has itself seen (fresh reads).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.store import Store
from phoenix_nb.store.journal import JournalStorage


def main() -> None:
    root, writer, seed, seconds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    conv_ids = sys.argv[5:]
    rng = random.Random(seed)
    # Compact often, so kills also land inside compactions.
    JournalStorage.compact_min_bytes = 4096
    store = Store(root)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    deadline = time.monotonic() + float(seconds)
    counter = 0
    seen: dict[str, int] = {}
    while time.monotonic() < deadline:
        conv = rng.choice(conv_ids)
        roll = rng.random()
        if roll < 0.15:
            store.update_conversation(conv, state={"type": "idle", "by": writer, "n": counter})
            continue
        size = 1 if roll < 0.7 else rng.randint(2, 4)
        batch = f"{writer}-{counter}"
        specs = []
        for _ in range(size):
            counter += 1
            content = {
                "text": "x" * rng.randint(0, 300),
                "writer": writer,
                "counter": counter,
                "batch": batch,
                "batch_size": size,
            }
            specs.append(StoredMessage(MessageKind.USER, content))
        if size == 1:
            records = [store.append_message(conv, "user", specs[0].content)]
        else:
            records = [m.row() for m in store.append_messages(conv, specs)]
        for r in records:
            c = r["content"]
            out.write(f"ack {conv} {r['sequence_id']} {r['id']} {c['writer']} {c['counter']}\n")
        out.flush()
        if rng.random() < 0.1:
            count = len(store.messages(conv))
            if count < seen.get(conv, 0) or count < records[-1]["sequence_id"]:
                out.write(f"stale {conv} {count} {seen.get(conv)}\n")
                out.flush()
            seen[conv] = count
    store.close()
    out.write("done\n")
    out.flush()


if __name__ == "__main__":
    main()
