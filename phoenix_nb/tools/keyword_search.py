"""keyword_search: find where a topic lives in the code, then ask a small model why.

Search is ripgrep from the `ripgrep` wheel, never a hand-written walker: it is
fast, honours .gitignore, and skips binaries. All terms are searched in one rg
pass (its cost is the baseline the tool is measured against); each term's
files and hits are counted from the matching lines, so a term that hits most
of the tree ("self", "import") is dropped with a note instead of burying the
useful hits, and the survivors' hits are shown with context lines, the total
capped, because the result goes into the model's context. When that one pass
prints too much (terms that match nearly every line), each term is counted by
its own rg, which stops a broad term early, and the survivors searched again.
rg's output is taken from its pipe in a few large reads (one per few
milliseconds and one after its exit report), not a read per write: rg writes
each file's lines separately, and an event-loop turn per write cost more than
the search while taking a core from rg. Reading while rg runs, rather than once
after it, is what bounds memory: a pass is cut (rg killed) as soon as what it
printed passes ONE_PASS_BUDGET, at most a pipeful later.
Then, when the conversation has a helper model, it is asked which files matter
and why — a cheap call that saves the main model from reading every hit; if that
call is absent or fails, the raw hits are returned and the model is told so.

It only reads, so it works in Restricted mode. Every rg runs exactly as a bash
command does: through the sandbox launcher (``sandbox.start_process``), with the
same allowlisted environment, the conversation's cgroup budget and, in
Restricted mode, the same sandbox — namespaces, Landlock, seccomp, and the
mode-000 placeholders over the credential paths (``sandbox.hidden_paths``). So
ONE mechanism hides those paths from every tool: whatever route rg is given to
a hidden file (a symlink, ``--follow``, a search root inside it, ``..``, an
ignore file that re-includes it) ends at the kernel's own "Permission denied".
Where the sandbox is unavailable, Restricted mode refuses the search with bash's
words. rg is outside the kernel's process group (a kernel interrupt does not
hit it), and cancelling the tool kills its whole tree through its supervisor and
returns only once the supervisor reports it gone (``Process.stop``), even when the
cancel lands while an rg is still starting (``start_process`` sees to that).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sysconfig
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, compress, repeat
from operator import contains, itemgetter
from pathlib import Path
from typing import Any

from phoenix_nb import sandbox
from phoenix_nb.core.displays import SearchDisplay, SearchTerm
from phoenix_nb.core.tool_fields import SEARCH_QUERY
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.errors import PhoenixError
from phoenix_nb.tools.base import SchemaTool, ToolContext
from phoenix_nb.tools.schema import invalid_input_result

MAX_TERMS = 12
MAX_TOTAL_HITS = 200  # matching lines returned across all terms
MAX_HITS_PER_FILE = 10
MAX_FILES_PER_TERM = 400  # a term matching more files than this is too broad
BROAD_FRACTION = 0.5  # ... or more than this share of a tree of >= BROAD_MIN_TREE files
BROAD_MIN_TREE = 20
MAX_LINE_CHARS = 240
MAX_RG_LINE_BYTES = 1 << 20  # a longer line of rg output is dropped and counted, not shown
MAX_SUMMARY_CHARS = 24_000
HELPER_TIMEOUT = 90.0
DEFAULT_CONTEXT_LINES = 1

KEYWORD_SEARCH_DESCRIPTION = (
    "Find the files and lines relevant to a question about the code base. Give "
    "`query` (what you are looking for, in words) and `search_terms` (literal "
    "keywords: identifiers, error messages, config keys; matched "
    "case-insensitively, not as regular expressions). Searches the git "
    "repository containing the working directory (or the working directory), "
    "honouring .gitignore. Terms that match too many files are dropped and "
    "reported; prefer specific terms. A helper model then ranks the files that "
    "matter and says why; the raw hits (file, line number, text with context) "
    "follow. Read-only: available in Restricted mode."
)

HELPER_SYSTEM = (
    "You help a coding agent navigate a code base. You receive the agent's "
    "question and keyword search hits (file paths, line numbers, matching lines "
    "with context). Answer with the files that matter most for the question, "
    "most relevant first, each with the key line numbers and one sentence on why "
    "it matters. Only use files that appear in the hits. If none are relevant, "
    "say so. Be brief: at most 10 files."
)


def find_rg() -> str | None:
    """The rg binary of the `ripgrep` wheel installed next to this Python, else PATH's."""
    scripts = sysconfig.get_path("scripts")
    return shutil.which("rg", path=scripts) or shutil.which("rg")


