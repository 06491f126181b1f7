"""An append-only, self-checking journal as a TinyDB storage.

Stock TinyDB hands its storage the whole database on every write, so the cost
of one insert grows with the file. Here a write is one line appended to a JSON
lines file: ``<crc32 hex> <json>\\n`` holding the table operations of one
transaction (puts of whole documents, deletes, table clears) or, as the first
line after compaction, a snapshot of every table.

Why this holds the store's properties:

* Durability: a transaction is acknowledged only after its line is written and
  ``fdatasync``-ed; a new file's directory entry is fsynced when created, and
  compaction writes a temporary file, fsyncs it, ``os.replace``-s it over the
  journal and fsyncs the directory, so the path always names a complete file.
* Crash at any instant: a kill during ``write`` can leave only a torn *last*
  line, one without its newline (the newline is the last byte written), so
  loading stops before it; the next writer, holding the lock, truncates it
  away before appending.
* Damage is contained, never guessed at: a complete line (newline included)
  whose checksum fails, or that holds valid JSON with the wrong checksum,
  cannot come from a crash. Loading skips it, keeps applying the lines after
  it whose own checksums hold, and records what was lost in `damage`; the
  journal then refuses every append (`JournalDamaged`) until its owner has
  rewritten it (`replace_with`), so nothing new lands on top of a hole.
* Failed writes lose nothing already saved: a write or fsync that fails (disk
  full, read-only, I/O error) truncates the file back to its last good line,
  drops the failed transaction from memory and re-raises the ``OSError``; a
  compaction that fails after its append was saved is given up, not reported.
  A journal that cannot be opened for writing (read-only store) is read
  without the file lock, which cannot be created there, and refuses appends.
* Many processes: every access holds a ``filelock`` lock (and a thread lock).
  Under it the journal stats the path: a new inode (another process compacted)
  means a full reload, a longer file means the other process appended and only
  the new tail is read and applied. Nothing is served from memory without this
  check, and tables are created with the TinyDB query cache disabled.
* Cost: an append touches one line and O(1) in-memory entries (the table class
  below journals only the documents an operation changed, instead of TinyDB's
  rebuild of the whole table); compaction runs when dead bytes exceed the live
  ones, so its O(n) cost is amortised over at least as many writes.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from tinydb import TinyDB
from tinydb.storages import Storage
from tinydb.table import Document, Table

from phoenix_nb.errors import PhoenixError

# errors of a store that cannot be written here (read-only, no permission, not a folder)
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR})

Op = list[Any]  # ["put", table, doc_id, doc] | ["del", table, doc_id] | ["clear", table]


class JournalCorrupt(PhoenixError):
    """A journal holds damage (a bad line, or something that is not a journal file)."""


class JournalDamaged(JournalCorrupt):
    """An append to a damaged journal, refused until it is rewritten."""


@dataclass(frozen=True)
class JournalDamage:
    """What a load of a damaged journal could not read.

    `lines`: 1-based numbers of the complete lines that failed their checksum (or
    held no valid operations); `offsets`: their byte offsets; `reason` when the
    whole file is unreadable (e.g. a directory stands at its path).
    """

    lines: tuple[int, ...] = ()
    offsets: tuple[int, ...] = ()
    reason: str = ""

    def describe(self) -> str:
        if self.reason:
            return self.reason
        where = ", ".join(map(str, self.lines[:8])) + (" …" if len(self.lines) > 8 else "")
        return f"line{'s' if len(self.lines) > 1 else ''} {where} unreadable"

    def merge(self, other: JournalDamage) -> JournalDamage:
        return JournalDamage(
            self.lines + other.lines, self.offsets + other.offsets, self.reason or other.reason
        )


def encode_line(payload: Mapping[str, Any]) -> bytes:
    """One self-checking journal line for a transaction or snapshot."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return b"%08x " % zlib.crc32(body) + body + b"\n"


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The payload of a complete, intact line, or None when torn or damaged."""
    if len(line) < 10 or not line.endswith(b"\n") or line[8:9] != b" ":
        return None
    body = line[9:-1]
    try:
        if int(line[:8], 16) != zlib.crc32(body):
            return None
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON tree, much cheaper than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def fsync_dir(path: Path) -> None:
    """Make a created or replaced directory entry durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalStorage(Storage):
    """TinyDB storage over one journal file; see the module docstring.

    Callers must hold :meth:`locked` around every use so that reads are fresh and
    read-modify-write sequences are atomic across threads and processes.
    """

    # Dead bytes tolerated before compaction, on top of the live ones.
    compact_min_bytes: int = 256 * 1024

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        indexed_fields: tuple[str, ...] = (),
        lock_timeout: float = 60.0,
    ) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_suffix(".lock")
        self._file_lock = FileLock(self._lock_path, timeout=lock_timeout, thread_local=False)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._indexed_fields = indexed_fields
        self._fd: int | None = None
        self._inode: int | None = None
        self._offset = 0  # bytes of the file applied to memory (all good lines)
        self._tables: dict[str, dict[str, dict[str, Any]]] = {}
        self._max_id: dict[str, int] = {}
        self._index: dict[tuple[str, str], dict[Any, int]] = {}
        self._live_bytes: dict[tuple[str, str], int] = {}
        self._live_total = 0
        self._pending: list[Op] | None = None
        self._loaded = False
        self._line_count = 0  # complete lines read (for damage line numbers)
        self.damage: JournalDamage | None = None
        self.read_only = False  # opened read-only (a read-only store): appends refused
        self.reloads = 0  # full reloads, for tests of freshness

    # -- TinyDB Storage interface ------------------------------------------------

    def read(self) -> dict[str, dict[str, Any]]:
        """The live tables (no copy): TinyDB only reads them; writes go through the table."""
        self._require_lock()
        return self._tables

    def write(self, data: dict[str, dict[str, Any]]) -> None:
        """Whole-database writes (TinyDB's drop_tables/drop_table) become clear+put ops."""
        self._require_lock()
        ops: list[Op] = [["clear", name] for name in self._tables if name not in data]
        for name, table in data.items():
            ops.append(["clear", name])
            ops.extend(["put", name, int(k), json_copy(doc)] for k, doc in table.items())
        self.commit(ops)

    def close(self) -> None:
        """Drop the descriptor; a later use reopens and reloads (LRU eviction relies on it)."""
        with self._thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._loaded = False

    # -- locking and freshness ---------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the thread and file locks, with memory brought up to date on entry."""
        with self._thread_lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            locked = self._acquire_file_lock()
            self._depth = 1
            try:
                self._refresh()
                yield
            finally:
                self._depth = 0
                if locked:
                    self._file_lock.release()

    def _acquire_file_lock(self) -> bool:
        """Take the file lock; False on a store where it cannot be created (read-only).

        Nobody can append to such a store, so reading without the lock is safe.
        """
        try:
            self._file_lock.acquire(poll_interval=0.001)
        except OSError as exc:
            if exc.errno not in _UNWRITABLE:
                raise
            self.read_only = True
            return False
        return True

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group every op inside into one journal line: all of them persist or none."""
        with self.locked():
            if self._pending is not None:  # nested: the outer one commits
                yield
                return
            self._pending = []
            try:
                yield
            except BaseException:
                self._pending = None
                self._forget_memory()  # memory may hold part of the failed transaction
                raise
            ops, self._pending = self._pending, None
            if ops:
                line = encode_line({"ops": ops})
                share = len(line) // len(ops)
                for op in ops:  # applied with size 0 above; count their bytes as live now
                    key = (op[1], str(op[2])) if op[0] == "put" else None
                    if key in self._live_bytes:
                        self._live_bytes[key] += share
                        self._live_total += share
                self._append(line)

    def _require_lock(self) -> None:
        if not self._depth:
            raise RuntimeError("journal accessed without holding its lock")

    def _forget_memory(self) -> None:
        """Reload now, or on the next lock if the file cannot be read now."""
        try:
            self._reload()
        except OSError:
            self._loaded = False

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            try:
                self._create()
            except OSError as exc:
                if exc.errno not in _UNWRITABLE | {errno.EEXIST}:
                    raise
                self._empty(read_only=True)  # a read-only store without this journal
                return
            st = os.stat(self.path)
        stale = self._fd is None or not self._loaded or st.st_ino != self._inode
        if stale or st.st_size < self._offset:
            self._reload()
        elif st.st_size > self._offset:
            self._read_from(self._offset, initial=False)

    def _empty(self, *, read_only: bool = False, damage: JournalDamage | None = None) -> None:
        """No file to read: empty tables, appends refused when read-only or damaged."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._tables, self._max_id, self._index = {}, {}, {}
        self._live_bytes, self._live_total = {}, 0
        self._offset = self._line_count = 0
        self._loaded = True
        self.read_only = self.read_only or read_only
        self.damage = damage

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fsync(fd)
        os.close(fd)
        fsync_dir(self.path.parent)

    def _reload(self) -> None:
        self.reloads += 1
        self._tables = {}
        self._max_id = {}
        self._index = {}
        self._live_bytes = {}
        self._live_total = 0
        self._offset = self._line_count = 0
        self._loaded = True
        self.damage = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        except IsADirectoryError:
            self._inode = os.stat(self.path).st_ino
            self._empty(damage=JournalDamage(reason="a directory stands where its file should be"))
            return
        except OSError as exc:
            if exc.errno not in _UNWRITABLE:
                raise
            self._fd = os.open(self.path, os.O_RDONLY)
            self.read_only = True
        self._inode = os.fstat(self._fd).st_ino
        self._read_from(0, initial=True)

    def _read_from(self, offset: int, *, initial: bool) -> None:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size - offset, offset)
        pos = 0
        lines: list[int] = []
        offsets: list[int] = []
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                break  # a torn tail from a crashed writer: ignored, truncated on next append
            line = data[pos : end + 1]
            self._line_count += 1
            payload = decode_line(line)
            if payload is None or not self._apply_payload(payload, len(line)):
                lines.append(self._line_count)  # complete but damaged: skipped, recorded
                offsets.append(offset + pos)
            pos += len(line)
        self._offset = offset + pos
        if lines:
            found = JournalDamage(tuple(lines), tuple(offsets))
            self.damage = found if self.damage is None else self.damage.merge(found)

    # -- applying operations -----------------------------------------------------

    def _apply_payload(self, payload: Mapping[str, Any], nbytes: int) -> bool:
        """Apply one intact line; False (nothing applied) when its operations are malformed."""
        try:
            ops = _checked_ops(payload)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return False
        if ops is None:
            self._tables, self._max_id, self._index = {}, {}, {}
            self._live_bytes, self._live_total = {}, 0
            ops = [
                ["put", name, int(k), doc]
                for name, table in payload["snapshot"].items()
                for k, doc in table.items()
            ]
            for name in payload["snapshot"]:
                self._tables.setdefault(name, {})
        share = nbytes // max(1, len(ops))
        for op in ops:
            self._apply(op, share)
        return True

    def _apply(self, op: Op, nbytes: int) -> None:
        kind, name = op[0], op[1]
        table = self._tables.setdefault(name, {})
        if kind == "clear":
            for key in list(table):
                self._forget(name, key)
            table.clear()
            self._max_id[name] = 0
            return
        key = str(op[2])
        if key in table:
            self._forget(name, key)
        if kind == "put":
            doc = op[3]
            table[key] = doc
            self._max_id[name] = max(self._max_id.get(name, 0), op[2])
            self._live_bytes[(name, key)] = nbytes
            self._live_total += nbytes
            for f in self._indexed_fields:
                if f in doc:
                    self._index.setdefault((name, f), {})[doc[f]] = op[2]
        elif kind == "del":
            table.pop(key, None)

    def _forget(self, name: str, key: str) -> None:
        self._live_total -= self._live_bytes.pop((name, key), 0)
        doc = self._tables[name][key]
        for f in self._indexed_fields:
            idx = self._index.get((name, f))
            if idx is not None and f in doc and idx.get(doc[f]) == int(key):
                del idx[doc[f]]

    def commit(self, ops: list[Op]) -> None:
        """Apply ops to memory and persist them (now, or with the open transaction)."""
        self._require_lock()
        if not ops:
            return
        if self._pending is not None:
            for op in ops:
                self._apply(op, 0)
            self._pending.extend(ops)
            return
        line = encode_line({"ops": ops})
        for op in ops:
            self._apply(op, len(line) // len(ops))
        self._append(line)

    def _append(self, line: bytes) -> None:
        if self.damage is not None:
            self._forget_memory()
            raise JournalDamaged(f"{self.path}: damaged ({self.damage.describe()})")
        if self._fd is None or self.read_only:
            self._forget_memory()
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self.path))
        try:
            size = os.fstat(self._fd).st_size
            if size != self._offset:  # a torn tail left by a crashed writer
                os.ftruncate(self._fd, self._offset)
            written = os.write(self._fd, line)
            if written != len(line):  # a short write: the disk filled up mid-line
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            os.fdatasync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._offset)  # back to the last good line
            self._forget_memory()
            raise
        self._offset += len(line)
        self._line_count += 1
        if self._offset > 2 * self._live_total + self.compact_min_bytes:
            try:
                self.compact()
            except OSError:  # the append is saved; compaction waits for more room
                with contextlib.suppress(OSError):
                    self._tmp_path().unlink()

    def _tmp_path(self) -> Path:
        return self.path.with_name(self.path.name + ".tmp")

    def compact(self) -> None:
        """Rewrite the journal as one snapshot line, atomically."""
        self._require_lock()
        self.replace_with(self._tables)

    def replace_with(self, tables: Mapping[str, Mapping[str, Any]]) -> None:
        """Make the journal one snapshot of `tables`, atomically (a temporary file fsynced,
        then renamed over the path): compaction, and the rewrite of a damaged journal."""
        self._require_lock()
        line = encode_line({"snapshot": tables})
        tmp = self._tmp_path()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
            os.fsync(fd)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self._reload()

    # -- helpers for the table and the store -------------------------------------

    def raw_table(self, name: str) -> dict[str, dict[str, Any]]:
        self._require_lock()
        return self._tables.get(name, {})

    def max_id(self, name: str) -> int:
        self._require_lock()
        return self._max_id.get(name, 0)

    def lookup(self, name: str, field: str, value: Any) -> int | None:
        """Doc id of the document whose indexed `field` equals `value` (O(1))."""
        self._require_lock()
        return self._index.get((name, field), {}).get(value)

    @property
    def size(self) -> int:
        return self._offset


