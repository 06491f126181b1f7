"""The patch tool: precise, all-or-nothing edits of one text file.

Why it is shaped this way:

* All patches of one call are computed in memory first and the file is written
  once, atomically (temp file in the same directory + `os.replace`), keeping
  its mode bits. A failing third patch therefore leaves the file untouched, and
  a crash mid-write never leaves half a file.
* `replace` needs exactly one match. Models copy text imperfectly, so after an
  exact search we retry tolerantly — CRLF vs LF and Unicode look-alikes (curly
  quotes, en/em dashes, exotic spaces, ellipsis; the system these specs came
  from failed on exactly these), then line by line ignoring indentation — and
  map the match back to the original text, so every character outside the
  replaced span is preserved byte for byte. Ambiguity is never resolved by
  guessing: the model is told the count and line numbers.
* A CRLF file stays CRLF: inserted text takes the file's line ending.
* Binary files (NUL bytes or not UTF-8) are refused rather than re-encoded.
* In Restricted mode nothing is touched and the exact message of REQ-PATCH-009
  is returned; the kernel sandbox would refuse the write anyway, but the model
  deserves a clear pointer to request_mode_upgrade instead of EACCES.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.tools.base import RESTRICTED_PATCH_MESSAGE, ToolContext
from phoenix_nb.tools.schema import invalid_input_result, validate

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
    "Line endings and permissions of existing files are preserved; binary files "
    "are refused. The result reports the change; the user sees a diff. "
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


class PatchError(Exception):
    """A patch that cannot be applied; the message is for the model."""


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    line: int  # 1-based line of the start, for messages


@dataclass(frozen=True)
class _Normalized:
    """Text with CRLF and look-alikes folded, and each char's span in the original."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]


def _normalize(text: str) -> _Normalized:
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    length = len(text)
    while i < length:
        ch = text[i]
        if ch == "\r" and i + 1 < length and text[i + 1] == "\n":
            chars.append("\n")
            starts.append(i)
            ends.append(i + 2)
            i += 2
            continue
        replacement = _LOOKALIKES.get(ch, ch)
        for piece in replacement:
            chars.append(piece)
            starts.append(i)
            ends.append(i + 1)
        i += 1
    return _Normalized("".join(chars), tuple(starts), tuple(ends))


def _fold(text: str) -> str:
    return _normalize(text).text


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _find_all(haystack: str, needle: str) -> list[int]:
    positions: list[int] = []
    start = haystack.find(needle)
    while start != -1:
        positions.append(start)
        start = haystack.find(needle, start + 1)
    return positions


def _exact_matches(text: str, old: str) -> list[_Match]:
    return [_Match(p, p + len(old), _line_of(text, p)) for p in _find_all(text, old)]


def _folded_matches(text: str, old: str) -> list[_Match]:
    folded = _normalize(text)
    needle = _fold(old)
    if not needle:
        return []
    matches = []
    for p in _find_all(folded.text, needle):
        start = folded.starts[p]
        end = folded.ends[p + len(needle) - 1]
        matches.append(_Match(start, end, _line_of(text, start)))
    return matches


def _split_lines(text: str) -> list[tuple[int, int]]:
    """(start, content_end) of each line, content_end excluding the \\r\\n or \\n."""
    spans = []
    start = 0
    for index, ch in enumerate(text):
        if ch == "\n":
            end = index - 1 if index > start and text[index - 1] == "\r" else index
            spans.append((start, end))
            start = index + 1
    spans.append((start, len(text)))
    return spans


def _trim_blank_edges(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _linewise_matches(text: str, old: str) -> list[_Match]:
    """Whole-line matches comparing lines with surrounding whitespace ignored."""
    wanted = [_fold(line).strip() for line in _trim_blank_edges(_fold(old).split("\n"))]
    if not wanted or not any(wanted):
        return []
    spans = _split_lines(text)
    have = [_fold(text[s:e]).strip() for s, e in spans]
    matches = []
    for i in range(len(have) - len(wanted) + 1):
        if have[i : i + len(wanted)] == wanted:
            matches.append(_Match(spans[i][0], spans[i + len(wanted) - 1][1], i + 1))
    return matches


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


def _describe_lines(matches: list[_Match]) -> str:
    lines = [str(m.line) for m in matches[:10]]
    more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
    return ", ".join(lines) + more


def _file_eol(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def _with_eol(text: str, eol: str) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", eol) if eol != "\n" else text


def _apply_replace(content: str, old: str, new: str, eol: str, label: str) -> tuple[str, str]:
    """Return the new content and a note on how the match was found ("" if exact)."""
    for finder, note in (
        (_exact_matches, ""),
        (_folded_matches, "matched ignoring line endings and typographic characters"),
        (_linewise_matches, "matched ignoring indentation"),
    ):
        matches = finder(content, old)
        if len(matches) > 1:
            raise PatchError(
                f"{label}: oldText is ambiguous, {len(matches)} matches at lines "
                f"{_describe_lines(matches)}. Include more surrounding lines to make it unique."
            )
        if len(matches) == 1:
            match = matches[0]
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


def _read_text(path: Path) -> str | None:
    """The file's text, None if it does not exist; PatchError if unusable."""
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
        return data.decode("utf-8")
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


def _write_atomically(path: Path, content: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def _display_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _diff(before: str, after: str, name: str) -> tuple[str, int, int]:
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return text, added, removed


class PatchTool:
    """Applies a list of edits to one file, all or nothing."""

    name = "patch"
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
        if ctx.mode == Mode.RESTRICTED:
            return ToolResult(
                tool_use_id=tool_use_id, content=RESTRICTED_PATCH_MESSAGE, is_error=True
            )
        problem = validate(input, self.input_schema) or _check_semantics(input["patches"])
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        raw_path = input["path"]
        if "\x00" in raw_path:
            return invalid_input_result(tool_use_id, self.name, "path must not contain NUL")
        path = Path(os.path.normpath(ctx.cwd / Path(raw_path).expanduser()))
        shown = _display_path(path, Path(os.path.normpath(ctx.cwd)))
        patches: list[Mapping[str, Any]] = list(input["patches"])
        try:
            target = Path(os.path.realpath(path))
            before = _read_text(target)
            if before is None and any(p["operation"] == "replace" for p in patches):
                raise PatchError(
                    f"{shown} does not exist; replace needs an existing file "
                    "(use overwrite to create it)"
                )
            original = before or ""
            eol = _file_eol(original) if before is not None else "\n"
            after, notes = _apply(original, patches, eol)
            if before is not None and after == before:
                return ToolResult(
                    tool_use_id=tool_use_id,
                    content=f"No change: {shown} already has this content.",
                    display={"path": shown, "diff": ""},
                )
            mode = (
                stat.S_IMODE(target.stat().st_mode) if before is not None else _default_file_mode()
            )
            _write_atomically(target, after, mode)
        except PatchError as error:
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Patch failed, {shown} was not changed. {error}",
                is_error=True,
                display={"path": shown, "diff": ""},
            )
        except OSError as error:
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Patch failed, {shown} was not changed: {error.strerror or error}"
                + (f" ({error.filename})" if error.filename else ""),
                is_error=True,
                display={"path": shown, "diff": ""},
            )
        diff, added, removed = _diff(original, after, shown)
        count = len(patches)
        if before is None:
            summary = f"Created {shown} (+{added} −{removed})"
        else:
            plural = "es" if count != 1 else ""
            summary = f"Applied {count} patch{plural} to {shown} (+{added} −{removed})"
        if notes:
            summary += "; " + "; ".join(notes)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=summary + ".",
            display={"path": shown, "diff": diff},
        )
