"""Durable TinyDB persistence of conversations and messages (see `store.py`).

`Store` is synchronous, thread-safe and process-safe: an index plus one
append-only, checksummed journal per conversation (`journal`); an append is
durable when it returns, and a batch is all or nothing after a crash. Every
value is scrubbed before it is written (`scrub`); every error is a
`StoreError` (a `PhoenixError`), and a failed write truncates back to the last
good line and writes nothing. The message shapes are in docs/record-format.md.
"""

from phoenix_nb.store.journal import JournalCorrupt, JournalDamaged
from phoenix_nb.store.scrub import REDACTED, scrub
from phoenix_nb.store.store import (
    ConversationDamaged,
    ConversationNotInStore,
    Damage,
    SlugTaken,
    Store,
    StoreError,
    StoreWriteError,
    default_root,
    store_problem,
    write_failure,
)

__all__ = [
    "REDACTED",
    "ConversationDamaged",
    "ConversationNotInStore",
    "Damage",
    "JournalCorrupt",
    "JournalDamaged",
    "SlugTaken",
    "Store",
    "StoreError",
    "StoreWriteError",
    "default_root",
    "scrub",
    "store_problem",
    "write_failure",
]
