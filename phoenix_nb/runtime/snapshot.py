"""A conversation's record as it stood at one moment, to be built elsewhere.

Whole-history work (`%phoenix history`, `export`) projects every message, which in
the kernel would stall its event loop (and, allocating that much, set off full
garbage collections that hold it however the work is threaded). A snapshot holds
only plain values (the stored messages, which never change once appended, the
state and the record's header), so it can be pickled to a child process, or built
in a worker thread, while a turn goes on meanwhile without disturbing it or
showing in it.

Even reading the messages into the kernel costs that much for a long
conversation the kernel has not read yet (after a restart): a `StoredRecord`
names the conversation in the store instead, with what only the kernel knows
(its state, the header's facts), and whoever builds the record reads the
messages itself (the store takes several processes reading and writing at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from phoenix_nb.core.cycles import Projection, RecordHeader
from phoenix_nb.core.states import ConvState
from phoenix_nb.core.stored import StoredMessage
from phoenix_nb.runtime.child_spend import child_ids, sub_agent_usage
from phoenix_nb.store import Store

__all__ = ["RecordSnapshot", "StoredRecord"]


@dataclass(frozen=True)
class RecordSnapshot:
    """What `build` needs to make the whole record (docs/record-format.md)."""

    history: Sequence[StoredMessage]
    model: str
    state: ConvState
    header: RecordHeader

    def build(self) -> dict[str, Any]:
        """The whole record, from a projection of its own (linear in the history)."""
        projection = Projection(self.model, prices=self.header.prices, tools=self.header.tools)
        projection.extend(self.history)
        return projection.record(self.state, self.header)

    def snapshot(self) -> RecordSnapshot:
        return self


@dataclass(frozen=True)
class StoredRecord:
    """A conversation's whole record, its messages left in the store at `store_root`.

    `count`: how many of its messages the record shows (those a kernel that has the
    conversation open holds, consistent with `state`); None for all of them. The
    header's `sub_agent_usage` is read from the store with the messages."""

    store_root: str
    conversation_id: str
    count: int | None
    model: str
    state: ConvState
    header: RecordHeader

    def snapshot(self) -> RecordSnapshot:
        """The messages and the sub-agents' spend read from the store (here: in the
        process that builds the record); raises what `Store.stored_messages` raises."""
        with Store(self.store_root) as store:
            history = store.stored_messages(self.conversation_id)
            if self.count is not None:
                history = history[: self.count]
            spend = sub_agent_usage(store, child_ids(history), {})
        header = replace(self.header, sub_agent_usage=spend)
        return RecordSnapshot(history, self.model, self.state, header)
