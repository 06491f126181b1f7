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

The conversation's ``updated_at`` changes with `update_conversation` (the
runtime persists every state change), not with each message, to keep a message
append to one fsync.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from tinydb import Query
from tinydb.table import Document

from phoenix_nb.errors import PhoenixError
from phoenix_nb.store import slugs
from phoenix_nb.store.journal import JournalDB, JournalStorage, json_copy, open_journal_db
from phoenix_nb.store.scrub import scrub

MESSAGE_TYPES = ("user", "agent", "tool", "system", "continuation", "error")
ACTOR_KINDS = {
    "user": "human",
    "agent": "llm_agent",
    "tool": "system",
    "system": "system",
    "continuation": "llm_agent",
    "error": "system",
}
UPDATABLE_FIELDS = frozenset({"state", "state_data", "mode", "archived", "slug", "seeded_from"})
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CONVERSATIONS = "conversations"
_MESSAGES = "messages"
_META = "_meta"

MessageSpec = tuple[str, Any, Any, Any]  # (message_type, content, display_data, usage_data)
Migration = Callable[["Store"], None]


class StoreError(PhoenixError):
    """A store operation refused with a message for the user; nothing was written."""


class UnknownConversation(StoreError, KeyError):
    def __str__(self) -> str:
        return f"no conversation {self.args[0]!r} in the store"


class SlugTaken(StoreError, ValueError):
    pass


def default_root() -> Path:
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
        (self.root / "conversations").mkdir(parents=True, exist_ok=True)
        self._index = open_journal_db(self.root / "index.jsonl", indexed_fields=("id", "slug"))
        self._open: OrderedDict[str, JournalDB] = OrderedDict()
        self._open_lock = threading.Lock()
        self._known: set[str] = set()
        self._closed = False
        self._migrate()

    # -- lifecycle ---------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        with self._index.journal.locked():
            return self._stored_version()

    def _stored_version(self) -> int:
        doc = self._index.table(_META).get(Query().key == "schema_version")
        return int(doc["value"]) if doc else 0

    def _migrate(self) -> None:
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
    ) -> dict[str, Any]:
        """Create and persist a conversation; `slug=None` picks a free readable one."""
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
                raise UnknownConversation(parent_id)
            if seed_from is not None and journal.lookup(_CONVERSATIONS, "id", seed_from) is None:
                raise UnknownConversation(seed_from)
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
                "archived": False,
                "seeded_from": seed_from,
                "created_at": now,
                "updated_at": now,
                "state_updated_at": now,
            }
            # The messages journal exists before the conversation is visible.
            with self._conversation_db(conv_id).journal.locked():
                pass
            self._index.table(_CONVERSATIONS).insert(record)
            self._known.add(conv_id)
            return json_copy(record)

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
                raise UnknownConversation(id)
            if "slug" in clean:
                holder = journal.lookup(_CONVERSATIONS, "slug", clean["slug"])
                if holder is not None and holder != doc_id:
                    raise SlugTaken(f"slug {clean['slug']!r} is taken")
            now = _now()
            clean["updated_at"] = now
            if "state" in clean or "state_data" in clean:
                clean["state_updated_at"] = now
            table = self._index.table(_CONVERSATIONS)
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
            return sorted((json_copy(dict(d)) for d in docs), key=lambda d: d["created_at"])

    # -- messages ----------------------------------------------------------------

    def append_message(
        self,
        conversation_id: str,
        message_type: str,
        content: Any,
        *,
        display_data: Any = None,
        usage_data: Any = None,
    ) -> dict[str, Any]:
        """Persist one message; durable when this returns. Returns the stored record."""
        return self.append_messages(
            conversation_id, [(message_type, content, display_data, usage_data)]
        )[0]

    def append_messages(
        self, conversation_id: str, specs: Sequence[MessageSpec] | Iterable[MessageSpec]
    ) -> list[dict[str, Any]]:
        """Persist several messages atomically (all or none) with consecutive sequence ids."""
        self._check_open()
        prepared: list[tuple[str, Any, Any, Any]] = []
        for i, spec in enumerate(specs):
            if len(spec) != 4:
                raise StoreError(
                    f"message {i}: expected (type, content, display, usage), got {spec!r}"
                )
            mtype, content, display, usage = spec
            if mtype not in MESSAGE_TYPES:
                raise StoreError(
                    f"message {i}: message_type {mtype!r} is not one of {list(MESSAGE_TYPES)}"
                )
            if content is None:
                raise StoreError(f"message {i}: content is required")
            prepared.append(
                (
                    mtype,
                    _jsonable(content, f"message {i} content"),
                    _jsonable(display, f"message {i} display_data"),
                    _jsonable(usage, f"message {i} usage_data"),
                )
            )
        if not prepared:
            return []
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        table = db.table(_MESSAGES)
        journal = db.journal
        out: list[dict[str, Any]] = []
        with journal.transaction():
            next_seq = len(journal.raw_table(_MESSAGES)) + 1
            now = _now()
            for offset, (mtype, content, display, usage) in enumerate(prepared):
                seq = next_seq + offset
                record = {
                    "id": f"m-{uuid.uuid4().hex}",
                    "conversation_id": conversation_id,
                    "sequence_id": seq,
                    "message_type": mtype,
                    "actor_kind": ACTOR_KINDS[mtype],
                    "content": content,
                    "display_data": display,
                    "usage_data": usage,
                    "created_at": now,
                }
                table.insert(Document(record, doc_id=seq))
                out.append(record)
        return [json_copy(r) for r in out]

    def messages(self, conversation_id: str, *, after_sequence: int = 0) -> list[dict[str, Any]]:
        """Messages with sequence_id > after_sequence, in order."""
        self._check_open()
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        with db.journal.locked():
            raw = db.journal.raw_table(_MESSAGES)
            wanted = range(max(0, after_sequence) + 1, len(raw) + 1)
            docs = db.table(_MESSAGES).get(doc_ids=list(wanted)) if wanted else []
            return sorted((json_copy(dict(d)) for d in docs), key=lambda d: d["sequence_id"])

    def message_count(self, conversation_id: str) -> int:
        self._require_conversation(conversation_id)
        db = self._conversation_db(conversation_id)
        with db.journal.locked():
            return len(db.journal.raw_table(_MESSAGES))

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
                raise UnknownConversation(conversation_id)
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
            return db

    @property
    def index_journal(self) -> JournalStorage:
        return self._index.journal