def search_root(cwd: Path) -> Path:
    """The git work tree containing cwd (a `.git` dir or file), else cwd itself."""
    for candidate in (cwd, *cwd.parents):
        if (candidate / ".git").exists():
            return candidate
    return cwd


@dataclass
class TermStats:
    term: str
    files: int = 0
    hits: int = 0
    dropped: str = ""  # why the term was not used, "" if it was


@dataclass(slots=True)
class Line:
    number: int
    text: str
    is_match: bool


@dataclass(slots=True)
class FileHits:
    path: str
    lines: dict[int, Line] = field(default_factory=dict)
    matches: int = 0
    terms: set[str] = field(default_factory=set)


class SearchError(PhoenixError):
    """rg could not run or failed; the message is for the model."""


RG_CPU_SECONDS = 600  # CPU time of one rg (a bound if a cancel were ever lost)
_RG_OK = (0, 1, 2)  # matches, none, some files unreadable (hidden ones among them)


def rg_spec(ctx: ToolContext, root: Path, binary: str) -> sandbox.RunSpec:
    """How this search's rg processes start: as bash starts a command for `ctx`.

    The allowlisted environment (less RIPGREP_*: no config file steers rg), the
    conversation's cgroup budget, the Restricted sandbox in Restricted mode with the
    credential paths bash's commands cannot read (`hidden_paths` of the conversation's
    policy, which covers `root`, an ancestor of the working directory). stderr is discarded so
    rg's "Permission denied" notes never mix with its results.
    """
    restricted = ctx.mode == Mode.RESTRICTED
    env = ctx.commands.environment().env
    return ctx.commands.spec(
        (binary, "--no-config"),
        root,
        {k: v for k, v in env.items() if not k.startswith("RIPGREP_")},
        restricted=restricted,
        cpu_seconds=RG_CPU_SECONDS,
        discard_stderr=True,
        hide_from=ctx.cwd,
    )


_PIPE_BYTES = 1 << 20  # what the launcher's output pipe holds (start_process sets it)
_PACE = 0.005  # seconds between reads of rg's output while it runs


def _drain(fd: int) -> tuple[bytes, bool]:
    """What the pipe holds now, at most a pipeful, and whether its writers are gone.

    One read, not reads until the pipe is empty: rg writing as fast as this reads
    keeps it from ever being empty, and such a loop took a whole search's output in
    one go (700 MB under load, past ONE_PASS_BUDGET and with the event loop held)."""
    try:
        part = os.read(fd, _PIPE_BYTES)
    except BlockingIOError:
        return b"", False
    return part, not part


async def _paced_output(process: sandbox.Process) -> AsyncGenerator[bytes, None]:
    """rg's output in a few large reads: what the pipe holds every _PACE seconds, and
    the rest when the supervisor reports rg gone.

    Not a read per readiness: rg's threads write each file's lines in a write or a
    few, so waking per write meant hundreds of event-loop turns per search, each one
    taking a core from rg. The pipe (1 MiB) holds a typical search's whole output, so rg
    rarely waits for a read; when a read finds the pipe at least half full, the next
    comes at once. After the report no writer is left (the tree is gone), so what
    the pipe holds then is the end of the output, read until it is empty."""
    ended = asyncio.ensure_future(process.wait())
    try:
        while True:
            finished = ended.done()
            data, eof = _drain(process.output_fd)
            if data:
                yield data
            if eof or (finished and not data):
                return
            if finished or len(data) >= _PIPE_BYTES // 2:
                await asyncio.sleep(0)
            else:
                await asyncio.wait((ended,), timeout=_PACE)
    finally:
        ended.cancel()  # only this wait: the report is still read for `wait`/`stop`


