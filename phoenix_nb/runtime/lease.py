"""Which kernel may work on a conversation: a lease per conversation.

Several kernels may share one store. The store alone loses nothing, but two
runtimes working on one conversation would each hold their own idea of its
state and history. A conversation is therefore leased, through a file lock next
to the store, by the kernel that makes it work, from the user's event until it
rests again. The OS drops the lock when a kernel dies, so a conversation left
mid-work by a dead kernel can be restored by the next one that claims it.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["Timeout", "lease_for"]


def lease_for(store_root: Path | str, conversation_id: str) -> FileLock:
    folder = Path(store_root) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{conversation_id}.lock"))
