"""A conversation's record as it stood at one moment, to be built elsewhere.

Whole-history work (`%phoenix history`, `export`) projects every message, which in
the kernel would stall its event loop (and, allocating that much, set off full
garbage collections that hold it however the work is threaded). A snapshot holds
only plain values (the stored messages, which never change once appended, the
state and the record's header), so it can be pickled to a child process, or built
in a worker thread, while a turn goes on meanwhile without disturbing it or
showing in it. Light on purpose: a child imports this module and the core only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from phoenix_nb.core.cycles import Projection, RecordHeader
from phoenix_nb.core.states import ConvState
from phoenix_nb.core.stored import StoredMessage

__all__ = ["RecordSnapshot"]


@dataclass(frozen=True)
class RecordSnapshot:
    """What `build` needs to make the whole record (docs/record-format.md)."""

    history: Sequence[StoredMessage]
    model: str
    state: ConvState
    header: RecordHeader

    def build(self) -> dict[str, Any]:
        """The whole record, from a projection of its own (linear in the history)."""
        projection = Projection(self.model)
        projection.extend(self.history)
        return projection.record(self.state, self.header)
