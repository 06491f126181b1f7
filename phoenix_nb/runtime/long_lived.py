"""Objects that live as long as the kernel, kept out of the garbage collector's full passes.

A full collection walks every tracked object of the process in one uninterruptible
pass, holding the GIL on whichever thread set it off, so the kernel's event loop
waits for all of it: ~0.2 s on this 2-core machine for the ~200,000 objects of a
kernel that imported the SDK, as much again for a 10,000-message conversation read
from the store (its rows, messages, projection and request history). CPython
(3.11) sets one off whenever the objects that survived since the last one exceed a
quarter of the rest: reading such a history sets off several, and the SDK's import
leaves one due for whatever allocates next.

Both piles live as long as the kernel (or their conversation) and never change, so
they are moved to the permanent generation (`gc.freeze`), which full collections
skip; reference counting still frees them when they are dropped. What a freeze
costs: a reference cycle among the frozen objects is never collected, which is why
a history is read with automatic collection paused (`reading`): nothing is
collected halfway (each pass would walk the half read so far), and what reading
left as garbage was freed by reference counting (parsed JSON holds no cycles).
A freeze also keeps whatever else is tracked at that moment, the user's objects
included, so it is done only when the read left more than `KEEP_AFTER` new objects
(a long history, read once per kernel): a short one is left to the collector.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["keep", "reading"]

# New tracked objects a read must leave before it is frozen: below this, the full
# collections it sets off walk little more than the kernel's own objects.
KEEP_AFTER = 20_000

_lock = threading.Lock()
_readers = 0
_was_enabled = True
_keep_all = False


def keep() -> None:
    """Every object tracked now lives on: full collections skip it from now on."""
    gc.freeze()


@contextlib.contextmanager
def reading(*, keep_all: bool = False) -> Iterator[None]:
    """Read something long-lived (a conversation's history) with automatic collection
    paused, then `keep` it if it is big (`KEEP_AFTER`; `keep_all`: whatever its size —
    the warm-up's imports). Nested and concurrent readers, on any thread (the warm-up
    imports on its own), share the pause; the last one out keeps what all of them read
    and restores collection as it was (a user who disabled it keeps it so)."""
    global _readers, _was_enabled, _keep_all
    with _lock:
        if _readers == 0:
            _was_enabled = gc.isenabled()
            _keep_all = False
            gc.disable()
        _readers += 1
        _keep_all = _keep_all or keep_all
    try:
        yield
    finally:
        with _lock:
            _readers -= 1
            if _readers == 0:
                if _keep_all or gc.get_count()[0] >= KEEP_AFTER:  # allocated, less freed
                    keep()
                if _was_enabled:
                    gc.enable()
