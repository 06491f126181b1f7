"""Taking a conversation to work on it, and bringing one left mid-work back to rest.

One path, used at start-up and when a conversation is first used (REQ-BED-007):

1. take its lease (`lease.py`), or leave it alone if another live kernel holds it;
2. read its record, state and history fresh from the store;
3. if it was left mid-work, restore it (core/restore.py): append the answers
   its history lacks and persist the resumed state.

A *work marker* makes start-up cost flat in the number of stored
conversations. Only a conversation that was working can be left mid-work, and
the runtime commits a transition's state before its messages (two journals),
so a kill in between can leave even a resting state (Idle after a cancel, a
finished sub-agent) with a call its history never answers. The marker is a
file created (and its directory fsynced) when the lease is taken, before any
state it covers is committed, and removed when the conversation rests again
with every message committed. Start-up lists the markers and looks only at
those conversations, instead of reading every history in the store. (A
conversation left busy without a marker — written by hand, or by a version
without markers — is restored when it is first used.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from phoenix_nb.core.restore import restore
from phoenix_nb.core.states import ConvState, from_persisted, persisted_fields
from phoenix_nb.errors import UnknownConversation
from phoenix_nb.runtime.lease import Timeout, lease_for
from phoenix_nb.store import Store

__all__ = ["Claimed", "claim", "discard_marker", "left_working", "release"]


MARKER_SUFFIX = ".working"


def _marker(store_root: Path, conversation_id: str) -> Path:
    return Path(store_root) / "locks" / f"{conversation_id}{MARKER_SUFFIX}"


def _mark_working(store_root: Path, conversation_id: str) -> None:
    path = _marker(store_root, conversation_id)
    if path.exists():
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the marker is durable before any state commit it covers
    finally:
        os.close(dir_fd)


def left_working(store_root: Path) -> list[str]:
    """Ids of conversations whose work marker is still there: left mid-work, or working now.

    One directory listing, however many conversations the store holds.
    """
    try:
        names = os.listdir(Path(store_root) / "locks")
    except FileNotFoundError:
        return []
    return sorted(n[: -len(MARKER_SUFFIX)] for n in names if n.endswith(MARKER_SUFFIX))


@dataclass
class Claimed:
    """A conversation this process now works on, fresh from the store."""

    lease: FileLock
    record: dict[str, Any]
    state: ConvState
    history: list[dict[str, Any]]
    repairs: list[dict[str, Any]] = field(default_factory=list)  # appended by restore
    restored: bool = False  # restore changed its state or history


def claim(
    store: Store,
    conversation_id: str,
    *,
    is_sub_agent: bool,
    starting_up: bool = False,
    lease: FileLock | None = None,
    known_history: list[dict[str, Any]] | None = None,
) -> Claimed | None:
    """Lease the conversation and restore it if it was left mid-work; None if held elsewhere.

    `starting_up`: nothing of this process works on it yet, so a sub-agent found
    at rest but unfinished is an orphan and ends Failed (as restore says); at
    first use a resting conversation keeps its state and only gets repairs.
    `known_history`: the caller's copy, reused when the store holds no more.
    """
    lease = lease or lease_for(store.root, conversation_id)
    try:
        lease.acquire(timeout=0)
    except Timeout:
        return None
    try:
        _mark_working(store.root, conversation_id)
        record = store.get_conversation(conversation_id)
        if record is None:
            raise UnknownConversation(conversation_id)
        state = from_persisted(record)
        if known_history is not None and store.message_count(conversation_id) == len(known_history):
            history = known_history
        else:
            history = store.messages(conversation_id)
        claimed = Claimed(lease, record, state, history)
        resumed, repairs = _restore_plan(state, history, is_sub_agent, starting_up)
        if repairs:
            claimed.repairs = store.append_messages(
                conversation_id, [(kind, body, None, None) for kind, body in repairs]
            )
            claimed.history = [*history, *claimed.repairs]
            claimed.restored = True
        if resumed != state:
            claimed.record = store.update_conversation(conversation_id, **persisted_fields(resumed))
            claimed.state = resumed
            claimed.restored = True
        return claimed
    except BaseException:
        release(store.root, conversation_id, lease)
        raise


def _restore_plan(
    state: ConvState, history: Sequence[Mapping[str, Any]], is_sub_agent: bool, starting_up: bool
) -> tuple[ConvState, list[tuple[str, dict[str, Any]]]]:
    """Where a conversation resumes and what to append first."""
    resumed, repairs = restore(state, history, is_sub_agent=is_sub_agent)
    if state.busy or starting_up:
        return resumed, repairs
    return state, repairs  # at rest and about to work: only missing answers are added


def discard_marker(store_root: Path, conversation_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _marker(store_root, conversation_id).unlink()


def release(store_root: Path, conversation_id: str, lease: FileLock) -> None:
    """The conversation rests with every message committed: drop the marker, then the lease."""
    discard_marker(store_root, conversation_id)
    if lease.is_locked:
        lease.release(force=True)
