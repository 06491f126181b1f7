"""The durable conversation store: TinyDB tables on append-only journals.

Layout under the root (``$PHOENIX_HOME``, else ``<jupyter data dir>/phoenix``)::

    index.jsonl                 conversations table (one document each) + _meta table
    conversations/<id>.jsonl    messages table of one conversation, doc id = sequence id
    *.lock                      the filelock of each journal

Why the required properties hold (the journal's own guarantees are in
`journal.py`):

* No acknowledged message is lost and every file loads after a kill -9: each
  append is one fsynced, checksummed journal line written before the call
  returns; a torn last line is ignored on load and truncated by the next writer.
* Two kernels on one store lose and duplicate nothing: every operation holds the
  journal's file lock and first catches up with what other processes appended
  (stat under the lock; tail read or full reload); TinyDB query caches are off.
* Sequence ids are gap-free and increasing per conversation: under that lock the
  next id is ``len(messages) + 1`` of the up-to-date table, written with the
  document as doc id ``sequence_id``; a batch is one journal line, so all of it
  or none of it is there after a crash.
* Cost of persisting a message: it touches only its conversation's journal (one
  appended line, O(1) in-memory work), never the index or other conversations,
  so it does not grow with the store; a conversation's in-memory table is kept
  by an LRU of open journals, so a growing conversation costs one line a message.
* Schema version: ``_meta.schema_version`` in the index; on open, every
  ``MIGRATIONS[v]`` for stored < v <= ``SCHEMA_VERSION`` runs in order under the
  index lock, then the version is recorded. A store from a newer version is
  refused rather than damaged.
* No secret is ever stored: every value written passes through `scrub.scrub`.
* A message's row is written by `StoredMessage.row` and read by
  `StoredMessage.parse` (core/stored.py; the format is docs/stored-messages.md):
  the store appends typed messages and never builds a row of its own.
* The index is derivable: each conversation journal also holds its
  conversation's record (table ``conversation``, written before the index on
  create and on every update), so a damaged or missing ``index.jsonl`` is
  rebuilt from the conversation journals (the damaged original kept beside it
  as ``index.jsonl.damaged``). After a kill between the two writes the index
  may hold the state before the last update, which restore handles as it
  handles any state committed before its messages.
* Damage is contained (see `journal.py`): a damaged conversation journal is
  read up to and past the damage where lines still check, a copy of it is
  kept beside it untouched (``<id>.jsonl.damaged``), the index record says
  what was lost (``damaged``), and appends to it are refused
  (`ConversationDamaged`) until `replace_messages` rewrites it; every other
  conversation works as before.
* Failed writes are reported, never half-done: any ``OSError`` of a write
  (disk full, read-only store, permission, I/O error) becomes a
  `StoreWriteError` whose one line names what failed, the store's folder and
  what to do; the journal has dropped the failed line (disk and memory).
  A store that cannot be written at all is still read (`store_problem` says
  why, for the notebook to report once).

The conversation's ``updated_at`` changes with `update_conversation` (the
runtime persists every state change), not with each message, to keep a message
append to one fsync.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from tinydb import Query
from tinydb.table import Document

from phoenix_nb.core.stored import BadStoredMessage, MessageKind, StoredMessage, parse_usage
from phoenix_nb.core.values import Usage
from phoenix_nb.errors import PhoenixError
from phoenix_nb.store import slugs
from phoenix_nb.store.journal import (
    JournalDamage,
    JournalDB,
    JournalStorage,
    json_copy,
    open_journal_db,
)
from phoenix_nb.store.scrub import scrub

UPDATABLE_FIELDS = frozenset({"state", "state_data", "mode", "archived", "slug", "seeded_from"})
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CONVERSATIONS = "conversations"
_MESSAGES = "messages"
_RECORD = "conversation"  # in a conversation journal: its record (doc 1), for rebuilding the index
_META = "_meta"
_LOST_MESSAGE = re.compile(rb'\["put","messages",(\d+),')

Migration = Callable[["Store"], None]


class StoreError(PhoenixError):
    """A store operation refused with a message for the user; nothing was written."""


class ConversationNotInStore(StoreError, KeyError):
    """No conversation with this id in the store (`Phoenix` callers get
    `phoenix_nb.errors.UnknownConversation`, which also knows slugs)."""

    def __str__(self) -> str:
        return f"no conversation {self.args[0]!r} in the store"


class SlugTaken(StoreError, ValueError):
    pass


class StoreWriteError(StoreError):
    """Saving failed (disk full, read-only store, permission, I/O error); nothing of it
    was saved and what was saved before is intact."""


class ConversationDamaged(StoreError):
    """The conversation's journal is damaged: it can be read, not written, until repaired."""


