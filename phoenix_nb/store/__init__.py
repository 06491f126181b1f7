"""Durable TinyDB persistence of conversations and messages (see `store.py`)."""

from phoenix_nb.store.journal import JournalCorrupt
from phoenix_nb.store.scrub import REDACTED, scrub
from phoenix_nb.store.store import (
    MESSAGE_TYPES,
    SlugTaken,
    Store,
    StoreError,
    UnknownConversation,
    default_root,
)

__all__ = [
    "MESSAGE_TYPES",
    "REDACTED",
    "JournalCorrupt",
    "SlugTaken",
    "Store",
    "StoreError",
    "UnknownConversation",
    "default_root",
    "scrub",
]