class RgProcess:
    """One running rg: its stdout as lines, and how it ended.

    Lines longer than MAX_RG_LINE_BYTES (a minified bundle, a data dump) are dropped
    whole and counted in `overlong`, instead of failing the search."""

    def __init__(self, process: sandbox.Process, output: AsyncIterator[bytes]) -> None:
        self.process = process
        self._output = output
        self._last = b""
        self.overlong = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """Each line, a newline after it."""
        async for block in self.blocks():
            for line in block.split(b"\n"):
                yield line + b"\n"

    async def blocks(self) -> AsyncIterator[bytes]:
        """The lines, a read's worth at a time: whole lines joined by newlines, without
        the last one's (no per-line work per read). Overlong lines are taken out here."""
        pending = b""
        skipping = False  # inside a line already known to be too long
        async for chunk in self._output:
            data = pending + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
            else:
                block: bytes | None = data[:cut]
                pending = data[cut + 1 :]
                if skipping:  # the first line ends the overlong one
                    skipping = False
                    self.overlong += 1
                    _, newline, rest = data[:cut].partition(b"\n")
                    block = rest if newline else None
                if block is not None and len(block) >= MAX_RG_LINE_BYTES:
                    parts = block.split(b"\n")  # only now can a line in it be too long
                    kept = [line for line in parts if len(line) < MAX_RG_LINE_BYTES]
                    self.overlong += len(parts) - len(kept)
                    block = b"\n".join(kept) if kept else None
                if block is not None:
                    self._last = block[block.rfind(b"\n") + 1 :]
                    yield block
            if len(pending) >= MAX_RG_LINE_BYTES:
                pending, skipping = b"", True
        if skipping:
            self.overlong += 1
        elif pending:
            self._last = pending
            yield pending

    async def batches(self) -> AsyncIterator[list[bytes]]:
        """The same lines as iterating, without their newline, a read's worth at a time."""
        async for block in self.blocks():
            yield block.split(b"\n")

    async def wait(self) -> None:
        """Wait for rg to end; SearchError if it could not run or was killed."""
        result = await self.process.wait()
        code, sig = result.exit, result.signal
        if sig or code not in _RG_OK:
            said = self._last.decode("utf-8", "replace").strip()
            said = said.removeprefix("phoenix sandbox: cannot start command: ")
            how = f"signal {sig}" if sig else f"exit code {code}"
            raise SearchError(f"rg could not search ({how}){': ' + said if said else ''}")


@contextlib.asynccontextmanager
async def _rg(args: list[str], spec: sandbox.RunSpec) -> AsyncIterator[RgProcess]:
    """Run rg with `args` as `spec` says; always end it, killing its tree if we stop
    reading early or are cancelled, and return only once its supervisor reported."""
    try:
        process = await sandbox.start_process(replace(spec, argv=(*spec.argv, *args)))
    except (sandbox.SandboxError, OSError) as error:
        raise SearchError(f"could not start rg: {error}") from error
    output = _paced_output(process)
    try:
        yield RgProcess(process, output)
    finally:
        try:
            if process.result is None:  # stopped early, failed or cancelled: the tree goes first
                await process.stop()
        finally:  # also when a second cancel ends that wait (stop re-raises it after)
            try:
                await output.aclose()  # its wait for the report, if it was reading
            finally:
                os.close(process.output_fd)


def _strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


async def _count_files(spec: sandbox.RunSpec) -> int:
    count = 0
    async with _rg(["--files", "--no-require-git", "."], spec) as process:
        async for _ in process:
            count += 1
        await process.wait()
    return count


async def _count_term(term: str, spec: sandbox.RunSpec, limit: int) -> TermStats:
    """Files and hits for one term; stops reading (and kills rg) past `limit` files."""
    stats = TermStats(term)
    args = ["--count-matches", "-i", "-F", "--no-require-git", "-e", term, "."]
    async with _rg(args, spec) as process:
        async for raw in process:
            _, _, count = raw.rstrip(b"\n").rpartition(b":")
            stats.files += 1
            with contextlib.suppress(ValueError):
                stats.hits += int(count)
            if stats.files > limit:
                stats.dropped = f"too broad (matches more than {limit} files)"
                return stats
        await process.wait()
    return stats


def _text_of(data: Mapping[str, Any]) -> str:
    if "text" in data:
        return str(data["text"])
    return "<non-UTF-8 line>"


