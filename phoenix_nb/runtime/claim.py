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

A store that cannot be written (full, read-only, permission, I/O error) makes
the claim fail with the store's one-line `StoreWriteError` before anything is
sent; a damaged conversation is refused (`ConversationDamaged`) until
`repair` rewrites it from what is intact, answering what it leaves open as
restore does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from phoenix_nb.core.messages import agent_blocks
from phoenix_nb.core.restore import restore
from phoenix_nb.core.states import ConvState, from_persisted, persisted_fields
from phoenix_nb.core.stored import BadStoredMessage, MessageKind, StoredMessage
from phoenix_nb.core.values import ToolUseBlock
from phoenix_nb.errors import ConversationBusy, UnknownConversation
from phoenix_nb.runtime.lease import Timeout, lease_for
from phoenix_nb.store import Damage, Store, write_failure

__all__ = [
    "Claimed",
    "Repaired",
    "claim",
    "discard_marker",
    "left_working",
    "release",
    "repair",
    "since_last_answer",
]


@contextlib.contextmanager
def _store_writes(store_root: Path, what: str) -> Iterator[None]:
    """The lease and marker files are the store's too: their failures read like its own."""
    try:
        yield
    except Timeout:  # held by another kernel (filelock's Timeout is an OSError too)
        raise
    except OSError as exc:
        raise write_failure(exc, Path(store_root), what) from None


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
    except OSError:  # none yet, or a store that cannot be read: nothing to restore
        return []
    return sorted(n[: -len(MARKER_SUFFIX)] for n in names if n.endswith(MARKER_SUFFIX))


@dataclass
class Claimed:
    """A conversation this process now works on, fresh from the store."""

    lease: FileLock
    record: dict[str, Any]
    state: ConvState
    history: list[StoredMessage]
    repairs: list[StoredMessage] = field(default_factory=list)  # appended by restore
    restored: bool = False  # restore changed its state or history


def claim(
    store: Store,
    conversation_id: str,
    *,
    is_sub_agent: bool,
    starting_up: bool = False,
    lease: FileLock | None = None,
    known_history: list[StoredMessage] | None = None,
) -> Claimed | None:
    """Lease the conversation and restore it if it was left mid-work; None if held elsewhere.

    `starting_up`: nothing of this process works on it yet, so a sub-agent found
    at rest but unfinished is an orphan and ends Failed (as restore says); at
    first use a resting conversation keeps its state and only gets repairs.
    `known_history`: the caller's copy, reused when the store holds no more.
    """
    store.require_undamaged(conversation_id)
    lease = lease or lease_for(store.root, conversation_id)
    try:
        with _store_writes(store.root, "the conversation's lease"):
            lease.acquire(timeout=0)
    except Timeout:
        return None
    try:
        with _store_writes(store.root, "the conversation's work marker"):
            _mark_working(store.root, conversation_id)
        record = store.get_conversation(conversation_id)
        if record is None:
            raise UnknownConversation(conversation_id)
        state = from_persisted(record)
        if known_history is not None and store.message_count(conversation_id) == len(known_history):
            history = known_history
        else:
            history = store.stored_messages(conversation_id)
        claimed = Claimed(lease, record, state, history)
        resumed, repairs = _restore_plan(state, history, is_sub_agent, starting_up)
        if repairs:
            claimed.repairs = store.append_messages(conversation_id, repairs)
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


def since_last_answer(history: Sequence[StoredMessage]) -> Sequence[StoredMessage]:
    """The history from its last agent message on: all `restore` needs to see.

    Only the last answer's calls can be open (an earlier call without a result is
    bridged when the request is built), so restoring a long conversation reads its
    tail instead of decoding every stored answer.
    """
    for index in range(len(history) - 1, -1, -1):
        if history[index].kind is MessageKind.AGENT:
            return history[index:]
    return history


def _restore_plan(
    state: ConvState, history: Sequence[StoredMessage], is_sub_agent: bool, starting_up: bool
) -> tuple[ConvState, list[StoredMessage]]:
    """Where a conversation resumes and what to append first."""
    resumed, repairs = restore(state, since_last_answer(history), is_sub_agent=is_sub_agent)
    if state.busy or starting_up:
        return resumed, repairs
    return state, repairs  # at rest and about to work: only missing answers are added


def discard_marker(store_root: Path, conversation_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _marker(store_root, conversation_id).unlink()


def release(
    store_root: Path, conversation_id: str, lease: FileLock, *, keep_marker: bool = False
) -> None:
    """The conversation rests with every message committed: drop the marker, then the lease.

    `keep_marker`: its resting state could not be saved, so the next start-up must
    still restore it. A marker that cannot be removed (read-only store) stays.
    """
    if not keep_marker:
        with contextlib.suppress(OSError):
            discard_marker(store_root, conversation_id)
    if lease.is_locked:
        lease.release(force=True)


@dataclass(frozen=True)
class Repaired:
    """What `repair` did, for the one line the user reads."""

    slug: str
    damage: Damage | None  # None: it was not damaged, nothing was done
    kept: int = 0  # intact messages kept
    dropped: int = 0  # results whose call was lost with the damage
    answered: int = 0  # calls left open, answered as restore does


def repair(store: Store, conversation_id: str, *, is_sub_agent: bool) -> Repaired:
    """Make a damaged conversation usable again, with a history valid for the API.

    Its intact messages are kept in order (renumbered), a tool result whose call
    was lost is dropped, calls left open are answered and the state brought to
    rest as restore does; the journal is rewritten atomically and the damaged
    original stays beside it. Holds the lease, so never under a kernel working on it.
    """
    record = store.get_conversation(conversation_id)
    if record is None:
        raise UnknownConversation(conversation_id)
    slug = str(record.get("slug") or conversation_id)
    damage = store.damage(conversation_id)
    if damage is None:
        return Repaired(slug, None)
    lease = lease_for(store.root, conversation_id)
    try:
        with _store_writes(store.root, "the conversation's lease"):
            lease.acquire(timeout=0)
    except Timeout:
        raise ConversationBusy(
            f"Conversation {slug} is working in another kernel; repair it when it rests."
        ) from None
    try:
        history = store.messages(conversation_id)
        kept = _answerable(history)
        state = from_persisted(record)
        resumed, answers = restore(state, kept, is_sub_agent=is_sub_agent)
        fields = persisted_fields(resumed)
        store.replace_messages(conversation_id, [*kept, *answers], state_fields=fields)
    finally:
        release(store.root, conversation_id, lease)
    return Repaired(slug, damage, len(kept), len(history) - len(kept), len(answers))


def _answerable(rows: Sequence[dict[str, Any]]) -> list[StoredMessage]:
    """The intact rows' messages without tool results whose call is not the open call
    they answer; a row this version cannot read is dropped with the damage."""
    out: list[StoredMessage] = []
    open_ids: set[str] = set()
    for row in rows:
        try:
            message = StoredMessage.parse(row)
        except BadStoredMessage:
            continue
        if message.kind is MessageKind.AGENT:
            try:
                blocks = agent_blocks(message)
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable answer is dropped with the damage
            open_ids = {b.id for b in blocks if isinstance(b, ToolUseBlock)}
        elif message.kind is MessageKind.TOOL:
            call = message.content.get("tool_use_id")
            if call not in open_ids:
                continue
            open_ids.discard(call)
        out.append(message)
    return out