def _checked_ops(payload: Mapping[str, Any]) -> list[Op] | None:
    """The ops of a transaction line (None for a snapshot), or an error if malformed.

    A line can pass its checksum and still be wrong (written by hand, or by a
    tool that recomputed the checksum): it is applied only if every op is well
    formed, so a bad line is skipped whole, never half-applied.
    """
    if "snapshot" in payload:
        snapshot = payload["snapshot"]
        if not isinstance(snapshot, dict) or not all(
            isinstance(t, dict) and all(isinstance(d, dict) for d in t.values())
            for t in snapshot.values()
        ):
            raise ValueError("malformed snapshot")
        for table in snapshot.values():
            for k in table:
                int(k)
        return None
    ops = payload["ops"]
    if not isinstance(ops, list):
        raise ValueError("ops is not a list")
    for op in ops:
        if not isinstance(op, list) or not op or not isinstance(op[1], str):
            raise ValueError("malformed op")
        if op[0] == "put":
            if len(op) != 4 or not isinstance(op[2], int) or not isinstance(op[3], dict):
                raise ValueError("malformed put")
        elif op[0] == "del":
            if len(op) != 3 or not isinstance(op[2], int):
                raise ValueError("malformed del")
        elif op[0] != "clear" or len(op) != 2:
            raise ValueError("unknown op")
    return list(ops)