async def _collect_hits(
    terms: list[str], spec: sandbox.RunSpec, context_lines: int
) -> tuple[dict[str, FileHits], int, bool, int]:
    """Hits of the kept terms with context, in rg's order; (files, shown, truncated,
    lines too long to show)."""
    args = ["--json", "-i", "-F", "--no-require-git", f"--max-count={MAX_HITS_PER_FILE}"]
    if context_lines:
        args.append(f"--context={context_lines}")
    for term in terms:
        args += ["-e", term]
    args.append(".")
    files: dict[str, FileHits] = {}
    shown = 0
    lowered = [(term, term.lower()) for term in terms]
    async with _rg(args, spec) as process:
        async for raw in process:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            kind = message.get("type")
            if kind not in ("match", "context"):
                continue
            data = message["data"]
            path = _strip_dot(_text_of(data["path"]))
            text = _text_of(data["lines"]).rstrip("\r\n")
            if len(text) > MAX_LINE_CHARS:
                text = text[: MAX_LINE_CHARS - 3] + "..."
            hits = files.setdefault(path, FileHits(path))
            number = int(data.get("line_number") or 0)
            is_match = kind == "match"
            if is_match:
                if shown >= MAX_TOTAL_HITS:
                    return files, shown, True, process.overlong
                shown += 1
                hits.matches += 1
                line_lower = _text_of(data["lines"]).lower()
                hits.terms.update(term for term, low in lowered if low in line_lower)
            existing = hits.lines.get(number)
            hits.lines[number] = Line(
                number, text, is_match or bool(existing and existing.is_match)
            )
        await process.wait()
    return files, shown, False, process.overlong


async def _count_each(terms: list[str], spec: sandbox.RunSpec) -> tuple[int, list[TermStats]]:
    """The tree's file count and each term's, one rg each (bounded: a term is dropped, and
    its rg killed, past MAX_FILES_PER_TERM files)."""
    # A TaskGroup, not gather: on cancel it waits until every rg is killed and reaped.
    async with asyncio.TaskGroup() as group:
        files_task = group.create_task(_count_files(spec))
        term_tasks = [group.create_task(_count_term(t, spec, MAX_FILES_PER_TERM)) for t in terms]
    return files_task.result(), [task.result() for task in term_tasks]


def _drop_broad(stats: list[TermStats], total_files: int) -> None:
    for s in stats:
        if not s.dropped and s.files > MAX_FILES_PER_TERM:
            s.dropped = f"too broad (matches more than {MAX_FILES_PER_TERM} files)"
        if (
            not s.dropped
            and total_files >= BROAD_MIN_TREE
            and s.files > BROAD_FRACTION * total_files
        ):
            s.dropped = f"too broad (matches {s.files} of {total_files} files)"


ONE_PASS_BUDGET = 8 << 20  # bytes of rg output read before falling back to a pass per term
_SEARCHED = re.compile(rb"^(\d+) files searched\s*$", re.M)
_STATS_BYTES = 4096  # rg's --stats, after its last printed line, are far shorter
# The patterns below run on a read's lines with a newline put before the first, so each
# line starts at a "\n": a literal start the regex engine finds with a fast scan, where
# "^" in multi-line mode is tried at every byte.
# One printed line: path NUL number, ":" for a match or "-" for context, the text.
_PRINTED = re.compile(rb"\n([^\0\n]*+)\0(\d++)([:-])([^\n]*+)")
# A matching line's path and text, as _PRINTED reads them.
_MATCHED = re.compile(rb"\n([^\0\n]*+)\0\d++:([^\n]*+)")
# The same, faster: the path is read up to the first NUL, whatever it holds (one class of
# byte is a tight loop in the engine; two are not). So it can run on past the end of a
# line without NUL into the next one; it finds what _MATCHED finds whenever no path it
# read holds a newline, and _MATCHED is used when one does.
_MATCHED_FAST = re.compile(rb"\n([^\0]*+)\0\d++:([^\n]*+)")
_FEW_NUL_LESS_LINES = 12  # ... and where lines without NUL are more, _MATCHED (linear)

# A file's run of printed lines: a line, then each next line with the same path (a
# backreference), past any lines without NUL between them (rg's notes, --stats).
# The groups' repeats are atomic groups, `(?>X*)`, which is what `X*+` means: CPython
# 3.11.2 (Debian 12's python3, which ordinary users' venvs are made from; 3.11.7 does
# not) matched the possessive repeats of groups wrongly, ending each run after its
# first line: keyword_search counted the hits and showed "No hits." (issue 34).
_RUN = re.compile(rb"\n([^\0\n]*+)\0[^\n]*+(?>(?:(?>(?:\n[^\0\n]*+(?=\n))*)\n\1\0[^\n]*+)*)")