@dataclass(frozen=True)
class Damage:
    """What a damaged conversation lost, for the user (`summary`) and for repair."""

    conversation_id: str
    summary: str
    original: Path | None  # the untouched copy kept beside the journal
    lines: tuple[int, ...] = ()
    lost_messages: tuple[int, ...] = ()  # sequence ids known to be lost


def _home(root: Path) -> str:
    return f"{root} (PHOENIX_HOME)"


def write_failure(exc: OSError, root: Path, what: str) -> StoreWriteError:
    """The one line a failed write becomes: what failed, where, and what to do."""
    code = exc.errno
    where = _home(root)
    if code in (errno.ENOSPC, errno.EDQUOT):
        why, todo = "the disk is full", "free some space there and run it again"
    elif code == errno.EROFS:
        why = "the store is on a read-only file system"
        todo = "make it writable, or set PHOENIX_HOME to a writable folder and restart the kernel"
    elif code in (errno.EACCES, errno.EPERM):
        why = "permission denied"
        todo = (
            "give this user write access there, or set PHOENIX_HOME to another folder "
            "and restart the kernel"
        )
    else:
        why = f"I/O error ({exc.strerror or exc})"
        todo = "check that disk, then run it again"
    return StoreWriteError(
        f"Could not save {what} in the store {where}: {why}. "
        f"Nothing unsaved was sent to the model; {todo}."
    )