class _Overlay(MutableMapping[int, dict[str, Any]]):
    """The table as a TinyDB updater sees it, recording changes without touching it.

    TinyDB updaters mutate a dict of ``doc_id -> document``; here reads copy the
    document on first access, so a failing updater changes nothing, and only the
    documents that actually differ afterwards are journalled.
    """

    def __init__(self, raw: dict[str, dict[str, Any]]) -> None:
        self._raw = raw
        self._touched: dict[int, dict[str, Any]] = {}
        self._written: set[int] = set()
        self._deleted: set[int] = set()
        self._cleared = False

    def _in_raw(self, key: int) -> bool:
        return not self._cleared and key not in self._deleted and str(key) in self._raw

    def __contains__(self, key: object) -> bool:
        return isinstance(key, int) and (key in self._touched or self._in_raw(key))

    def __getitem__(self, key: int) -> dict[str, Any]:
        if key in self._touched:
            return self._touched[key]
        if not self._in_raw(key):
            raise KeyError(key)
        doc = json_copy(self._raw[str(key)])
        self._touched[key] = doc
        return doc

    def __setitem__(self, key: int, value: dict[str, Any]) -> None:
        self._deleted.discard(key)
        self._touched[key] = value
        self._written.add(key)

    def __delitem__(self, key: int) -> None:
        if key not in self:
            raise KeyError(key)
        self._touched.pop(key, None)
        self._written.discard(key)
        self._deleted.add(key)

    def __iter__(self) -> Iterator[int]:
        seen = set()
        if not self._cleared:
            for k in list(self._raw):
                key = int(k)
                if key not in self._deleted:
                    seen.add(key)
                    yield key
        for key in list(self._touched):
            if key not in seen:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def clear(self) -> None:
        self._cleared = True
        self._touched.clear()
        self._written.clear()
        self._deleted.clear()

    def ops(self, name: str) -> list[Op]:
        ops: list[Op] = [["clear", name]] if self._cleared else []
        ops.extend(["del", name, key] for key in sorted(self._deleted) if str(key) in self._raw)
        for key, doc in self._touched.items():
            if key in self._written or doc != self._raw.get(str(key)):
                ops.append(["put", name, key, json_copy(dict(doc))])
        return ops