_first, _second = itemgetter(0), itemgetter(1)

# One printed line as found: (rg's path, number, ":" or "-", text), all still bytes
PrintedLine = tuple[bytes, bytes, bytes, bytes]
# A file's printed lines in order, by rg's path (decoded only when shown)
Printed = Iterable[tuple[bytes, list[PrintedLine]]]


def _one_pass_args(terms: list[str], context_lines: int) -> list[str]:
    """rg's arguments for the one pass: each printed line is `path NUL number : text` for
    a match (`-` for context) and nothing else — no `--` between groups of lines, which
    the hits are rendered without and which would only be lines to skip."""
    args = [
        "--null",
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--stats",
        "-i",
        "-F",
        "--no-require-git",
        f"--context={context_lines}",
        "--no-context-separator",
    ]
    for term in terms:
        args += ["-e", term]
    args.append(".")
    return args


class OnePass:
    """What the one pass found, fed a read of rg's output at a time: each term's counts
    and the files it matched, the tree's size, how many lines were too long to show, and
    the output itself, kept as read until the hits are chosen.

    Only the matching lines are taken apart while rg runs (their paths and texts, by one
    regular expression per read; the counting is a few C calls per read and term, not
    Python work per line or file). The lines shown are found afterwards, in the output
    kept: rg prints each file's lines together and the files a kept term matched are
    known, so each file's lines are one run found by a search from where the last one
    ended, and only files up to the hits cap are looked at. Should a path hold a newline
    (which splits a printed line in two, so a file's lines may read as two files'), every
    printed line is taken apart to find them instead."""

    def __init__(self, terms: list[str]) -> None:
        self.total_files = 0
        self.overlong = 0
        self.stats = [TermStats(term) for term in terms]
        self.files_of: dict[str, set[bytes]] = {term: set() for term in terms}
        self._lowered = [(s, s.term.lower(), self.files_of[s.term]) for s in self.stats]
        self._blocks: list[bytes] = []
        self._paths: list[list[bytes]] = []  # each read's matching lines' paths
        # A path may have held a newline (see `_printed_exact`): a line without NUL before
        # a matching line, in one read or ending the read before, or many such lines (rg's
        # other lines without NUL, --stats and its notes on binary files, are few).
        self._split_paths = False
        self._open_line = False

    def feed(self, block: bytes) -> None:
        """Count one read's lines (whole lines, joined by newlines)."""
        data = b"\n" + block
        self._blocks.append(data)
        if self._open_line:  # a path's newline may be where the last read ended
            self._split_paths = True
        self._open_line = b"\0" not in data[data.rfind(b"\n") :]
        # At least this many lines hold no NUL (no printed text does: rg stops reading a
        # file at a NUL). After each the fast pattern reads on to the next NUL, then tries
        # again from the following line, so it is used on reads with few such lines only
        # (rg's --stats and its notes on binary files are such lines).
        nul_less = data.count(b"\n") - data.count(b"\0")
        matched = _MATCHED_FAST.findall(data) if nul_less <= _FEW_NUL_LESS_LINES else []
        paths = list(map(_first, matched))
        if nul_less > _FEW_NUL_LESS_LINES or b"\n" in b"".join(paths):
            self._split_paths = True
            matched = _MATCHED.findall(data)
            paths = list(map(_first, matched))
        if matched:
            self._paths.append(paths)
            _count(self._lowered, paths, list(map(_second, matched)))

    async def hits(
        self, kept: list[str], context_lines: int
    ) -> tuple[dict[str, FileHits], int, bool]:
        """The kept terms' hits, as `_hits_of` chooses them from the printed lines of the
        files a kept term matched (a dropped broad term's thousands of files are not
        looked at again)."""
        wanted = set().union(*(self.files_of[term] for term in kept))
        if self._split_paths:
            printed = await self._printed_exact(wanted)
        else:
            printed = self._printed_runs(wanted)
        return _hits_of(printed, kept, context_lines)

    def _printed_runs(self, wanted: set[bytes]) -> Printed:
        """The wanted files' lines, each file's one run of lines in the output, in rg's
        order (the order of their first matching lines), made only as they are asked for.
        A line without NUL (rg's --stats, after the last file, or its note that it stopped
        reading a binary file) does not end a run: it is no printed line."""
        output = b"".join(self._blocks)  # each kept read starts with its newline
        seen: set[bytes] = set()
        cursor = 0
        for path in filter(wanted.__contains__, chain.from_iterable(self._paths)):
            if path in seen:
                continue
            seen.add(path)
            head = b"\n" + path + b"\0"
            start = output.find(head, cursor)
            if start < 0:
                continue  # cannot be: its matching line is in the output, after the last run
            run = _RUN.match(output, start)
            cursor = run.end() if run else len(output)
            yield path, _PRINTED.findall(output, start, cursor)

    async def _printed_exact(self, wanted: set[bytes]) -> Printed:
        """The wanted files' lines, every printed line taken apart: a path with a newline
        reads as two lines (the second with the path's tail), and such a tail may
        be another file's path too. A read at a time, letting the event loop run between
        (the output can be ONE_PASS_BUDGET)."""
        printed: dict[bytes, list[PrintedLine]] = {}
        for data in self._blocks:
            for line in _PRINTED.findall(data):
                if line[0] in wanted:
                    printed.setdefault(line[0], []).append(line)
            await asyncio.sleep(0)
        return printed.items()


