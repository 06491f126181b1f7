"""Durable TinyDB persistence of conversations and messages (see `store.py`)."""

from phoenix_nb.store.journal import JournalCorrupt, JournalDamaged
from phoenix_nb.store.scrub import REDACTED, scrub
from phoenix_nb.store.store import (
    ConversationDamaged,
    Damage,
    SlugTaken,
    Store,
    StoreError,
    StoreWriteError,
    UnknownConversation,
    default_root,
    store_problem,
    write_failure,
)

__all__ = [
    "REDACTED",
    "ConversationDamaged",
    "Damage",
    "JournalCorrupt",
    "JournalDamaged",
    "SlugTaken",
    "Store",
    "StoreError",
    "StoreWriteError",
    "UnknownConversation",
    "default_root",
    "scrub",
    "store_problem",
    "write_failure",
]
