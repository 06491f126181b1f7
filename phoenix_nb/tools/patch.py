"""The patch tool: precise, all-or-nothing edits of one text file.

Why it is shaped this way:

* All patches of one call are computed in memory first and the file is written
  once, atomically (temp file in the same directory + `os.replace`), keeping
  its mode bits, owner, group and extended attributes. A failing third patch
  therefore leaves the file untouched, and a crash mid-write never leaves half
  a file. Two cases write the file's own inode in place instead, because a
  rename would change what the file is: a file with hard links (a rename
  would split them) and a file we cannot give back its owner (not root).
* setuid/setgid bits are dropped from a changed file, as the kernel drops them
  when an unprivileged process writes it; root would otherwise keep them and a
  patched setuid binary would run the new code as its owner.
* Reading, matching and diffing run off the event loop: in a worker thread
  for small files, and in a child process above `_OFFLOAD_BYTES`, because in a
  thread a single C call over a large text (a regular expression, splitlines)
  holds the GIL, and so the kernel's loop, for hundreds of milliseconds. The
  kernel keeps serving the notebook while a 10 MB file is searched. Every step
  is linear in the file: the matches' line numbers are
  counted in one pass, only the first few positions are collected (the rest
  counted by `str.count`), folding touches only the look-alikes, the
  whitespace-tolerant search turns lines into characters and runs `str.find`,
  and the diff skips the unchanged head and tail. A cancel never abandons a write half-way.
* `replace` needs exactly one match. Models copy text imperfectly, so after an
  exact search we retry tolerantly — CRLF vs LF and Unicode look-alikes (curly
  quotes, en/em dashes, exotic spaces, ellipsis; the system these specs came
  from failed on exactly these), then line by line ignoring indentation — and
  map the match back to the original text, so every character outside the
  replaced span is preserved byte for byte. Ambiguity is never resolved by
  guessing: the model is told the count and line numbers.
* A CRLF file stays CRLF: inserted text takes the file's line ending.
* Binary files (NUL bytes or not UTF-8) are refused rather than re-encoded.
* The diff shown to the person is bounded (`DISPLAY_DIFF_CHARS`): an overwrite of a
  million-line file must not put megabytes into the record the kernel re-sends.
* In Restricted mode nothing is touched and the exact message of REQ-PATCH-009
  is returned; the kernel sandbox would refuse the write anyway, but the model
  deserves a clear pointer to request_mode_upgrade instead of EACCES.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import difflib
import itertools
import os
import pickle
import re
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phoenix_nb.child_python import answer_of_child
from phoenix_nb.core.displays import PatchDisplay
from phoenix_nb.core.tool_fields import PATCH_PATH
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.errors import PhoenixError
from phoenix_nb.tools.base import RESTRICTED_PATCH_MESSAGE, SchemaTool, ToolContext
from phoenix_nb.tools.schema import invalid_input_result

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files are not source code the model should patch

PATCH_DESCRIPTION = (
    "Edit one text file precisely. `path` is relative to the working directory "
    "(absolute paths are allowed). `patches` is a list applied in order, all or "
    "nothing: if any patch fails, the file is left unchanged. Operations:\n"
    "- replace: replace `oldText` with `newText`. `oldText` must match exactly one "
    "place in the file; include enough surrounding lines to make it unique. Small "
    "differences in indentation, line endings and typographic characters (curly "
    "quotes, dashes, non-breaking spaces) are tolerated.\n"
    "- overwrite: replace the whole file with `newText` (creates the file and its "
    "parent directories if missing).\n"
    "- append_eof / prepend_bof: add `newText` at the end / beginning of the file "
    "(creating it if missing).\n"
    "Line endings, permissions, owner and hard links of existing files are preserved "
    "(setuid/setgid bits are removed from a changed file); binary files are refused. "
    "The result reports the change; the user sees a diff. "
    "In Restricted mode (read-only, the default) this tool is disabled: call "
    "request_mode_upgrade first to ask the user for write access."
)

OPERATIONS = ("overwrite", "replace", "append_eof", "prepend_bof")

# Typographic characters models often "straighten" when copying text.
_LOOKALIKES: dict[str, str] = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u2033": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
    "\u2026": "...",
    "\u00a0": " ",
    "\u1680": " ",
    "\u2000": " ",
    "\u2001": " ",
    "\u2002": " ",
    "\u2003": " ",
    "\u2004": " ",
    "\u2005": " ",
    "\u2006": " ",
    "\u2007": " ",
    "\u2008": " ",
    "\u2009": " ",
    "\u200a": " ",
    "\u202f": " ",
    "\u205f": " ",
    "\u3000": " ",
}


class PatchError(PhoenixError):
    """A patch that cannot be applied; the message is for the model."""


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    line: int  # 1-based line of the start, for messages (0: not counted)


_MAX_LINES_SHOWN = 10

# Where folding changes the length: CRLF (2 -> 1 chars) and the ellipsis (1 -> 3).
_RESIZED = re.compile("\r\n|\u2026")


def _fold(text: str) -> str:
    # One str.replace per look-alike present: each is a C scan. A regex with
    # a callback per occurrence, or str.translate with a non-ASCII table,
    # costs 3 to 15 times as much on a 10 MB file.
    text = text.replace("\r\n", "\n")
    if text.isascii():
        return text
    for char, plain in _LOOKALIKES.items():
        if char in text:
            text = text.replace(char, plain)
    return text


class _Haystack:
    """The file's text, and its folded form computed once, when first needed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._folded: str | None = None

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = _fold(self.text)
        return self._folded