async def _one_pass(terms: list[str], spec: sandbox.RunSpec, context_lines: int) -> OnePass | None:
    """Every term at once, in one rg (its cost is one search of the tree, which the
    tool's own cost is measured against): each term's files and hits are counted from
    the matching lines, the tree's size from rg's own --stats. None when the output
    outgrows ONE_PASS_BUDGET (terms that match nearly everything): then the tool
    counts per term, which can stop a broad term's rg early.

    Plain output with NUL after each path (`--null`), not --json: parsing a JSON
    object per printed line cost more than rg's whole search. Each read is counted
    while rg still searches (`OnePass.feed`); numbers and text are converted only for
    the lines shown."""
    found = OnePass(terms)
    size = 0
    async with _rg(_one_pass_args(terms, context_lines), spec) as process:
        async for block in process.blocks():
            size += len(block) + 1
            if size > ONE_PASS_BUDGET:
                return None  # leaving the block kills rg
            found.feed(block)
            # rg's statistics, at the very end: only a read's tail can hold them (a
            # multi-line search of a whole read cost more than the counting)
            searched = _SEARCHED.search(block, max(0, len(block) - _STATS_BYTES))
            if searched:
                found.total_files = int(searched.group(1))
        await process.wait()
    found.overlong = process.overlong
    return found


def _count(
    lowered: list[tuple[TermStats, str, set[bytes]]],
    paths: Sequence[bytes],
    texts: Sequence[bytes],
) -> None:
    """Add matching lines (rg's paths and the lines' texts) to each term's hits and files."""
    # The lines as one lower-case text, NUL between them: no term contains NUL, so
    # no occurrence is made up across two lines and the hits are one count each.
    low = b"\0".join(texts).decode("utf-8", "replace").lower()
    low_lines = low.split("\0")
    if len(low_lines) != len(texts):  # a NUL in a line: take the lines one by one
        low_lines = [text.decode("utf-8", "replace").lower() for text in texts]
    for entry, term_low, files in lowered:
        hits = low.count(term_low)
        if hits:
            entry.hits += hits
            # the paths of the lines holding the term, C calls only: `term_low in line`
            files.update(compress(paths, map(contains, low_lines, repeat(term_low))))
            entry.files = len(files)


