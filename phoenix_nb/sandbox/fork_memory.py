"""What a fork of the kernel does to its own memory before any job code runs.

A `fork()`ed child is a copy of the kernel's memory: the provider's key in the
SDK client and its headers (and in freed blocks the allocator has not reused),
the kernel's HMAC session key, the environment block, every cell's source in
`In`, `_i<n>` and the history manager, every output in the cache. Replacing
`os.environ` or deleting names hides none of that from code that reads its own
memory (`/proc/self/mem`, `ctypes.string_at`). So the fork, which knows the
values it must not show (`core.secrets.SecretValues`, built in the kernel just
before the fork), overwrites every occurrence of them in its own private
memory with asterisks of the same length — copy-on-write keeps the kernel's
pages untouched — before the job starts (`scrub_secrets`).

What is searched, and why (measured in tests/benchmarks/bench_fork.py):

* every *private, writable* mapping (the heap, the allocator's arenas, thread
  stacks, the main stack with argv and the environment block, libraries'
  data), only in its *resident* pages (`mincore`; with swap configured the
  pagemap's present or swapped-out pages, as mincore calls a swapped-out page
  absent): untouched reserved memory reads as zeros and costs a page fault
  per page to read;
* the pages of every other private mapping that hold memory rather than a
  file's pages — anonymous pages, and a file mapping's pages copied on a
  write (`/proc/self/pagemap`: present and not a file page, or swapped out) —
  however they are protected now: the job may `mprotect` its own memory
  readable, so memory the kernel wrote and then made read-only or
  inaccessible is as readable as the heap. They are opened (read and write
  added) for the scrub and protected again after it;
* not the buffers of numeric NumPy arrays (bool, int, float, complex dtypes)
  the user's namespace holds, at the top level or inside a DataFrame, Series,
  dict, list or tuple (`numeric_buffers`): a 4 GB array is the user's data,
  not a copy of a key, and searching it would cost ~0.3 s of CPU per GB on
  every fork. A value *bytes-wise inside* such an array is therefore not
  scrubbed;
* not a file mapping's own pages (library code and constants, a file mapped
  read-only): they hold the file's contents as they are on disk — no value
  the kernel computed, received or read from elsewhere — and searching the
  libraries' text would cost more than the heap. Shared mappings are made
  private first (`privatize_shared_mappings`, below): a file's then holds
  that file's pages, a copy of memory without a file is searched as above.

Each value is searched in every spelling it can have in memory: UTF-8 (C
strings, `bytes`, ASCII `str`) and, for CPython's wider `str` kinds, Latin-1,
UCS-2 and UCS-4 — an ASCII secret inside a cell whose source holds an emoji
is stored four bytes per character. With NumPy loaded (the usual kernel),
all needles are found in ONE pass over memory whose cost does not grow with
their number (`_scan_windows`: a hash of every aligned 8-byte word looked up
in a table of 64 KB or more, candidates checked exactly; a second pass of
4-byte words only when a value is 8 to 14 bytes long). One glibc `memmem`
pass per needle costs a pass over the heap per secret, so it loses as soon as
there are a few (tests/benchmarks/bench_fork.py prints both). Without NumPy it
is one `memmem` pass per needle: importing NumPy in each fork would cost more
than those passes for a few secrets.
Memory is read in place (no copy: a copy would itself be a new copy of the
secret); the needles are first copied to a scratch mapping outside the
searched ranges, so overwriting their originals on the heap does not change
what is searched, and every array that held a fragment of a needle or of
memory is zeroed before it is freed.

What this cannot reach: a secret stored transformed (encrypted, compressed,
split, XOR'd) or under an ordinary name inside an object, whose value phoenix
does not know; derived state such as an HMAC's precomputed pads (the port's
`enter_child` drops the session's HMAC object instead); the hash CPython
caches in a `str` object whose text was starred.

Shared memory (`privatize_shared_mappings`): copy-on-write covers private
memory only. Every mapping the kernel holds with MAP_SHARED — writable or not:
a read-only mapping of a file opened `r+b`, or an anonymous shared one, keeps
VM_MAYWRITE and `mprotect(PROT_WRITE)` would reopen it — is replaced at the
same address before the job runs: a file is mapped again MAP_PRIVATE from a
read-only descriptor (same pages until written, writes stay in the fork);
memory without a file is copied into a private mapping up to 64 MB and
unmapped beyond (touching it then ends the fork with SIGSEGV, which the tool
reports). After this no mapping of the fork is shared with anybody.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ScrubReport",
    "numeric_buffers",
    "privatize_shared_mappings",
    "scrub_secrets",
]

_PROT_NONE, _PROT_READ, _PROT_WRITE, _PROT_EXEC = 0x0, 0x1, 0x2, 0x4
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x02, 0x10, 0x20
_COPY_LIMIT = 64 << 20  # shared memory without a file is copied up to this size
_MIN_SKIPPED = 1 << 20  # numeric buffers smaller than this are scanned anyway
_PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_libc.memmem.restype = ctypes.c_void_p
_libc.memmem.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
_libc.memcmp.restype = ctypes.c_int
_libc.memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_FAILED = ctypes.c_void_p(-1).value
# mincore's vector: bit 0 of each page's byte says "resident"; the others are reserved.
_RESIDENT = re.compile(b"[" + b"".join(re.escape(bytes([b])) for b in range(1, 256, 2)) + b"]+")


@dataclass(frozen=True)
class _Mapping:
    start: int
    end: int
    perms: str
    offset: int
    inode: int
    path: str


def _mappings() -> list[_Mapping]:
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        path = fields[5] if len(fields) > 5 else ""
        out.append(_Mapping(start, end, fields[1], int(fields[2], 16), int(fields[4]), path))
    return out


# ------------------------------------------------------------------- shared memory


def privatize_shared_mappings() -> None:
    """Make every shared mapping of this (forked) process private, whatever its protection.

    Raises OSError if one can be neither replaced nor unmapped: the caller
    must then not run the job.
    """
    for m in _mappings():
        if m.perms[3] != "s":
            continue
        size = m.end - m.start
        prot = _prot(m.perms)
        if _remap_file_private(m, prot):
            continue
        if m.perms[0] != "r":
            # Unreadable: nothing to keep. A private anonymous mapping in its place.
            flags = _MAP_PRIVATE | _MAP_FIXED | _MAP_ANONYMOUS
            if _libc.mmap(m.start, size, _PROT_NONE, flags, -1, 0) != _FAILED:
                continue
        elif size <= _COPY_LIMIT:
            data = ctypes.string_at(m.start, size)
            flags = _MAP_PRIVATE | _MAP_FIXED | _MAP_ANONYMOUS
            if _libc.mmap(m.start, size, _PROT_READ | _PROT_WRITE, flags, -1, 0) != _FAILED:
                ctypes.memmove(m.start, data, size)
                if prot != _PROT_READ | _PROT_WRITE:
                    _libc.mprotect(m.start, size, prot)
                continue
        if _libc.munmap(m.start, size) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot detach shared memory from the fork: {os.strerror(err)}")


def _remap_file_private(m: _Mapping, prot: int) -> bool:
    """The same file pages at the same address, MAP_PRIVATE from a read-only descriptor."""
    if not m.path.startswith("/") or m.path.endswith("(deleted)") or not m.inode:
        return False
    with contextlib.suppress(OSError):
        fd = os.open(m.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_ino != m.inode:
                return False
            flags = _MAP_PRIVATE | _MAP_FIXED
            return bool(_libc.mmap(m.start, m.end - m.start, prot, flags, fd, m.offset) != _FAILED)
        finally:
            os.close(fd)
    return False


# ------------------------------------------------------------------------ secrets


@dataclass(frozen=True)
class ScrubReport:
    """What one scrub did: bytes searched, occurrences overwritten, needles, time taken."""

    searched: int
    overwritten: int
    needles: int
    skipped: int  # bytes of numeric array buffers left out
    seconds: float  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time (user + system): less load-dependent


def numeric_buffers(namespace: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(start, end) of the numeric NumPy buffers of 1 MB or more the namespace holds.

    Only exact types are looked at (ndarray, pandas' DataFrame and Series,
    dict, list, tuple), so no user code runs: a subclass may compute anything
    on attribute access, an exact ndarray's buffer address is a C field.
    """
    np = sys.modules.get("numpy")
    if np is None:
        return []
    pd = sys.modules.get("pandas")
    frames = (getattr(pd, "DataFrame", None), getattr(pd, "Series", None)) if pd is not None else ()
    out: list[tuple[int, int]] = []

    def array(value: Any) -> None:
        if type(value) is not np.ndarray or value.dtype.kind not in "biufc":
            return
        if value.nbytes < _MIN_SKIPPED or not (
            value.flags.c_contiguous or value.flags.f_contiguous
        ):
            return
        start = int(value.__array_interface__["data"][0])
        out.append((start, start + int(value.nbytes)))

    def visit(value: Any, depth: int) -> None:
        kind = type(value)
        if kind is np.ndarray:
            array(value)
        elif frames and kind in frames:
            with contextlib.suppress(Exception):
                for block in value._mgr.blocks:
                    array(block.values)
        elif depth < 2 and kind in (dict, list, tuple):
            items = value.values() if kind is dict else value
            for item in list(items)[:10_000]:
                visit(item, depth + 1)

    for value in list(namespace.values()):
        visit(value, 0)
    return out