class _FoldMap:
    """Maps offsets in folded text back to the original, O(log k) per lookup.

    Only CRLF and the ellipsis change length, so the map keeps just where
    those are (k of them) instead of two integers per character of the file.
    """

    def __init__(self, text: str) -> None:
        self.orig: list[int] = []  # original offset of each resized span
        self.fold: list[int] = []  # folded offset where it starts
        self.olen: list[int] = []
        self.flen: list[int] = []
        shift = 0  # folded minus original offset before the current span
        for found in _RESIZED.finditer(text):
            olen = found.end() - found.start()
            flen = 1 if olen == 2 else 3
            self.orig.append(found.start())
            self.fold.append(found.start() + shift)
            self.olen.append(olen)
            self.flen.append(flen)
            shift += flen - olen

    def span(self, folded: int) -> tuple[int, int]:
        """The original (start, end) of the character at a folded offset."""
        k = bisect.bisect_right(self.fold, folded) - 1
        if k < 0:
            return folded, folded + 1
        if folded < self.fold[k] + self.flen[k]:
            return self.orig[k], self.orig[k] + self.olen[k]
        original = self.orig[k] + self.olen[k] + folded - (self.fold[k] + self.flen[k])
        return original, original + 1


@dataclass(frozen=True)
class _Found:
    """How many places matched, and the first few of them (enough to name them)."""

    total: int
    first: list[_Match]


def _overlaps_itself(needle: str) -> bool:
    """Whether a proper prefix of needle is also its suffix (KMP border), in O(m)."""
    border = [0] * len(needle)
    k = 0
    for i in range(1, len(needle)):
        while k and needle[i] != needle[k]:
            k = border[k - 1]
        if needle[i] == needle[k]:
            k += 1
        border[i] = k
    return bool(needle) and border[-1] > 0


def _find(haystack: str, needle: str) -> tuple[int, list[int]]:
    """(count of possibly overlapping places, the first few of them).

    Only the first few positions are collected; the rest are counted by
    `str.count` in C when the needle cannot overlap itself.
    """
    first: list[int] = []
    start = haystack.find(needle)
    while start != -1 and len(first) <= _MAX_LINES_SHOWN:
        first.append(start)
        start = haystack.find(needle, start + 1)
    if start == -1:
        return len(first), first
    if not _overlaps_itself(needle):
        return haystack.count(needle), first
    total = len(first)
    while start != -1:
        total += 1
        start = haystack.find(needle, start + 1)
    return total, first