def store_problem(root: Path | str) -> str | None:
    """One line saying why the store at `root` cannot be written, or None if it can.

    Cheap (a stat and an access check): the notebook says it at `%load_ext` and
    before each command. A full disk is not visible here; it is reported by the
    write that fails.
    """
    path = Path(root).expanduser()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        why = f"{probe} is not a folder"
    elif os.access(probe, os.W_OK):
        return None
    else:
        why = "read-only file system" if _read_only_fs(probe) else "permission denied"
    missing = "" if probe == path else " (it does not exist and cannot be created)"
    return (
        f"phoenix: its store {_home(path)} cannot be written{missing}: {why}. "
        "Saved conversations can be read, but no message can be sent. Make it writable, "
        "or set PHOENIX_HOME to a writable folder and restart the kernel."
    )


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def default_root() -> Path:
    """Where a store lives when no folder is given: $PHOENIX_HOME, else Jupyter's data dir.

    The one computation of it: `Settings.store_root()` asks here.
    """
    env = os.environ.get("PHOENIX_HOME")
    if env:
        return Path(env).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "phoenix"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _jsonable(value: Any, what: str) -> Any:
    """The value as stored JSON (scrubbed), or StoreError naming `what`."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable: {exc}") from None
    return scrub(value)


class Store:
    """Conversations and their messages; sync, thread-safe and process-safe."""

    SCHEMA_VERSION: ClassVar[int] = 1
    MIGRATIONS: ClassVar[dict[int, Migration]] = {}
    OPEN_CONVERSATIONS: ClassVar[int] = 64  # journals kept in memory (LRU)

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        with contextlib.suppress(OSError):  # a read-only store is still read
            if not self.root.exists():  # a new store is its user's alone (a shared host)
                self.root.mkdir(mode=0o700, parents=True)
            (self.root / "conversations").mkdir(parents=True, exist_ok=True)
        index_path = self.root / "index.jsonl"
        index_missing = not index_path.exists()
        self._index = open_journal_db(index_path, indexed_fields=("id", "slug"))
        self._open: OrderedDict[str, JournalDB] = OrderedDict()
        self._open_lock = threading.Lock()
        self._known: set[str] = set()
        self._damage: dict[str, Damage] = {}
        self._unmarked: set[str] = set()
        self._closed = False
        self.index_rebuilt: str | None = None  # why the index was rebuilt on open, if it was
        self._migrate()
        if self._index.journal.damage is not None:
            found = self._index.journal.damage.describe()
            self._rebuild_index(f"index.jsonl was damaged ({found})")
        elif index_missing and self._journal_paths():
            self._rebuild_index("index.jsonl was missing")

    # -- lifecycle ---------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        with self._index.journal.locked():
            return self._stored_version()

    def _stored_version(self) -> int:
        doc = self._index.table(_META).get(Query().key == "schema_version")
        return int(doc["value"]) if doc else 0

    @contextlib.contextmanager
    def _saving(self, what: str) -> Iterator[None]:
        """Turn a failed write into the one line the user reads (`write_failure`)."""
        try:
            yield
        except OSError as exc:
            raise write_failure(exc, self.root, what) from None

    def _migrate(self) -> None:
        try:
            with self._saving("its schema version"):
                self._migrate_now()
        except StoreWriteError:
            pass  # a read-only store is read as it is; writes report the problem

    def _migrate_now(self) -> None:
        with self._index.journal.locked():
            current = self._stored_version()
            if current > self.SCHEMA_VERSION:
                raise StoreError(
                    f"the store at {self.root} has schema version {current}, newer than this "
                    f"phoenix_nb understands ({self.SCHEMA_VERSION}); upgrade phoenix_nb"
                )
            fresh = current == 0 and not self._index.table(_CONVERSATIONS)
            if not fresh:
                for version in range(max(current, 1) + 1, self.SCHEMA_VERSION + 1):
                    migration = self.MIGRATIONS.get(version)
                    if migration is not None:
                        migration(self)
            if current != self.SCHEMA_VERSION:
                self._index.table(_META).upsert(
                    {"key": "schema_version", "value": self.SCHEMA_VERSION},
                    Query().key == "schema_version",
                )

    def close(self) -> None:
        """Release file descriptors; the store is unusable afterwards."""
        with self._open_lock:
            for db in self._open.values():
                db.close()
            self._open.clear()
            self._index.close()
            self._closed = True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- conversations -----------------------------------------------------------

    def unique_slug(self, base: str | None = None) -> str:
        """A slug free at this moment (create_conversation re-checks under its lock)."""
        with self._index.journal.locked():
            return slugs.unique_slug(self._slug_taken, base)

    def _slug_taken(self, slug: str) -> bool:
        return self._index.journal.lookup(_CONVERSATIONS, "slug", slug) is not None

    def create_conversation(
        self,
        *,
        id: str | None = None,
        slug: str | None = None,
        cwd: str | Path,
        model: str,
        mode: str,
        parent_id: str | None = None,
        user_initiated: bool = True,
        state: Any = None,
        state_data: Any = None,
        seed_from: str | None = None,
        server: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create and persist a conversation; `slug=None` picks a free readable one.
        `server` ({provider, base_url}, never a key) is who serves it for life."""
        self._check_open()
        conv_id = id or f"c-{uuid.uuid4().hex[:16]}"
        if not _ID_RE.match(conv_id):
            raise StoreError(f"conversation id {conv_id!r} must match {_ID_RE.pattern}")
        if slug is not None and not slugs.is_valid(slug):
            raise StoreError(f"slug {slug!r} must be lowercase words joined by '-'")
        state_json = _jsonable(state if state is not None else "idle", "state")
        state_data_json = _jsonable(state_data, "state_data")
        journal = self._index.journal
        with journal.locked():
            if journal.lookup(_CONVERSATIONS, "id", conv_id) is not None:
                raise StoreError(f"a conversation with id {conv_id!r} already exists")
            if parent_id is not None and journal.lookup(_CONVERSATIONS, "id", parent_id) is None:
                raise ConversationNotInStore(parent_id)
            if seed_from is not None and journal.lookup(_CONVERSATIONS, "id", seed_from) is None:
                raise ConversationNotInStore(seed_from)
            if slug is None:
                slug = slugs.unique_slug(self._slug_taken)
            elif self._slug_taken(slug):
                raise SlugTaken(f"slug {slug!r} is taken; try {self.unique_slug(slug)!r}")
            now = _now()
            record = {
                "id": conv_id,
                "slug": slug,
                "cwd": str(cwd),
                "parent_conversation_id": parent_id,
                "user_initiated": bool(user_initiated),
                "state": state_json,
                "state_data": state_data_json,
                "mode": str(mode),
                "model": str(model),
                "server": _jsonable(dict(server), "server") if server is not None else None,
                "archived": False,
                "seeded_from": seed_from,
                "created_at": now,
                "updated_at": now,
                "state_updated_at": now,
            }
            # The conversation's journal, holding its record, exists before it is visible.
            with self._saving("the new conversation"):
                self._record_in_journal(conv_id, record)
                self._index.table(_CONVERSATIONS).insert(record)
            self._known.add(conv_id)
            return json_copy(record)

    def _record_in_journal(self, conversation_id: str, record: dict[str, Any]) -> None:
        """Keep the record in the conversation's own journal too (the index is derivable)."""
        journal = self._conversation_db(conversation_id).journal
        with journal.locked():
            journal.commit([["put", _RECORD, 1, json_copy(record)]])

    def update_conversation(self, id: str, **fields: Any) -> dict[str, Any]:
        """Change mutable fields (state, state_data, mode, archived, slug, seeded_from)."""
        self._check_open()
        bad = set(fields) - UPDATABLE_FIELDS
        if bad:
            raise StoreError(
                f"cannot update {sorted(bad)}; updatable fields: {sorted(UPDATABLE_FIELDS)}"
            )
        if "slug" in fields and not slugs.is_valid(fields["slug"]):
            raise StoreError(f"slug {fields['slug']!r} must be lowercase words joined by '-'")
        clean = {k: _jsonable(v, k) for k, v in fields.items()}
        if "archived" in clean:
            clean["archived"] = bool(clean["archived"])
        journal = self._index.journal
        with journal.locked():
            doc_id = journal.lookup(_CONVERSATIONS, "id", id)
            if doc_id is None:
                raise ConversationNotInStore(id)
            if "slug" in clean:
                holder = journal.lookup(_CONVERSATIONS, "slug", clean["slug"])
                if holder is not None and holder != doc_id:
                    raise SlugTaken(f"slug {clean['slug']!r} is taken")
            now = _now()
            clean["updated_at"] = now
            if "state" in clean or "state_data" in clean:
                clean["state_updated_at"] = now
            table = self._index.table(_CONVERSATIONS)
            updated = {**json_copy(dict(table.get(doc_id=doc_id) or {})), **clean}
            with self._saving(f"conversation {updated.get('slug', id)}'s state"):
                self.require_undamaged(id)
                self._record_in_journal(id, updated)
                table.update(clean, doc_ids=[doc_id])
            return json_copy(dict(table.get(doc_id=doc_id) or {}))

    def get_conversation(self, id_or_slug: str) -> dict[str, Any] | None:
        self._check_open()
        journal = self._index.journal
        with journal.locked():
            doc_id = journal.lookup(_CONVERSATIONS, "id", id_or_slug)
            if doc_id is None:
                doc_id = journal.lookup(_CONVERSATIONS, "slug", id_or_slug)
            if doc_id is None:
                return None
            doc = self._index.table(_CONVERSATIONS).get(doc_id=doc_id)
            return json_copy(dict(doc)) if doc is not None else None

    def list_conversations(
        self, *, include_sub_agents: bool = False, include_archived: bool = False
    ) -> list[dict[str, Any]]:
        """User conversations (and sub-agents if asked), oldest first."""
        self._check_open()
        q = Query()
        cond = q.id.exists()
        if not include_sub_agents:
            cond &= q.parent_conversation_id == None  # noqa: E711 (TinyDB query)
        if not include_archived:
            cond &= q.archived == False  # noqa: E712 (TinyDB query)
        return self._search(cond)

    def children(self, parent_id: str) -> list[dict[str, Any]]:
        """Sub-agent conversations started by `parent_id`, oldest first."""
        self._check_open()
        return self._search(Query().parent_conversation_id == parent_id)

    def _search(self, cond: Any) -> list[dict[str, Any]]:
        with self._index.journal.locked():
            docs = self._index.table(_CONVERSATIONS).search(cond)
            rows = sorted((json_copy(dict(d)) for d in docs), key=lambda d: d["created_at"])
        for row in rows:  # damage found here, even where the index cannot say so (read-only)
            found = self._damage.get(row["id"])
            if found is not None:
                row["damaged"] = found.summary
        return rows

    # -- messages ----------------------------------------------------------------

    def append_message(
        self,
        conversation_id: str,
        kind: MessageKind | str,
        content: Any,
        *,
        display_data: Any = None,
        usage_data: Any = None,
    ) -> dict[str, Any]:
        """Persist one message given as row values; durable when this returns. Returns
        the stored row (as `messages` returns it)."""
        try:
            typed = MessageKind(kind)
            usage = parse_usage(usage_data, "the message")
        except BadStoredMessage as exc:
            raise StoreError(str(exc)) from None
        except ValueError:
            known = ", ".join(k.value for k in MessageKind)
            raise StoreError(f"message_type {kind!r} is not one of {known}") from None
        message = StoredMessage(typed, content, display_data, usage)
        return self.append_messages(conversation_id, [message])[0].row()

    def append_messages(
        self, conversation_id: str, messages: Iterable[StoredMessage]
    ) -> list[StoredMessage]:
        """Persist several messages atomically (all or none) with consecutive sequence ids.

        Returns them as stored: scrubbed, with their id, sequence id and time."""
        self._check_open()
        prepared = [_prepared(m, f"message {i}") for i, m in enumerate(messages)]
        if not prepared:
            return []
        self._require_conversation(conversation_id)
        self.require_undamaged(conversation_id)
        db = self._conversation_db(conversation_id)
        table = db.table(_MESSAGES)
        journal = db.journal
        out: list[StoredMessage] = []
        what = "the message" if len(prepared) == 1 else "the messages"
        with self._saving(what), journal.transaction():
            next_seq = len(journal.raw_table(_MESSAGES)) + 1
            now = _now()
            for offset, message in enumerate(prepared):
                seq = next_seq + offset
                saved = _saved(message, conversation_id, seq, now)
                table.insert(Document(saved.row(), doc_id=seq))
                out.append(saved)
        return out

    def stored_messages(
        self, conversation_id: str, *, after_sequence: int = 0
    ) -> list[StoredMessage]:
        """`messages` parsed, each row once (`BadStoredMessage` naming a row this version
        cannot read; the row stays on disk as it is)."""
        return [
            StoredMessage.parse(row)
            for row in self.messages(conversation_id, after_sequence=after_sequence)
        ]

    def messages(self, conversation_id: str, *, after_sequence: int = 0) -> list[dict[str, Any]]:
        """The stored rows (docs/stored-messages.md) with sequence_id > after_sequence, in
        order: what is on disk, readable or not (`stored_messages` parses them)."""
        self._check_open()
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        with db.journal.locked():
            raw = db.journal.raw_table(_MESSAGES)
            if db.journal.damage is not None:
                self._note_damage(conversation_id, db.journal)
                keys = sorted(int(k) for k in raw if int(k) > after_sequence)
                out = [json_copy(raw[str(k)]) for k in keys]
            else:
                wanted = range(max(0, after_sequence) + 1, len(raw) + 1)
                docs = db.table(_MESSAGES).get(doc_ids=list(wanted)) if wanted else []
                out = sorted((json_copy(dict(d)) for d in docs), key=lambda d: d["sequence_id"])
        self._flush_marks()
        return out

    def message_count(self, conversation_id: str) -> int:
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        with db.journal.locked():
            if db.journal.damage is not None:
                self._note_damage(conversation_id, db.journal)
            count = len(db.journal.raw_table(_MESSAGES))
        self._flush_marks()
        return count

    # -- damage ------------------------------------------------------------------

    def damage(self, conversation_id: str) -> Damage | None:
        """What the conversation's journal lost, or None when it is intact (reads it)."""
        self._check_open()
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        with db.journal.locked():
            if db.journal.damage is None:
                self._damage.pop(conversation_id, None)
                return None
            found = self._note_damage(conversation_id, db.journal)
        self._flush_marks()
        return found

    def require_undamaged(self, conversation_id: str) -> None:
        """`ConversationDamaged` (saying how to repair it) if its journal is damaged."""
        found = self.damage(conversation_id)
        if found is not None:
            record = self.get_conversation(conversation_id) or {}
            slug = record.get("slug", conversation_id)
            raise ConversationDamaged(
                f"Conversation {slug} is damaged ({found.summary}) and cannot take new "
                f"messages: run `%phoenix repair {slug}` to go on with what is intact "
                "(the damaged file is kept beside it)."
            )

    def _note_damage(self, conversation_id: str, journal: JournalStorage) -> Damage:
        """Quarantine once: keep the original beside the journal, record what was lost."""
        known = self._damage.get(conversation_id)
        if known is not None:
            return known
        assert journal.damage is not None
        damage = self._describe(conversation_id, journal, journal.damage)
        self._damage[conversation_id] = damage
        self._unmarked.add(conversation_id)
        return damage

    def _flush_marks(self) -> None:
        """Say in the index what damaged conversations lost (after their journal's lock is
        released: the index lock is always taken first)."""
        while self._unmarked:
            conversation_id = self._unmarked.pop()
            damage = self._damage.get(conversation_id)
            if damage is not None:
                with contextlib.suppress(OSError, StoreError):  # best effort: read-only store
                    self._mark_damaged(conversation_id, damage.summary)

    def _describe(
        self, conversation_id: str, journal: JournalStorage, found: JournalDamage
    ) -> Damage:
        lost: set[int] = set()
        raw = journal.raw_table(_MESSAGES)
        present = {int(k) for k in raw}
        if present:
            lost |= set(range(1, max(present) + 1)) - present
        original: Path | None = None
        if not found.reason:
            data = journal.path.read_bytes()
            for offset in found.offsets:
                end = data.find(b"\n", offset)
                line = data[offset : end if end >= 0 else len(data)]
                lost |= {int(m) for m in _LOST_MESSAGE.findall(line) if int(m) not in present}
            with contextlib.suppress(OSError):  # repair makes it before rewriting, or fails
                original = _keep_copy(journal.path, data)
        summary = found.describe()
        if lost:
            ids = sorted(lost)
            shown = ", ".join(f"#{i}" for i in ids[:8]) + (" …" if len(ids) > 8 else "")
            summary += f"; message{'s' if len(ids) > 1 else ''} {shown} lost"
        elif not found.reason:
            summary += "; no message lost"
        else:
            summary += "; its messages cannot be read"
        return Damage(conversation_id, summary, original, found.lines, tuple(sorted(lost)))

    def _mark_damaged(self, conversation_id: str, summary: str | None) -> None:
        journal = self._index.journal
        with journal.locked():
            doc_id = journal.lookup(_CONVERSATIONS, "id", conversation_id)
            table = self._index.table(_CONVERSATIONS)
            doc = table.get(doc_id=doc_id) if doc_id is not None else None
            if doc is not None and doc.get("damaged") != summary:
                table.update({"damaged": summary}, doc_ids=[doc_id])  # type: ignore[list-item]

    def replace_messages(
        self,
        conversation_id: str,
        messages: Sequence[StoredMessage],
        *,
        state_fields: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """Rewrite a conversation's journal as these messages (renumbered from 1) and its
        record with `state_fields`, atomically: the repair of a damaged conversation.

        The damaged original stays beside it (a directory standing at the journal's
        path is moved there first). Returns the new history.
        """
        self._check_open()
        self._require_conversation(conversation_id)
        clean = {k: _jsonable(v, k) for k, v in state_fields.items()}
        prepared = [_prepared(m, f"message {seq}") for seq, m in enumerate(messages, start=1)]
        db = self._conversation_db(conversation_id)
        journal = db.journal
        index = self._index.journal
        with self._saving("the repaired conversation"), index.locked():
            doc_id = index.lookup(_CONVERSATIONS, "id", conversation_id)
            assert doc_id is not None
            table = self._index.table(_CONVERSATIONS)
            now = _now()
            record = {**json_copy(dict(table.get(doc_id=doc_id) or {})), **clean}
            record.update(updated_at=now, state_updated_at=now, damaged=None)
            with journal.locked():
                if journal.path.is_dir():  # kept as it is, beside the new journal
                    journal.path.rename(_free_name(journal.path))
                elif journal.damage is not None:  # never rewritten without its copy kept
                    _keep_copy(journal.path, journal.path.read_bytes())
                rows = {
                    str(seq): _saved(message, conversation_id, seq, now).row()
                    for seq, message in enumerate(prepared, start=1)
                }
                journal.replace_with({_MESSAGES: rows, _RECORD: {"1": record}})
            table.update({k: v for k, v in record.items() if k != "id"}, doc_ids=[doc_id])
        self._damage.pop(conversation_id, None)
        return self.messages(conversation_id)

    # -- the index is derivable ----------------------------------------------------

    def _journal_paths(self) -> list[Path]:
        try:
            return sorted((self.root / "conversations").glob("*.jsonl"))
        except OSError:
            return []

    def _rebuild_index(self, why: str) -> None:
        """Rebuild index.jsonl from the records the conversation journals hold.

        A record the intact part of the index holds and no journal does is kept.
        The damaged original is kept beside it as ``index.jsonl.damaged``.
        """
        index = self._index.journal
        try:
            with self._saving("the rebuilt index"), index.locked():
                records = {
                    str(d["id"]): json_copy(d)
                    for d in index.raw_table(_CONVERSATIONS).values()
                    if isinstance(d.get("id"), str)
                }
                for path in self._journal_paths():
                    record = _record_of(path)
                    if record is not None and isinstance(record.get("id"), str):
                        records[record["id"]] = record
                if index.damage is not None:
                    _keep_copy(index.path, index.path.read_bytes())
                ordered = sorted(records.values(), key=lambda r: str(r.get("created_at", "")))
                tables = {
                    _CONVERSATIONS: {str(i): r for i, r in enumerate(ordered, start=1)},
                    _META: {"1": {"key": "schema_version", "value": self.SCHEMA_VERSION}},
                }
                index.replace_with(tables)
        except StoreWriteError:
            return  # a read-only store: read what the index still holds
        kept = "; the damaged file is kept as index.jsonl.damaged" if "damaged" in why else ""
        self.index_rebuilt = f"{why}; rebuilt from {len(records)} conversation journal(s){kept}"

    def take_rebuild_note(self) -> str | None:
        """Why the index was rebuilt on open, once (for the notebook to say it once)."""
        note, self.index_rebuilt = self.index_rebuilt, None
        return note

    # -- internals ---------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _require_conversation(self, conversation_id: str) -> None:
        if conversation_id in self._known:  # conversations are never deleted
            return
        journal = self._index.journal
        with journal.locked():
            if journal.lookup(_CONVERSATIONS, "id", conversation_id) is None:
                raise ConversationNotInStore(conversation_id)
        self._known.add(conversation_id)

    def _conversation_db(self, conversation_id: str) -> JournalDB:
        with self._open_lock:
            db = self._open.get(conversation_id)
            if db is not None:
                self._open.move_to_end(conversation_id)
                return db
            db = open_journal_db(self.root / "conversations" / f"{conversation_id}.jsonl")
            self._open[conversation_id] = db
            while len(self._open) > self.OPEN_CONVERSATIONS:
                _, old = self._open.popitem(last=False)
                old.close()
        self._backfill_record(conversation_id, db)
        return db

    def _backfill_record(self, conversation_id: str, db: JournalDB) -> None:
        """A journal written before journals held their record gets it on first use, so
        the index stays derivable for old stores too (best effort: read-only, damaged)."""
        with contextlib.suppress(OSError, PhoenixError):
            record = self.get_conversation(conversation_id)
            if record is None:  # being created: create_conversation writes it
                return
            with db.journal.locked():
                if db.journal.damage is None and not db.journal.raw_table(_RECORD):
                    db.journal.commit([["put", _RECORD, 1, record]])

    @property
    def index_journal(self) -> JournalStorage:
        return self._index.journal


def _prepared(message: StoredMessage, what: str) -> StoredMessage:
    """The message as it will be stored: a known kind, its JSON scrubbed of secrets."""
    if not isinstance(message, StoredMessage):
        raise StoreError(f"{what}: a {type(message).__name__} is not a StoredMessage")
    if not isinstance(message.kind, MessageKind):
        known = ", ".join(k.value for k in MessageKind)
        raise StoreError(f"{what}: message_type {message.kind!r} is not one of {known}")
    if not isinstance(message.content, Mapping):
        raise StoreError(f"{what}: content is a {type(message.content).__name__}, not an object")
    if message.display is not None and not isinstance(message.display, Mapping):
        raise StoreError(f"{what}: display is a {type(message.display).__name__}, not an object")
    if message.usage is not None and not isinstance(message.usage, Usage):
        raise StoreError(f"{what}: usage is a {type(message.usage).__name__}, not a Usage")
    content = _jsonable(message.content, f"{what} content")
    display = _jsonable(message.display, f"{what} display_data")
    return replace(message, content=content, display=display)


def _saved(message: StoredMessage, conversation_id: str, seq: int, now: str) -> StoredMessage:
    """The message with what the store gives it: its id, place and time."""
    return replace(
        message,
        id=f"m-{uuid.uuid4().hex}",
        conversation_id=conversation_id,
        sequence_id=seq,
        created_at=now,
    )


def _record_of(path: Path) -> dict[str, Any] | None:
    """The conversation record a conversation journal holds (None if none or unreadable)."""
    storage = JournalStorage(path)
    try:
        with storage.locked():
            doc = storage.raw_table(_RECORD).get("1")
            return json_copy(doc) if isinstance(doc, dict) else None
    except OSError:
        return None
    finally:
        storage.close()


def _free_name(path: Path) -> Path:
    """``<name>.damaged``, or ``<name>.damaged-2`` … when that is taken."""
    candidate = path.with_name(path.name + ".damaged")
    n = 2
    while candidate.exists() or candidate.is_symlink():
        candidate = path.with_name(f"{path.name}.damaged-{n}")
        n += 1
    return candidate


def _keep_copy(path: Path, data: bytes) -> Path:
    """Keep the damaged file's bytes beside it, once (OSError if that cannot be written)."""
    first = path.with_name(path.name + ".damaged")
    n = 2
    candidate = first
    while candidate.exists():
        with contextlib.suppress(OSError):
            if candidate.is_file() and candidate.read_bytes() == data:
                return candidate
        candidate = path.with_name(f"{path.name}.damaged-{n}")
        n += 1
    tmp = path.with_name(path.name + ".damaged.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, candidate)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return candidate
