"""Git objects written straight into the shadow store: loose objects, packs and trees.

Why not `git hash-object` / `fast-import`: every `git` process costs milliseconds
to start, and git hashes with collision-detecting SHA-1, several times slower
than the OpenSSL SHA-1 behind `hashlib`. A checkpoint after a tool call has a
budget of 100 ms and the first checkpoint of a 100 MB tree one of 2 s
(tests/benchmarks/bench_checkpoint.py); spawning git per step, or letting it
hash 100 MB, spends most of both. The formats written here are git's
documented on-disk formats (Documentation/gitformat-pack.txt: loose objects
are zlib of "<type> <size>\\0<data>"; pack v2 and pack index v2), small and
stable for fifteen years; the tests run `git fsck --strict` on the stores, and
git itself reads them for everything else (diffs, restores, refs).

Few objects are written loose (as `git add` does); many go into packs of at
most `PACK_BATCH` bytes, stored without compression (like the previous
`pack.compression=0`): creating ten thousand loose files costs seconds on some
disks, deflating 100 MB most of a second. Nothing is fsync'ed, like git's own
loose objects by default: a checkpoint guards against what the agent does, and
a pack is renamed into place only once complete.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

COMMIT, TREE, BLOB = 1, 2, 3
_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob"}
TREE_MODE = 0o40000
PACK_BATCH = 32 * 1024 * 1024  # bytes of object data held before a pack is written
# Packs are written by this thread while the caller reads and hashes the next files
# (zlib, hashlib and file I/O release the GIL, so the two overlap on two cores).
_WRITER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="phoenix-pack")


def object_sha(kind: int, data: bytes) -> bytes:
    """The object name git gives `data` of this type (20 bytes)."""
    h = hashlib.sha1(b"%s %d\0" % (_NAMES[kind], len(data)))
    h.update(data)
    return h.digest()


def tree_bytes(entries: Mapping[bytes, tuple[int, bytes]]) -> bytes:
    """A tree object's body: entries sorted as git sorts them (a tree's name as if "name/")."""
    items = sorted(entries.items(), key=lambda kv: kv[0] + b"/" if kv[1][0] == TREE_MODE else kv[0])
    return b"".join(b"%o %s\0%s" % (mode, name, sha) for name, (mode, sha) in items)


class ObjectSink:
    """Writes objects into a git object directory: loose, or packed when `packed`."""

    def __init__(self, objects: Path, *, packed: bool) -> None:
        self.objects = objects
        self.packed = packed
        self._pending: list[tuple[int, bytes, bytes]] = []
        self._pending_bytes = 0
        self._seen: set[bytes] = set()
        self._counter = 0
        self._writing: list[concurrent.futures.Future[None]] = []

    def add(self, kind: int, data: bytes, sha: bytes | None = None) -> bytes:
        """Store an object (once) and return its name."""
        sha = object_sha(kind, data) if sha is None else sha
        if sha in self._seen:
            return sha
        self._seen.add(sha)
        if not self.packed:
            self._write_loose(kind, data, sha)
            return sha
        self._pending.append((kind, sha, data))
        self._pending_bytes += len(data)
        if self._pending_bytes >= PACK_BATCH:
            self._flush()
        return sha

    def close(self) -> None:
        """Write what is pending and wait for every pack (raising what writing raised)."""
        if self._pending:
            self._flush()
        writing, self._writing = self._writing, []
        for future in writing:
            future.result()

    def _flush(self) -> None:
        objs, self._pending, self._pending_bytes = self._pending, [], 0
        self._counter += 1
        self._writing.append(_WRITER.submit(self._write_pack, objs, self._counter))

    def _write_loose(self, kind: int, data: bytes, sha: bytes) -> None:
        hexsha = sha.hex()
        folder = f"{self.objects}/{hexsha[:2]}"
        target = f"{folder}/{hexsha[2:]}"
        if os.path.exists(target):
            return
        body = zlib.compress(b"%s %d\0" % (_NAMES[kind], len(data)) + data, 1)
        tmp = f"{folder}/tmp_obj_{os.getpid()}_{hexsha[2:10]}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, flags, 0o644)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)

    def _write_pack(self, objs: list[tuple[int, bytes, bytes]], counter: int) -> None:
        """One pack (v2, every object whole) and its index (v2), renamed into place."""
        pack_dir = self.objects / "pack"
        pack_dir.mkdir(exist_ok=True)
        tmp = pack_dir / f"tmp_pack_{os.getpid()}_{id(self)}_{counter}"
        digest = hashlib.sha1()
        entries: list[tuple[bytes, int, int]] = []
        try:
            with open(tmp, "wb") as f:
                head = b"PACK" + struct.pack(">II", 2, len(objs))
                f.write(head)
                digest.update(head)
                offset = len(head)
                for kind, sha, data in objs:
                    packed = zlib.compress(data, 0 if kind == BLOB else 1)
                    header = _entry_header(kind, len(data))
                    f.write(header)
                    f.write(packed)
                    digest.update(header)
                    digest.update(packed)
                    entries.append((sha, zlib.crc32(packed, zlib.crc32(header)), offset))
                    offset += len(header) + len(packed)
                checksum = digest.digest()
                f.write(checksum)
            name = f"pack-{checksum.hex()}"
            idx_tmp = pack_dir / f"tmp_idx_{os.getpid()}_{id(self)}_{counter}"
            idx_tmp.write_bytes(_pack_index(entries, checksum))
            os.replace(tmp, pack_dir / f"{name}.pack")
            os.replace(idx_tmp, pack_dir / f"{name}.idx")  # the pack is visible from here on
        finally:
            tmp.unlink(missing_ok=True)


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 3 bits of type, then the size 4 + 7·n bits at a time."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _pack_index(entries: list[tuple[bytes, int, int]], pack_checksum: bytes) -> bytes:
    entries = sorted(entries)
    fanout = [0] * 256
    for sha, _crc, _off in entries:
        fanout[sha[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _sha, _crc, off in entries:
        if off < 0x80000000:
            small.append(off)
        else:
            small.append(0x80000000 | len(large))
            large.append(off)
    n = len(entries)
    body = b"".join(
        (
            b"\377tOc" + struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(e[0] for e in entries),
            struct.pack(f">{n}I", *(e[1] for e in entries)),
            struct.pack(f">{n}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_checksum,
        )
    )
    return body + hashlib.sha1(body).digest()


class Trees:
    """The tree objects of one snapshot, kept in memory and rewritten only where changed."""

    def __init__(self) -> None:
        self.children: dict[str, dict[bytes, tuple[int, bytes]]] = {"": {}}
        self.shas: dict[str, bytes] = {}
        self._dirty: set[str] = {""}

    def set(self, path: str, mode: int, sha: bytes) -> None:
        folder, _, name = path.rpartition("/")
        self._folder(folder)[os.fsencode(name)] = (mode, sha)
        self._dirty.add(folder)

    def remove(self, path: str) -> None:
        folder, _, name = path.rpartition("/")
        entries = self.children.get(folder)
        if entries is not None and entries.pop(os.fsencode(name), None) is not None:
            self._dirty.add(folder)

    def _folder(self, folder: str) -> dict[bytes, tuple[int, bytes]]:
        entries = self.children.get(folder)
        if entries is None:
            entries = self.children[folder] = {}
            if folder:
                self._folder(folder.rpartition("/")[0])
        return entries

    def flush(self, sink: ObjectSink) -> bytes:
        """Write the changed trees (deepest first) and return the root tree's name."""
        pending: set[str] = set()
        for folder in self._dirty:
            while folder not in pending:
                pending.add(folder)
                if not folder:
                    break
                folder = folder.rpartition("/")[0]
        self._dirty = set()
        for folder in sorted(pending, key=lambda f: f.count("/") + 1 if f else 0, reverse=True):
            entries = self.children.get(folder)
            parent, _, name = folder.rpartition("/")
            if folder and not entries:  # git keeps no empty trees
                self.children.pop(folder, None)
                self.shas.pop(folder, None)
                siblings = self.children.get(parent)
                key = os.fsencode(name)
                # Only the tree: a file that took the emptied folder's name stays.
                if siblings is not None and siblings.get(key, (TREE_MODE,))[0] == TREE_MODE:
                    siblings.pop(key, None)
                continue
            sha = sink.add(TREE, tree_bytes(entries or {}))
            self.shas[folder] = sha
            if folder:
                self.children[parent][os.fsencode(name)] = (TREE_MODE, sha)
        return self.shas[""]