def _line_text(text: bytes) -> str:
    try:
        line = text.decode("utf-8")
    except UnicodeDecodeError:
        return "<non-UTF-8 line>"
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def _hits_of(
    printed: Printed, kept: list[str], context_lines: int
) -> tuple[dict[str, FileHits], int, bool]:
    """The kept terms' hits as the collecting pass would show them: up to
    MAX_HITS_PER_FILE matching lines per file with their context, at most
    MAX_TOTAL_HITS in all (then truncated); lines matching only dropped terms show
    as context."""
    files: dict[str, FileHits] = {}
    shown = 0
    lowered = [(term, term.lower()) for term in kept]
    span = range(-context_lines, context_lines + 1)
    for head, printed_lines in printed:
        hits: dict[int, set[str]] = {}
        for _path, number_text, sep, text in printed_lines:
            if sep == b":":
                if len(hits) >= MAX_HITS_PER_FILE:
                    break
                low = text.rstrip(b"\r").decode("utf-8", "replace").lower()
                found = {term for term, term_low in lowered if term_low in low}
                if found:
                    hits[int(number_text)] = found
        if not hits:
            continue  # most files of a broad dropped term: nothing more is converted
        near = {n + d for n in hits for d in span}
        path = _strip_dot(os.fsdecode(head))
        entry = files.get(path)
        if entry is None:
            entry = files[path] = FileHits(path)
        for _path, number_text, sep, raw in printed_lines:
            number = int(number_text)
            if number not in near:
                continue
            text = raw.rstrip(b"\r")
            terms_here = hits.get(number)
            if terms_here is None and sep == b":":  # after the last hit, in its context
                low = text.decode("utf-8", "replace").lower()
                terms_here = {term for term, term_low in lowered if term_low in low} or None
            if terms_here is not None and shown >= MAX_TOTAL_HITS:
                if not entry.matches:
                    del files[path]  # only context so far: nothing of it is shown
                return files, shown, True
            entry.lines[number] = Line(number, _line_text(text), terms_here is not None)
            if terms_here is not None:
                entry.matches += 1
                entry.terms.update(terms_here)
                shown += 1
    return files, shown, False


def _render_hits(files: list[FileHits]) -> str:
    out: list[str] = []
    for hits in files:
        terms = ", ".join(sorted(hits.terms))
        out.append(f"{hits.path}  ({hits.matches} hit{'s' if hits.matches != 1 else ''}: {terms})")
        previous = None
        for number in sorted(hits.lines):
            line = hits.lines[number]
            if previous is not None and number > previous + 1:
                out.append("    --")
            out.append(f"  {number}{':' if line.is_match else '-'} {line.text}")
            previous = number
    return "\n".join(out)


def _render_terms(stats: list[TermStats]) -> str:
    parts = []
    for s in stats:
        if s.dropped:
            parts.append(f"  {s.term!r}: dropped, {s.dropped}")
        else:
            parts.append(f"  {s.term!r}: {s.hits} hits in {s.files} files")
    return "\n".join(parts)