class JournalTable(Table):
    """A TinyDB table whose writes journal only what changed (see `_Overlay`)."""

    def __init__(self, storage: Storage, name: str, cache_size: int = 0, **kwargs: Any) -> None:
        super().__init__(storage, name, cache_size=0, **kwargs)

    def _get_next_id(self) -> int:
        # Never the cached counter of stock TinyDB: another process may have inserted.
        storage = self._storage
        assert isinstance(storage, JournalStorage)
        return storage.max_id(self.name) + 1

    def _update_table(self, updater: Callable[[dict[int, Any]], None]) -> None:
        storage = self._storage
        assert isinstance(storage, JournalStorage)
        overlay = _Overlay(storage.raw_table(self.name))
        updater(overlay)  # type: ignore[arg-type]
        storage.commit(overlay.ops(self.name))
        self.clear_cache()


class JournalDB(TinyDB):
    """TinyDB over a :class:`JournalStorage` with journalling tables."""

    table_class = JournalTable  # type: ignore[assignment]  # TinyDB types it as exactly Table

    @property
    def journal(self) -> JournalStorage:
        storage = self.storage
        assert isinstance(storage, JournalStorage)
        return storage


def open_journal_db(path: Path, *, indexed_fields: tuple[str, ...] = ()) -> JournalDB:
    return JournalDB(path, storage=JournalStorage, indexed_fields=indexed_fields)


__all__ = [
    "Document",
    "JournalCorrupt",
    "JournalDB",
    "JournalDamage",
    "JournalDamaged",
    "JournalStorage",
    "JournalTable",
    "decode_line",
    "encode_line",
    "fsync_dir",
    "open_journal_db",
]