def _resident_runs(m: _Mapping) -> list[tuple[int, int]]:
    """(start, end) of the runs of pages of `m` that are in memory."""
    pages = (m.end - m.start) // _PAGE
    vector = ctypes.create_string_buffer(pages)
    if _libc.mincore(m.start, m.end - m.start, vector) != 0:
        return [(m.start, m.end)]
    return [
        (m.start + found.start() * _PAGE, m.start + found.end() * _PAGE)
        for found in _RESIDENT.finditer(vector.raw)
    ]


# /proc/self/pagemap: 8 bytes per page; in the top byte, bit 7 "present", bit 6
# "swapped" and bit 5 "file page or shared". Present and not a file's page, or
# swapped out: memory this process wrote.
_WRITTEN_PAGE = bytes(range(256)).translate(
    bytes(1 if b & 0xA0 == 0x80 or b & 0x40 else 0 for b in range(256))
)
_IN_USE_PAGE = bytes(range(256)).translate(bytes(1 if b & 0xC0 else 0 for b in range(256)))
_WRITTEN = re.compile(b"\x01+")


def _written_runs(m: _Mapping, pagemap: int, kinds: bytes = _WRITTEN_PAGE) -> list[tuple[int, int]]:
    """(start, end) of the runs of pages of `m` that hold memory, not a file's pages.

    For a private mapping that is not both readable and writable: its
    anonymous pages, or the pages of a file mapping that were copied on a
    write (relocations, or data written and then protected). With
    `kinds=_IN_USE_PAGE`: every page present or swapped out.
    """
    pages = (m.end - m.start) // _PAGE
    try:
        entries = os.pread(pagemap, pages * 8, m.start // _PAGE * 8)
    except OSError:
        return [(m.start, m.end)] if kinds is _IN_USE_PAGE else []
    flags = entries[7::8].translate(kinds)
    return [
        (m.start + found.start() * _PAGE, m.start + found.end() * _PAGE)
        for found in _WRITTEN.finditer(flags)
    ]


def _swap_on() -> bool:
    """Whether pages may be swapped out (unknown counts as yes)."""
    try:
        return len(Path("/proc/swaps").read_text().splitlines()) > 1  # a header, then areas
    except OSError:
        return True


def _prot(perms: str) -> int:
    return (
        (_PROT_READ if perms[0] == "r" else _PROT_NONE)
        | (_PROT_WRITE if perms[1] == "w" else _PROT_NONE)
        | (_PROT_EXEC if perms[2] == "x" else _PROT_NONE)
    )


def _minus(
    runs: Iterable[tuple[int, int]], holes: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    out = []
    for start, end in runs:
        pieces = [(start, end)]
        for h_start, h_end in holes:
            next_pieces = []
            for s, e in pieces:
                if h_end <= s or h_start >= e:
                    next_pieces.append((s, e))
                    continue
                if s < h_start:
                    next_pieces.append((s, h_start))
                if h_end < e:
                    next_pieces.append((h_end, e))
            pieces = next_pieces
        out.extend(pieces)
    return out


_SPECIAL = ("[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_DEFAULT = 128 << 10  # glibc's default trim and mmap thresholds
_PROBE = ctypes.create_string_buffer(_CHUNK_PAGES := (1 << 20) // _PAGE + 2)


def _mapped(start: int, end: int) -> bool:
    """Whether [start, end) is still wholly mapped (mincore fails with ENOMEM if not)."""
    first = start // _PAGE * _PAGE
    size = end - first
    pages = -(-size // _PAGE)
    probe = _PROBE if pages <= _CHUNK_PAGES else ctypes.create_string_buffer(pages)
    return bool(_libc.mincore(first, size, probe) == 0)


_MEMMEM_MAX = 0  # up to this many needles, one memmem pass each instead of the window pass
_CHUNK = 1 << 20  # bytes hashed at a time (stays in cache; bounded temporaries)
_HASH_BITS = 16  # a 64 KB table at least (more for many needles): stays in the caches
_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)


@dataclass
class _Windows:
    """One aligned `width`-byte window per needle and alignment, and a table to find them.

    A needle of length L >= 2*width-1, wherever it lies, contains whole
    windows aligned to `width`: its bytes [o + width*j, o + width*(j+1)) for
    o = the distance from its start to the next multiple of `width`, j = 0,
    1, ... So for each needle and each o, ONE such window suffices to find
    every occurrence; it is chosen as the one fewest other needles share
    (secrets often share a prefix such as "sk-ant-", and a UCS-4 window is
    two characters): an exact window match then names about one needle to
    compare, whatever the number of needles. `words` is sorted; `words[k]`
    is needle `pairs[order[k]][0]`'s window at offset `pairs[order[k]][1]`.
    `table[hash(word)]` says "maybe one of the words".
    """

    width: int
    dtype: str
    placed: list[tuple[int, int, int]]
    pairs: list[tuple[int, int]]
    order: Any
    words: Any
    run_end: Any  # run_end[k]: the index past the last word equal to words[k]
    table: Any
    multiplier: Any
    shift: Any
    scratch: Any  # the hashes of one chunk
    marks: Any  # the table's answer for each

    @classmethod
    def of(
        cls, np: Any, width: int, placed: list[tuple[int, int, int]], area: tuple[int, int]
    ) -> _Windows:
        # The window starting at every byte of the scratch mapping that holds the
        # needles, read once (a sliding view, copied once into 8-byte rows).
        area_at, area_size = area
        raw = np.frombuffer((ctypes.c_char * area_size).from_address(area_at), dtype=np.uint8)
        windows = np.zeros((area_size - width + 1, 8), dtype=np.uint8)
        windows[:, :width] = np.lib.stride_tricks.sliding_window_view(raw, width)
        every = windows.view("<u8").reshape(-1)  # one 64-bit word per window
        ordered = np.sort(every)
        shared = np.searchsorted(ordered, every, side="right")
        shared -= np.searchsorted(ordered, every, side="left")  # how many windows are equal
        ordered.fill(0)
        pairs: list[tuple[int, int]] = []
        picked: list[int] = []
        padded = np.empty(-(-area_size // width) * width, dtype=np.intp)
        for i, (needle_at, _filler_at, length) in enumerate(placed):
            first, count = needle_at - area_at, length - width + 1  # its windows: first + s
            # Alignment o, index j: the window at s = o + width*j; the least shared per o.
            rows = -(-count // width)
            padded[: rows * width] = len(every)
            padded[:count] = shared[first : first + count]
            best = padded[: rows * width].reshape(rows, width).argmin(axis=0).tolist()
            for o, j in enumerate(best):
                if o + width * j < count:
                    pairs.append((i, o + width * j))
                    picked.append(first + o + width * j)
        unsorted = every[picked]
        windows.fill(0)
        order = np.argsort(unsorted, kind="stable")
        words = unsorted[order]
        unsorted.fill(0)
        # Memory is mostly zero words, and a multiplicative hash sends 0 to bucket 0:
        # a multiplier under which no needle window shares that bucket keeps zeros
        # from ever being candidates (the first that does so is taken; fixed list).
        run_end = np.searchsorted(words, words, side="right")
        # About 1 in 256 buckets set or fewer: a random word is a candidate that rarely.
        bits = min(max(_HASH_BITS, len(words).bit_length() + 8), 20)
        # Hashed in the window's own width (4-byte windows in 32-bit arithmetic: half
        # the work of widening each to 64 bits).
        kind = np.uint64 if width == 8 else np.uint32
        shift = kind(8 * width - bits)
        for value in _MULTIPLIERS:
            multiplier = kind(value & ((1 << (8 * width)) - 1))
            hashed = words.astype(kind)  # invertible once multiplied: shifted in place
            hashed *= multiplier
            hashed >>= shift
            if not (hashed == 0).any() or not words[0]:
                break
        table = np.zeros(1 << bits, dtype=bool)
        table[hashed.astype(np.intp)] = True
        scratch = np.empty(_CHUNK // width, dtype=kind)
        marks = np.empty(_CHUNK // width, dtype=bool)
        return cls(
            width,
            f"<u{width}",
            placed,
            pairs,
            order,
            words,
            run_end,
            table,
            multiplier,
            shift,
            scratch,
            marks,
        )

    def scan(self, np: Any, chunk: int, size: int, bounds: tuple[int, int]) -> int:
        """Overwrite every needle found through a window inside [chunk, chunk+size)."""
        memory = np.frombuffer((ctypes.c_char * size).from_address(chunk), dtype=self.dtype)
        n = memory.shape[0]
        hashed, marks = self.scratch[:n], self.marks[:n]
        np.multiply(memory, self.multiplier, out=hashed)
        np.right_shift(hashed, self.shift, out=hashed)
        # 64-bit hashes are read as intp in place; 32-bit ones are converted by take,
        # into a block malloc reuses (scrub_secrets keeps such blocks off mmap).
        self.table.take(hashed.view(np.intp) if self.width == 8 else hashed, out=marks)
        candidates = np.flatnonzero(marks)
        if not len(candidates):
            return 0
        raw = memory[candidates]
        values = raw.astype(np.uint64, copy=False)
        low = np.searchsorted(self.words, values, side="left")
        np.minimum(low, len(self.words) - 1, out=low)
        hit = self.words[low] == values
        raw.fill(0)
        values.fill(0)
        if not hit.any():
            return 0
        high = self.run_end[low]
        memcmp, memmove = _libc.memcmp, ctypes.memmove
        start, end = bounds
        overwritten = 0
        for index, k_low, k_high in zip(
            candidates[hit].tolist(), low[hit].tolist(), high[hit].tolist(), strict=True
        ):
            at = chunk + self.width * index
            for k in range(k_low, k_high):
                i, o = self.pairs[int(self.order[k])]
                needle_at, filler_at, length = self.placed[i]
                begin = at - o
                if begin < start or begin + length > end:
                    continue
                if memcmp(begin, needle_at, length) == 0:
                    memmove(begin, filler_at, length)
                    overwritten += 1
        return overwritten

    def clear(self) -> None:
        self.words.fill(0)
        self.table.fill(False)
        self.scratch.fill(0)


def _scan_windows(
    np: Any,
    ranges: Sequence[tuple[int, int]],
    placed: Sequence[tuple[int, int, int]],
    area: tuple[int, int],
) -> int:
    """All needles in one pass over memory, at a cost that does not grow with their number.

    Needles of 15 bytes or more are looked for through their aligned 8-byte
    windows, shorter ones (8 to 14 bytes) through aligned 4-byte windows (a
    second hash of the same chunk, only when there are such needles: a
    4-byte window of a UCS-4 needle is one character, as common in memory as
    a small integer, so the long needles keep 8-byte windows). Per chunk of
    1 MB: multiply, shift and a table look-up, each one NumPy loop writing
    into preallocated arrays (a temporary the size of the chunk would be
    mapped and unmapped by glibc each time, a page fault per 4 KB: the one
    `take` makes of 32-bit hashes comes from the heap instead); then the few
    candidates are checked against the sorted windows (`searchsorted`) and
    only exact window matches are compared with their needle in place
    (memcmp, no copy). Every array that held a fragment of a needle or of
    memory is zeroed before it is freed: freed memory is not cleared, and
    the job runs next.
    """
    wide = [p for p in placed if p[2] >= 15]
    narrow = [p for p in placed if p[2] < 15]
    if not placed:
        return 0
    indexes = [_Windows.of(np, 8, wide, area)] if wide else []
    if narrow:
        indexes.append(_Windows.of(np, 4, narrow, area))
    overwritten = 0
    try:
        for start, end in ranges:
            # Whole 8-byte words around the range (a range ends where a skipped buffer
            # begins, at any byte; the words stay inside its pages): every 4- or
            # 8-aligned window inside the range is read, and a match must lie inside
            # the range to be overwritten.
            first, last = start // 8 * 8, -(-end // 8) * 8
            for chunk in range(first, last, _CHUNK):
                size = min(_CHUNK, last - chunk)
                if not _mapped(chunk, chunk + size):
                    continue
                for index in indexes:
                    overwritten += index.scan(np, chunk, size, (start, end))
    finally:
        for index in indexes:
            index.clear()
    return overwritten


def _scan_each(placed: Sequence[tuple[int, int, int]], ranges: Sequence[tuple[int, int]]) -> int:
    """One memmem pass over every range per needle; overwrite each hit."""
    overwritten = 0
    memmem, memmove = _libc.memmem, ctypes.memmove
    for needle_at, filler_at, length in placed:
        for start, end in ranges:
            position = start
            if not _mapped(start, end):
                continue
            while end - position >= length:
                hit = memmem(position, end - position, needle_at, length)
                if not hit:
                    break
                memmove(hit, filler_at, length)
                overwritten += 1
                position = hit + length
    return overwritten


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent ranges as one: a copy may straddle two mappings that touch."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def scrub_secrets(
    forms: Sequence[tuple[bytes, bytes]],
    skip: Sequence[tuple[int, int]] = (),
    pagemap: int | None = None,
) -> ScrubReport:
    """Overwrite every occurrence of each needle in this process's private writable memory.

    `forms`: (needle, filler of the same length) pairs, longest first
    (`SecretValues.memory_forms`). `skip`: address ranges left unsearched
    (`numeric_buffers`). `pagemap`: this process's ``/proc/self/pagemap``,
    already open (``confine_forked_child`` returns it: a confined, non-dumpable
    process of an ordinary user may not open it any more); closed here in
    every case. None: opened here. Runs in the fork only: it writes to its own memory.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    if not forms:
        if pagemap is not None:
            os.close(pagemap)
        return ScrubReport(0, 0, 0, 0, 0.0)
    # Memory that was mapped when the ranges were taken must stay mapped while they
    # are read: no heap trimming (free() would otherwise give the top of the heap
    # back), and every chunk is checked with mincore (ENOMEM: no longer mapped)
    # right before it is read.
    # Blocks up to 16 MB come from the heap, not from mmap: a temporary a NumPy call
    # makes per chunk is then the same reused memory, not a fresh mapping to fault
    # in page by page. Both are set back to glibc's defaults for the job.
    _libc.mallopt(_M_TRIM_THRESHOLD, 0x7FFFFFFF)
    _libc.mallopt(_M_MMAP_THRESHOLD, 16 << 20)
    ranges: list[tuple[int, int]] = []
    # Memory the job could read after an mprotect of its own: written pages of
    # private mappings that are read-only or inaccessible now. Opened for the scrub
    # (read and write added), closed again after it.
    reopened: list[tuple[int, int, int]] = []  # (start, end, protection to restore)
    swap = _swap_on()
    if pagemap is None:
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for m in _mappings():
            if m.perms[3] != "p" or m.path in _SPECIAL:
                continue
            if m.perms[:2] == "rw":
                # mincore counts a swapped-out page as absent: with swap, the pagemap.
                in_use = _written_runs(m, pagemap, _IN_USE_PAGE) if swap else _resident_runs(m)
                ranges.extend(in_use)
                continue
            prot = _prot(m.perms)
            for start, end in _written_runs(m, pagemap):
                if _libc.mprotect(start, end - start, prot | _PROT_READ | _PROT_WRITE) == 0:
                    reopened.append((start, end, prot))
                    ranges.append((start, end))
    finally:
        os.close(pagemap)
    skipped = sum(
        min(e, r_e) - max(s, r_s) for s, e in skip for r_s, r_e in ranges if s < r_e and e > r_s
    )
    ranges = _merged(_minus(ranges, sorted(skip)))
    # The needles move to a mapping made after the ranges were taken: overwriting
    # their originals (which are on the scanned heap) must not change the search.
    total = sum(len(n) + len(f) for n, f in forms)
    scratch_size = -(-total // _PAGE) * _PAGE
    scratch = mmap.mmap(-1, scratch_size)
    base = ctypes.addressof(ctypes.c_char.from_buffer(scratch))
    placed: list[tuple[int, int, int]] = []  # (needle address, filler address, length)
    at = 0
    for needle, filler in forms:
        scratch[at : at + len(needle)] = needle
        scratch[at + len(needle) : at + 2 * len(needle)] = filler
        placed.append((base + at, base + at + len(needle), len(needle)))
        at += 2 * len(needle)
    numpy = sys.modules.get("numpy")
    if numpy is None or len(placed) <= _MEMMEM_MAX:
        overwritten = _scan_each(placed, ranges)
    else:
        # Under 7 bytes a needle need not hold an aligned 4-byte window (memory_forms
        # makes none that short): memmem for those.
        windowed = [p for p in placed if p[2] >= 7]
        overwritten = _scan_windows(numpy, ranges, windowed, (base, scratch_size))
        overwritten += _scan_each([p for p in placed if p[2] < 7], ranges)
    searched = sum(e - s for s, e in ranges)
    for start, end, prot in reopened:
        _libc.mprotect(start, end - start, prot)
    _libc.mallopt(_M_MMAP_THRESHOLD, _MALLOC_DEFAULT)
    _libc.mallopt(_M_TRIM_THRESHOLD, _MALLOC_DEFAULT)
    # Zero the scratch before letting it go (it is not scanned).
    ctypes.memset(base, 0, scratch_size)
    del base
    with contextlib.suppress(BufferError):
        scratch.close()
    return ScrubReport(
        searched,
        overwritten,
        len(placed),
        skipped,
        time.perf_counter() - started,
        time.process_time() - cpu_started,
    )