def _with_lines(text: str, matches: list[_Match]) -> list[_Match]:
    """The line of each match, counting newlines once, left to right.

    Counting from the start of the file for every match would make an ambiguous
    replace quadratic in the file's size, stalling the kernel on a large file.
    """
    out: list[_Match] = []
    line, at = 1, 0
    for match in matches:
        if not match.line:
            line += text.count("\n", at, match.start)
            at = match.start
            match = _Match(match.start, match.end, line)
        out.append(match)
    return out


def _exact_matches(hay: _Haystack, old: str) -> _Found:
    total, first = _find(hay.text, old)
    return _Found(total, [_Match(p, p + len(old), 0) for p in first])


def _folded_matches(hay: _Haystack, old: str) -> _Found:
    text, folded, needle = hay.text, hay.folded, _fold(old)
    if not needle or (folded == text and needle == old):
        return _Found(0, [])  # folding changed nothing: the exact search already answered
    total, first = _find(folded, needle)
    if not total:
        return _Found(0, [])
    mapping = _FoldMap(text)
    return _Found(
        total,
        [_Match(mapping.span(p)[0], mapping.span(p + len(needle) - 1)[1], 0) for p in first],
    )


def _trim_blank_edges(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


# Whitespace within a line (str.strip's whitespace, newline excluded).
_BLANK = r"[^\S\n]*"


def _linewise_matches(hay: _Haystack, old: str) -> _Found:
    """Whole-line matches comparing lines with surrounding whitespace ignored.

    One regular expression over the folded text (each wanted line, any
    whitespace around it, whole lines only) rather than a list of a million
    stripped lines compared slice by slice, which was O(n * k) and slow even
    when linear. The leading newline is a literal the regex engine can skip
    to; a lookahead counts overlapping runs.
    """
    wanted = [line.strip() for line in _trim_blank_edges(_fold(old).split("\n"))]
    if not wanted or not any(wanted):
        return _Found(0, [])
    run = "\n".join(_BLANK + re.escape(w) + _BLANK if w else _BLANK for w in wanted)
    text = "\n" + hay.folded  # every line, the first one too, now follows a newline
    total = len(re.findall(f"\\n(?={run}(?:\\n|\\Z))", text))
    if not total:
        return _Found(0, [])
    mapping = None if hay.folded == hay.text else _FoldMap(hay.text)
    matches = []
    for found in itertools.islice(
        re.finditer(f"\\n(?=({run})(?:\\n|\\Z))", text), _MAX_LINES_SHOWN + 1
    ):
        start, end = found.start(), found.end(1) - 1  # offsets in hay.folded
        if mapping is not None:
            start, end = mapping.span(start)[0], mapping.span(end - 1)[1]
        matches.append(_Match(start, end, 0))
    return _Found(total, matches)


def _reindent(new: str, old: str, matched: str) -> str:
    """Shift `new` from the model's indentation to the file's at the matched place.

    The base indent is that of the first non-blank line of oldText versus the
    file's line it matched; deeper lines keep their relative indentation.
    """
    old_lines = [line for line in old.split("\n") if line.strip()]
    file_lines = [line for line in matched.split("\n") if line.strip()]
    if not old_lines or not file_lines:
        return new
    old_base = _indent_of(old_lines[0])
    file_base = _indent_of(file_lines[0])
    if old_base == file_base:
        return new
    out = []
    for line in new.split("\n"):
        if not line.strip():
            out.append(line)
        elif line.startswith(old_base):
            out.append(file_base + line[len(old_base) :])
        else:
            out.append(file_base + line.lstrip())
    return "\n".join(out)


def _closest_line_hint(text: str, old: str) -> str:
    """Point the model at the line most like the start of oldText."""
    first = next((line.strip() for line in _fold(old).split("\n") if line.strip()), "")
    if not first or not text:
        return ""
    lines = _fold(text).split("\n")
    if len(lines) > 50_000:
        return ""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(first)
    best_ratio, best_line = 0.0, 0
    for number, line in enumerate(lines, start=1):
        candidate = line.strip()
        if not candidate:
            continue
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best_ratio, best_line = ratio, number
    if best_ratio < 0.5:
        return ""
    shown = text.split("\n")[best_line - 1].rstrip("\r")
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return f" The most similar line is {best_line}: {shown!r}."


def _describe_lines(found: _Found) -> str:
    lines = [str(m.line) for m in found.first[:_MAX_LINES_SHOWN]]
    rest = found.total - len(lines)
    return ", ".join(lines) + (f" and {rest} more" if rest > 0 else "")


def _file_eol(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def _with_eol(text: str, eol: str) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", eol) if eol != "\n" else text


def _apply_replace(content: str, old: str, new: str, eol: str, label: str) -> tuple[str, str]:
    """Return the new content and a note on how the match was found ("" if exact)."""
    hay = _Haystack(content)
    for finder, note in (
        (_exact_matches, ""),
        (_folded_matches, "matched ignoring line endings and typographic characters"),
        (_linewise_matches, "matched ignoring indentation"),
    ):
        found = finder(hay, old)
        if found.total > 1:
            found = _Found(found.total, _with_lines(content, found.first))
            raise PatchError(
                f"{label}: oldText is ambiguous, {found.total} matches at lines "
                f"{_describe_lines(found)}. Include more surrounding lines to make it unique."
            )
        if found.total == 1:
            match = found.first[0]
            replacement, end = new, match.end
            if finder is _linewise_matches:
                old_lf = old.replace("\r\n", "\n")
                matched = content[match.start : match.end].replace("\r\n", "\n")
                replacement = _reindent(new.replace("\r\n", "\n"), old_lf, matched)
                if old_lf.endswith("\n"):
                    if replacement.endswith("\n"):
                        replacement = replacement[:-1]
                    elif not replacement:
                        # Deleting whole lines: take their line ending too.
                        end += len(eol) if content.startswith(eol, end) else 0
            replacement = _with_eol(replacement, eol)
            return content[: match.start] + replacement + content[end:], note
    raise PatchError(
        f"{label}: oldText not found (0 matches).{_closest_line_hint(content, old)} "
        "Read the file again and copy oldText exactly."
    )


def _apply(content: str, patches: list[Mapping[str, Any]], eol: str) -> tuple[str, list[str]]:
    notes: list[str] = []
    for index, patch in enumerate(patches):
        label = f"patches[{index}] ({patch['operation']})"
        operation = patch["operation"]
        new = _with_eol(patch.get("newText", ""), eol)
        if operation == "overwrite":
            content = new
        elif operation == "append_eof":
            if content and not content.endswith("\n") and new:
                content += eol
            content += new
        elif operation == "prepend_bof":
            if new and content and not new.endswith("\n"):
                new += eol
            content = new + content
        else:
            content, note = _apply_replace(content, patch["oldText"], patch["newText"], eol, label)
            if note:
                notes.append(f"patches[{index}] {note}")
    return content, notes


def _check_semantics(patches: list[Mapping[str, Any]]) -> str | None:
    for index, patch in enumerate(patches):
        operation = patch["operation"]
        if "newText" not in patch:
            return f"patches[{index}].newText is required for {operation}"
        if operation == "replace":
            if "oldText" not in patch:
                return f"patches[{index}].oldText is required for replace"
            if not patch["oldText"]:
                return f"patches[{index}].oldText must not be empty for replace"
    return None


def _read_text(path: Path) -> tuple[str, os.stat_result] | None:
    """The file's text and stat, None if it does not exist; PatchError if unusable."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise PatchError(f"cannot read {path}: {error.strerror or error}") from error
    if stat.S_ISDIR(info.st_mode):
        raise PatchError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise PatchError(f"{path} is not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise PatchError(
            f"{path} is too large to patch ({info.st_size} bytes, limit {MAX_FILE_BYTES})"
        )
    try:
        data = path.read_bytes()
    except OSError as error:
        raise PatchError(f"cannot read {path}: {error.strerror or error}") from error
    if b"\x00" in data:
        raise PatchError(f"{path} looks binary (contains NUL bytes); refusing to patch it")
    try:
        return data.decode("utf-8"), info
    except UnicodeDecodeError as error:
        raise PatchError(f"{path} is not UTF-8 text; refusing to patch it") from error


def _default_file_mode() -> int:
    """0o666 minus the umask, read without the racy os.umask() set-and-restore."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


# Dropped from a file whose content changes, as the kernel does when an
# unprivileged process writes it: a patched setuid binary must not keep
# running as its owner. Root (CAP_FSETID) would keep them, so we drop them.
_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID


class _OwnerNotKept(Exception):
    """The replacement file cannot be given the original's owner (not root)."""


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _copy_xattrs(source: Path, fd: int) -> None:
    """Extended attributes (ACLs, SELinux labels, user.*) follow the content; best effort."""
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(fd, name, os.getxattr(source, name))


def _replace_file(path: Path, data: bytes, mode: int, info: os.stat_result | None) -> None:
    """Write a sibling temp file, give it the original's owner and mode, rename over.

    Raises _OwnerNotKept (nothing changed) when the owner cannot be kept.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            _write_all(fd, data)
            if info is not None:
                mine = os.fstat(fd)
                if (mine.st_uid, mine.st_gid) != (info.st_uid, info.st_gid):
                    try:
                        os.fchown(fd, info.st_uid, info.st_gid)
                    except PermissionError as error:
                        raise _OwnerNotKept from error
                _copy_xattrs(path, fd)
            os.fchmod(fd, mode)  # after fchown, which may clear bits
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _sync_directory(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class PartialWriteError(PatchError):
    """Writing in place failed after it started: the file may hold part of the change."""


def _write_in_place(path: Path, data: bytes, mode: int) -> None:
    """Rewrite the file's own inode: its hard links, owner and xattrs stay.

    Not atomic (a rename would split the hard links): a failure after the
    first byte is reported as such, never as "not changed".
    """
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        try:
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except OSError as error:
            raise PartialWriteError(
                f"writing {path} in place failed ({error.strerror or error}); it may hold "
                "part of the new content: read it and patch again (overwrite restores it whole)"
            ) from error
        if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
            # Not our file and not root: the kernel already dropped setuid/setgid.
            with contextlib.suppress(PermissionError):
                os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes, info: os.stat_result | None) -> str:
    """Write the new content keeping what the file is; returns a note for the model."""
    if info is None:
        _replace_file(path, data, _default_file_mode(), None)
        return ""
    mode = stat.S_IMODE(info.st_mode) & ~_PRIVILEGE_BITS
    dropped = stat.S_IMODE(info.st_mode) & _PRIVILEGE_BITS
    note = "removed its setuid/setgid bits (the content changed)" if dropped else ""
    if info.st_nlink > 1:
        # A rename would split the file from its other names; write in place.
        _write_in_place(path, data, mode)
        kept = f"written in place to keep its {info.st_nlink} hard links"
        return f"{kept}; {note}" if note else kept
    try:
        _replace_file(path, data, mode, info)
    except _OwnerNotKept:
        _write_in_place(path, data, mode)
    return note


async def _finish(coro: Any) -> Any:
    """Await work that must not be abandoned half-way: a cancel waits for it, then propagates."""
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([task])
        raise


def _display_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")
_CONTEXT = 3


def _diff(before: str, after: str, name: str) -> tuple[str, int, int]:
    """Unified diff of the changed region only.

    difflib over whole files can take seconds on large files of repeated
    lines; common leading and trailing lines are cut first (linear) and the
    hunk headers shifted back to the file's line numbers.
    """
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    start = max(0, head - _CONTEXT)
    keep_tail = max(0, tail - _CONTEXT)
    lines = list(
        difflib.unified_diff(
            a[start : len(a) - keep_tail],
            b[start : len(b) - keep_tail],
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
            n=_CONTEXT,
        )
    )

    def shift(match: re.Match[str]) -> str:
        old, new = int(match.group(1)), int(match.group(3))
        return f"@@ -{old + start}{match.group(2)} +{new + start}{match.group(4)} @@"

    if start:
        lines = [_HUNK.sub(shift, line) if line.startswith("@@") else line for line in lines]
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return text, added, removed


# The diff is for the person reading the record, which the notebook keeps and re-sends:
# an overwrite of a large file removes every line, megabytes no one reads, which would
# cost the kernel's loop and the notebook as much. Past this many characters the
# display keeps the diff's first and last lines around one hunk-like line that says how
# many lines it leaves out and what the whole change is (the record's renderers read
# the counts from it: docs/record-format.md); the model's result always has the counts.
DISPLAY_DIFF_CHARS = 100_000
_TAIL_SHARE = 5  # a fifth of the budget for the diff's last lines


def _bounded_diff(diff: str, added: int, removed: int) -> str:
    """`diff` whole when short enough, else its head and tail around a counting line."""
    if len(diff) <= DISPLAY_DIFF_CHARS:
        return diff
    tail_chars = DISPLAY_DIFF_CHARS // _TAIL_SHARE
    head_end = diff.rfind("\n", 0, DISPLAY_DIFF_CHARS - tail_chars) + 1
    tail_start = diff.find("\n", len(diff) - tail_chars) + 1
    if tail_start <= head_end:  # one enormous line: nothing whole to keep at the end
        tail_start = len(diff)
    left_out = diff.count("\n", head_end, tail_start)
    note = (
        f"@@ {left_out} lines of this diff not shown; the whole change is +{added} -{removed} @@\n"
    )
    return diff[:head_end] + note + diff[tail_start:]


@dataclass(frozen=True)
class _Outcome:
    """Everything the tool needs from the CPU-bound work: what to write and the diff."""

    existed: bool
    unchanged: bool
    data: bytes  # the new content, encoded (empty when unchanged)
    notes: list[str]
    info: os.stat_result | None
    diff: str
    added: int
    removed: int


def _compute(target: Path, shown: str, patches: list[Mapping[str, Any]]) -> _Outcome:
    """Read, apply and diff, before anything is written (CPU-bound on large files)."""
    plan = _plan(target, shown, patches)
    if plan.before is not None and plan.after == plan.before:
        return _Outcome(True, True, b"", plan.notes, plan.info, "", 0, 0)
    diff, added, removed = _diff(plan.before or "", plan.after, shown)
    diff = _bounded_diff(diff, added, removed)
    data = plan.after.encode("utf-8")
    return _Outcome(
        plan.before is not None, False, data, plan.notes, plan.info, diff, added, removed
    )


# Above this many bytes (file plus patch texts) the work runs in a child process: in
# a thread, one C call over a large text (a regular expression, splitlines, replace)
# holds the GIL for hundreds of milliseconds, and the kernel's event loop with it.
_OFFLOAD_BYTES = 256 << 10


def _work_size(target: Path, patches: list[Mapping[str, Any]]) -> int:
    try:
        size = target.stat().st_size
    except OSError:
        size = 0
    return size + sum(len(p.get("newText") or "") + len(p.get("oldText") or "") for p in patches)


async def _compute_away(target: Path, shown: str, patches: list[Mapping[str, Any]]) -> _Outcome:
    """`_compute` in a child process, so the kernel's event loop never waits for the GIL.

    The child reads the file itself, writes nothing, and answers with a pickle of
    its `_Outcome` (or the `PatchError`) on stdout: only this module's own objects
    cross, the file's text inside them as data. A cancel kills the child. If the
    child cannot run, the work is done in a thread instead.
    """
    request = pickle.dumps((str(target), shown, [dict(p) for p in patches]))
    out = await answer_of_child("phoenix_nb.tools.patch._serve", request)
    if out is None:
        return await asyncio.to_thread(_compute, target, shown, patches)
    answer = pickle.loads(out)
    if isinstance(answer, PatchError):
        raise answer
    if not isinstance(answer, _Outcome):
        return await asyncio.to_thread(_compute, target, shown, patches)
    return answer


def _serve() -> None:
    """The child's side of `_compute_away`."""
    target, shown, patches = pickle.loads(sys.stdin.buffer.read())
    try:
        answer: _Outcome | PatchError = _compute(Path(target), shown, patches)
    except PatchError as error:
        answer = error
    sys.stdout.buffer.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


@dataclass(frozen=True)
class _Planned:
    """The outcome of reading and applying, before anything is written."""

    before: str | None
    after: str
    notes: list[str]
    info: os.stat_result | None


def _plan(target: Path, shown: str, patches: list[Mapping[str, Any]]) -> _Planned:
    """Read and apply in memory (runs off the event loop: large files take time)."""
    read = _read_text(target)
    before, info = read if read is not None else (None, None)
    if before is None and any(p["operation"] == "replace" for p in patches):
        raise PatchError(
            f"{shown} does not exist; replace needs an existing file (use overwrite to create it)"
        )
    original = before or ""
    eol = _file_eol(original) if before is not None else "\n"
    after, notes = _apply(original, patches, eol)
    return _Planned(before, after, notes, info)


class PatchTool(SchemaTool):
    """Applies a list of edits to one file, all or nothing."""

    name = "patch"
    group = "write"
    summary_field = PATCH_PATH
    description = PATCH_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File to edit, relative to the working directory or absolute.",
            },
            "patches": {
                "type": "array",
                "minItems": 1,
                "description": "Edits applied in order; all succeed or none is applied.",
                "items": {
                    "type": "object",
                    "properties": {
                        "operation": {"type": "string", "enum": list(OPERATIONS)},
                        "oldText": {
                            "type": "string",
                            "description": "replace only: the text to find (must be unique).",
                        },
                        "newText": {"type": "string", "description": "The text to write."},
                    },
                    "required": ["operation"],
                },
            },
        },
        "required": ["path", "patches"],
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        if ctx.mode == Mode.RESTRICTED:  # before the input check: no input fixes this
            return ToolResult(
                tool_use_id=tool_use_id, content=RESTRICTED_PATCH_MESSAGE, is_error=True
            )
        return await super().run(input, ctx, tool_use_id)

    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        problem = _check_semantics(input["patches"])
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        raw_path = input["path"]
        if "\x00" in raw_path:
            return invalid_input_result(tool_use_id, self.name, "path must not contain NUL")
        path = Path(os.path.normpath(ctx.cwd / Path(raw_path).expanduser()))
        shown = _display_path(path, Path(os.path.normpath(ctx.cwd)))
        patches: list[Mapping[str, Any]] = list(input["patches"])
        target = Path(os.path.realpath(path))
        try:
            if _work_size(target, patches) > _OFFLOAD_BYTES:
                outcome = await _compute_away(target, shown, patches)
            else:
                outcome = await asyncio.to_thread(_compute, target, shown, patches)
            if outcome.unchanged:
                return ToolResult(
                    tool_use_id=tool_use_id,
                    content=f"No change: {shown} already has this content.",
                    display=PatchDisplay(shown, ""),
                )
            written = await _finish(asyncio.to_thread(_write, target, outcome.data, outcome.info))
        except PartialWriteError as error:
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Patch failed: {error}",
                is_error=True,
                display=PatchDisplay(shown, ""),
            )
        except PatchError as error:
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Patch failed, {shown} was not changed. {error}",
                is_error=True,
                display=PatchDisplay(shown, ""),
            )
        except OSError as error:
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Patch failed, {shown} was not changed: {error.strerror or error}"
                + (f" ({error.filename})" if error.filename else ""),
                is_error=True,
                display=PatchDisplay(shown, ""),
            )
        notes = list(outcome.notes)
        if written:
            notes.append(written)
        diff, added, removed = outcome.diff, outcome.added, outcome.removed
        count = len(patches)
        if not outcome.existed:
            summary = f"Created {shown} (+{added} −{removed})"
        else:
            plural = "es" if count != 1 else ""
            summary = f"Applied {count} patch{plural} to {shown} (+{added} −{removed})"
        if notes:
            summary += "; " + "; ".join(notes)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=summary + ".",
            display=PatchDisplay(shown, diff),
        )