class KeywordSearchTool(SchemaTool):
    """ripgrep over the repository, per-term breadth control, helper-model ranking."""

    writes = False  # the checkpoint recorder skips it
    group = "read"
    summary_field = SEARCH_QUERY

    name = "keyword_search"
    description = KEYWORD_SEARCH_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "What you are looking for, in words (used to rank the hits).",
            },
            "search_terms": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "minLength": 1},
                "description": f"Literal keywords, case-insensitive (at most {MAX_TERMS}).",
            },
            "context_lines": {
                "type": "integer",
                "minimum": 0,
                "maximum": 5,
                "description": f"Context lines around each hit (default {DEFAULT_CONTEXT_LINES}).",
            },
        },
        "required": ["query", "search_terms"],
    }

    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        problem = None
        if len(input["search_terms"]) > MAX_TERMS:
            problem = f"search_terms must have at most {MAX_TERMS} items"
        elif any("\x00" in t for t in input["search_terms"]):
            problem = "search_terms must not contain NUL characters"
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        query: str = input["query"]
        terms = list(dict.fromkeys(input["search_terms"]))  # de-duplicated, order kept
        context_lines: int = input.get("context_lines", DEFAULT_CONTEXT_LINES)
        root = search_root(Path(ctx.cwd))
        if not root.is_dir():
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"keyword_search failed: working directory {root} does not exist.",
                is_error=True,
            )
        if ctx.mode == Mode.RESTRICTED and not ctx.commands.info.available:
            # As bash: Restricted mode without its sandbox runs nothing.
            reason = ctx.commands.info.reason or sandbox.KERNEL_REQUIREMENT
            return ToolResult(
                tool_use_id=tool_use_id,
                content=f"Restricted mode is unavailable here: {reason}",
                is_error=True,
            )
        binary = find_rg()
        if binary is None:
            return ToolResult(
                tool_use_id=tool_use_id,
                content="keyword_search failed: ripgrep (rg) is not installed; "
                "install the `ripgrep` package",
                is_error=True,
            )
        spec = rg_spec(ctx, root, binary)
        try:
            summary, display = await self._search(query, terms, root, spec, context_lines)
        except (SearchError, OSError, ExceptionGroup) as error:
            parts = error.exceptions if isinstance(error, ExceptionGroup) else (error,)
            reason = "; ".join(str(part) or type(part).__name__ for part in parts)
            return ToolResult(
                tool_use_id=tool_use_id, content=f"keyword_search failed: {reason}", is_error=True
            )
        if not display.files:
            return ToolResult(tool_use_id=tool_use_id, content=summary, display=display)
        ranking, note = await self._rank(ctx, query, summary)
        display = replace(display, ranked_by_helper=ranking is not None)
        if ranking is not None:
            content = f"Relevant files (ranked by a helper model):\n{ranking.strip()}\n\n{summary}"
        else:
            content = f"{note}\n\n{summary}"
        return ToolResult(tool_use_id=tool_use_id, content=content, display=display)

    async def _search(
        self, query: str, terms: list[str], root: Path, spec: sandbox.RunSpec, context_lines: int
    ) -> tuple[str, SearchDisplay]:
        one = await _one_pass(terms, spec, context_lines)
        if one is not None:
            total_files, stats, overlong = one.total_files, one.stats, one.overlong
            _drop_broad(stats, total_files)
            kept = [s.term for s in stats if not s.dropped and s.files]
            files, shown, truncated = await one.hits(kept, context_lines)
        else:  # too much output for one pass: count each term first, then collect
            total_files, stats = await _count_each(terms, spec)
            _drop_broad(stats, total_files)
            kept = [s.term for s in stats if not s.dropped and s.files]
            files = {}
            shown, truncated, overlong = 0, False, 0
            if kept:
                files, shown, truncated, overlong = await _collect_hits(kept, spec, context_lines)
        ranked = sorted(files.values(), key=lambda h: (-len(h.terms), -h.matches))
        header = [
            f"Searched {total_files} files under {root} (case-insensitive, literal).",
            "Terms:",
            _render_terms(stats),
        ]
        if not kept:
            header.append("No usable term matched. Try more specific or different terms.")
        elif not files:
            header.append("No hits.")
        else:
            cut = f", capped at {MAX_TOTAL_HITS}" if truncated else ""
            header.append(f"Hits: {shown} matching lines in {len(files)} files{cut}.")
        if overlong:
            header.append(
                f"{overlong} line{'s' if overlong != 1 else ''} longer than "
                f"{MAX_RG_LINE_BYTES >> 20} MiB {'were' if overlong != 1 else 'was'} not shown."
            )
        summary = "\n".join(header)
        if files:
            summary += "\n\n" + _render_hits(ranked)
        if len(summary) > MAX_SUMMARY_CHARS:
            summary = summary[:MAX_SUMMARY_CHARS] + "\n[... hit list cut to fit ...]"
        display = SearchDisplay(
            root=str(root),
            query=query,
            terms=tuple(SearchTerm(s.term, s.files, s.hits, s.dropped) for s in stats),
            files=tuple(h.path for h in ranked),
            truncated=truncated,
        )
        return summary, display

    async def _rank(self, ctx: ToolContext, query: str, summary: str) -> tuple[str | None, str]:
        """The helper model's ranking, or None and a note saying why the raw hits follow."""
        if ctx.helper_llm is None:
            return None, "No helper model is configured; raw hits follow."
        prompt = f"Question: {query}\n\nKeyword search hits:\n{summary}"
        try:
            async with asyncio.timeout(HELPER_TIMEOUT):
                answer = await ctx.helper_llm(HELPER_SYSTEM, prompt)
        except TimeoutError:
            return None, "Ranking by the helper model timed out; raw hits follow."
        except Exception as error:  # any provider fault falls back to the raw hits
            reason = str(error) or type(error).__name__
            return None, f"Ranking by the helper model failed ({reason}); raw hits follow."
        if not isinstance(answer, str) or not answer.strip():
            return None, "The helper model gave no ranking; raw hits follow."
        return answer, ""
