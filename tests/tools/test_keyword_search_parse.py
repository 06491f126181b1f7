"""keyword_search's one pass reads rg's output without taking every line apart (only the
matching lines while rg runs; the shown files' lines afterwards). These tests hold it to
the straightforward reading it replaced, kept here as the reference: every printed line
split into its fields by one regular expression, each term counted line by line, the
printed lines grouped by file. Both read the same outputs — generated as rg prints them,
with the awkward cases drawn often, and real rg's over a tree of awkward files — and must
give the same summary and the same SearchDisplay, byte for byte.

`reference_one_pass` is also what `tests/benchmarks/bench_keyword_search.py --parse-only`
times the tool's parsing against.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from phoenix_nb import sandbox
from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.displays import SearchDisplay
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools import keyword_search as ks
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.keyword_search import FileHits, Line, TermStats

# One printed line, anchored at a line start: path NUL number, ":" or "-", the text.
_REFERENCE_LINE = re.compile(rb"^([^\0\n]*)\0(\d+)([:-])([^\n]*)$", re.M)
_Printed = tuple[bytes, bytes, bytes, bytes]


@dataclass
class ReferencePass:
    """The one pass's findings as the line-by-line reading gives them."""

    total_files: int
    stats: list[TermStats]
    lines: list[_Printed]
    overlong: int = 0

    @classmethod
    def of(cls, terms: list[str]) -> ReferencePass:
        return cls(0, [TermStats(term) for term in terms], [])

    def feed(self, block: bytes) -> None:
        self.lines += _REFERENCE_LINE.findall(block)

    def files_of(self, term: str) -> set[bytes]:
        low = term.lower()
        return {
            path
            for path, _n, sep, text in self.lines
            if sep == b":" and low in text.decode("utf-8", "replace").lower()
        }

    def count(self) -> None:
        for entry in self.stats:
            low = entry.term.lower()
            for _path, _n, sep, text in self.lines:
                if sep == b":":
                    entry.hits += text.decode("utf-8", "replace").lower().count(low)
            entry.files = len(self.files_of(entry.term))

    async def hits(
        self, kept: list[str], context_lines: int
    ) -> tuple[dict[str, FileHits], int, bool]:
        wanted = set().union(*(self.files_of(term) for term in kept))
        printed: dict[bytes, list[_Printed]] = {}
        for line in self.lines:
            if line[0] in wanted:
                printed.setdefault(line[0], []).append(line)
        return reference_hits_of(printed, kept, context_lines)


def reference_hits_of(
    printed: dict[bytes, list[_Printed]], kept: list[str], context_lines: int
) -> tuple[dict[str, FileHits], int, bool]:
    """Up to MAX_HITS_PER_FILE matching lines per file with their context, at most
    MAX_TOTAL_HITS in all; lines matching only dropped terms show as context."""
    files: dict[str, FileHits] = {}
    shown = 0
    lowered = [(term, term.lower()) for term in kept]
    for head, printed_lines in printed.items():
        hits: dict[int, set[str]] = {}
        for _path, number_text, sep, text in printed_lines:
            if sep != b":":
                continue
            if len(hits) >= ks.MAX_HITS_PER_FILE:
                break
            low = text.rstrip(b"\r").decode("utf-8", "replace").lower()
            found = {term for term, term_low in lowered if term_low in low}
            if found:
                hits[int(number_text)] = found
        if not hits:
            continue
        lines = [
            (int(number), text.rstrip(b"\r"), sep == b":")
            for _path, number, sep, text in printed_lines
        ]
        near = {n + d for n in hits for d in range(-context_lines, context_lines + 1)}
        path = ks._strip_dot(os.fsdecode(head))
        entry = files.setdefault(path, FileHits(path))
        for number, text, matched in lines:
            if number not in near:
                continue
            terms_here = hits.get(number)
            if terms_here is None and matched:
                low = text.decode("utf-8", "replace").lower()
                terms_here = {term for term, term_low in lowered if term_low in low} or None
            if terms_here is not None and shown >= ks.MAX_TOTAL_HITS:
                if not entry.matches:
                    del files[path]
                return files, shown, True
            entry.lines[number] = Line(number, ks._line_text(text), terms_here is not None)
            if terms_here is not None:
                entry.matches += 1
                entry.terms.update(terms_here)
                shown += 1
    return files, shown, False


async def reference_one_pass(
    terms: list[str], spec: sandbox.RunSpec, context_lines: int
) -> ReferencePass | None:
    """`ks._one_pass` read the reference way: same rg, same budget, same --stats."""
    found = ReferencePass.of(terms)
    size = 0
    async with ks._rg(ks._one_pass_args(terms, context_lines), spec) as process:
        async for block in process.blocks():
            size += len(block) + 1
            if size > ks.ONE_PASS_BUDGET:
                return None
            found.feed(block)
            searched = ks._SEARCHED.search(block, max(0, len(block) - ks._STATS_BYTES))
            if searched:
                found.total_files = int(searched.group(1))
        await process.wait()
    found.overlong = process.overlong
    found.count()
    return found


class Replayed(ks.RgProcess):
    """An rg that already ran: its output, in the reads given."""

    async def wait(self) -> None:
        return None


def replaying(chunks: list[bytes]) -> object:
    """A stand-in for `ks._rg` that replays `chunks` as rg's output."""

    async def output() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    @contextlib.asynccontextmanager
    async def rg(_args: list[str], _spec: sandbox.RunSpec) -> AsyncIterator[ks.RgProcess]:
        yield Replayed(None, output())  # type: ignore[arg-type]

    return rg


Result = tuple[str, SearchDisplay]


async def _search(terms: list[str], context_lines: int) -> Result:
    spec = sandbox.RunSpec(argv=("rg",), cwd="/r", env={}, restricted=False)
    return await ks.KeywordSearchTool()._search("q", terms, Path("/r"), spec, context_lines)


def both_readings(
    monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], terms: list[str], context_lines: int
) -> tuple[Result, Result]:
    """The tool's result on `chunks` as rg's output: the tool's reading, the reference's."""
    monkeypatch.setattr(ks, "_rg", replaying(chunks))
    ours = asyncio.run(_search(terms, context_lines))
    monkeypatch.setattr(ks, "_rg", replaying(chunks))
    monkeypatch.setattr(ks, "_one_pass", reference_one_pass)
    theirs = asyncio.run(_search(terms, context_lines))
    return ours, theirs


# --- generated outputs, as rg prints them --------------------------------------------

TERMS = ["ab", "b", "AB c", "\u00e9", "\u0130x", "k"]
_PIECES = [
    b"ab",
    b"AB",
    b"aB c",
    b"b",
    b" ",
    b"c",
    b"x",
    b"\xc3\xa9",  # é
    b"\xc3\x89",  # É
    b"\xc4\xb0x",  # İx: lower() gives two code points
    b"\xe2\x84\xaa",  # Kelvin sign: lower() is "k"
    b"\xff",  # not UTF-8
    b"\xc3",  # a cut sequence
    b"\r",
    b"12:",
]
_NUL_PIECES = [b"\0", b"\x003:ab"]  # what a printed line's head looks like, inside a text
_PATH_PIECES = [b"a", b"b", b"ab", b"AB", b"/", b".py", b"\xc3\xa9", b"\xff", b"x"]


@st.composite
def rg_output(draw: st.DrawFn) -> tuple[bytes, int]:
    """rg's one-pass output for some files (each file's lines together, numbers rising, ':'
    or '-' as rg marked them — each match's context around it, or any — now and then its
    note on a binary file), `--` between groups or not, then its --stats; and the longest
    line a read keeps (lines at or past it are dropped and counted)."""
    # Paths with a newline and texts with NUL are drawn in some outputs only, so that
    # the others take the way real rg output takes.
    path_pieces = _PATH_PIECES + [b"\n"] * draw(st.integers(min_value=-2, max_value=1))
    pieces = _PIECES + _NUL_PIECES * draw(st.integers(min_value=-2, max_value=1))
    paths = draw(
        st.lists(
            st.lists(st.sampled_from(path_pieces), max_size=4).map(lambda p: b"./" + b"".join(p)),
            max_size=8,
            unique=True,
        )
    )
    separators = draw(st.booleans())
    shaped = draw(st.booleans())  # as rg prints: the context of each match around it
    context = draw(st.integers(min_value=0, max_value=2))
    out: list[bytes] = []
    for path in paths:
        printed: list[tuple[int, bytes]] = []
        if shaped:
            hits = draw(st.sets(st.integers(min_value=1, max_value=20), min_size=1, max_size=5))
            near = {n + d for n in hits for d in range(-context, context + 1) if n + d > 0}
            printed = [(n, b":" if n in hits else b"-") for n in sorted(near)]
        else:
            number = 0
            for _ in range(draw(st.integers(min_value=1, max_value=8))):
                number += draw(st.integers(min_value=1, max_value=4))
                printed.append((number, draw(st.sampled_from([b":", b":", b"-"]))))
        previous = None
        for number, sep in printed:
            if separators and out and (previous is None or number > previous + 1):
                out.append(b"--")  # rg's, between groups of lines not next to each other
            previous = number
            text = b"".join(draw(st.lists(st.sampled_from(pieces), max_size=6)))
            out.append(path + b"\0" + str(number).encode() + sep + text)
        if draw(st.integers(min_value=0, max_value=5)) == 0:  # rg's note, no NUL
            out.append(path + b": WARNING: stopped searching binary file after match")
    searched = len(paths) + draw(st.integers(min_value=0, max_value=30))
    stats = [b"", b"3 matches", f"{searched} files searched".encode(), b"0.1 seconds"]
    limit = draw(st.sampled_from([ks.MAX_RG_LINE_BYTES, 40]))
    return b"\n".join(out + stats) + b"\n", limit


def _cut(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, at, i = [], 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)]
        chunks.append(data[at : at + size])
        at, i = at + size, i + 1
    return chunks


def with_small_caps(patch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Caps small enough for generated outputs to reach every one of them."""
    patch.setattr(ks, "MAX_TOTAL_HITS", 9)
    patch.setattr(ks, "MAX_HITS_PER_FILE", 3)
    patch.setattr(ks, "MAX_FILES_PER_TERM", 4)
    patch.setattr(ks, "BROAD_MIN_TREE", 6)
    return patch


@pytest.fixture
def small_caps(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    return with_small_caps(monkeypatch)


# the shapes that matter (a separator in a kept file's lines, say) are a few in a hundred
@settings(max_examples=max(500, settings().max_examples))
@given(
    output=rg_output(),
    terms=st.lists(st.sampled_from(TERMS), min_size=1, max_size=4, unique=True),
    context_lines=st.integers(min_value=0, max_value=2),
    sizes=st.just([1 << 20]) | st.lists(st.integers(min_value=1, max_value=400), min_size=1),
)
@example(  # a path holding a term, a line matching only in its path
    output=(b"./ab.py\x001-x\n./ab.py\x002:c\n./c\x004:ab\n\n1 files searched\n", 1 << 20),
    terms=["ab"],
    context_lines=1,
    sizes=[1000],
)
@example(  # a path with a newline: it reads as two lines, the second with another path
    output=(b"./x\nab\x001:ab\n./y\x003-b\nab\x002:ab\n\n2 files searched\n", 1 << 20),
    terms=["ab", "b"],
    context_lines=1,
    sizes=[7, 1000],
)
@example(  # a separator inside a file's lines, then a context line
    output=(b"./p\x001:ab\n--\n./p\x005-c\n./p\x006:ab\n\n1 files searched\n", 1 << 20),
    terms=["ab"],
    context_lines=1,
    sizes=[1000],
)
@example(  # context lines of two files next to each other, no separator
    output=(b"./a\x001:ab\n./a\x002-c\n./b\x001-c\n./b\x002:ab\n", 1 << 20),
    terms=["ab"],
    context_lines=1,
    sizes=[1000],
)
@example(  # a NUL inside a text that looks like the head of a printed line
    output=(b"./a\x001-x\x003:ab\n./a\x003:ab\x005:ab\n", 1 << 20),
    terms=["ab"],
    context_lines=2,
    sizes=[1000],
)
def test_the_one_pass_reads_rg_output_as_the_line_by_line_reading_does(
    output: tuple[bytes, int],
    terms: list[str],
    context_lines: int,
    sizes: list[int],
) -> None:
    """Same summary (terms, counts, hits, caps, lines too long) and same display, for
    any output rg prints and any way its pipe is read."""
    data, limit = output
    with pytest.MonkeyPatch.context() as patch:
        with_small_caps(patch).setattr(ks, "MAX_RG_LINE_BYTES", limit)
        ours, theirs = both_readings(patch, _cut(data, sizes), terms, context_lines)
    assert ours == theirs


# --- real rg ---------------------------------------------------------------------------


def _awkward_tree(root: Path) -> None:
    """Files whose printed lines are awkward to read: names holding a term, a newline or
    non-UTF-8 bytes; CRLF, non-UTF-8 and overlong lines; matches in adjacent lines and
    files, only in context, capped per file."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "needle_dir").mkdir()
    (root / "needle_dir" / "needle.py").write_bytes(b"x = 1\nneedle = 2\ny = 3\n")
    (root / "path only needle.txt").write_bytes(b"nothing here\n")
    (root / "two\nlines.py").write_bytes(b"a\nNEEDLE b\nc\n")
    (root / "lines.py").write_bytes(b"needle\n")
    (root / os.fsdecode(b"caf\xe9.py")).write_bytes(b"Needle\xff caf\xe9\r\nplain\r\n")
    (root / "crlf.txt").write_bytes(b"one\r\nneedle two\r\nthree\r\n")
    (root / "bundle.js").write_bytes(b"var a=1;" + b"x" * 300 + b" needle;\nneedle after\n")
    (root / "many.py").write_bytes(b"".join(b"needle %d Haystack\n" % i for i in range(30)))
    for i in range(12):
        (root / f"mod{i}.py").write_bytes(b"import haystack\n\nhaystack.run()\n")
    # rg prints the match before the NUL, then a note (a line without NUL): "stopped
    # searching binary file"
    (root / "late.bin").write_bytes(b"needle 1\n" + b"filler\n" * 40_000 + b"needle\0 2\n")


@pytest.mark.parametrize("context_lines", [0, 1, 3])
def test_real_rg_output_of_awkward_files_reads_the_same(
    tmp_path: Path, small_caps: pytest.MonkeyPatch, context_lines: int
) -> None:
    """rg's own output (its format, its order, its threads) over awkward files, read both
    ways (read in small pieces, so files straddle reads)."""
    _awkward_tree(tmp_path)
    rg = ks.find_rg()
    assert rg is not None
    terms = ["needle", "haystack", "absent", "\u00e9"]
    args = [rg, "--no-config", *ks._one_pass_args(terms, context_lines)]
    data = subprocess.run(args, cwd=tmp_path, capture_output=True, check=False).stdout
    assert b"two\nlines.py\0" in data  # rg prints a path's newline as it is
    assert b"late.bin: WARNING" in data
    small_caps.setattr(ks, "MAX_RG_LINE_BYTES", 200)
    ours, theirs = both_readings(small_caps, _cut(data, [97, 300]), terms, context_lines)
    assert ours == theirs
    summary, _display = ours
    assert "'needle':" in summary and "not shown" in summary


def test_the_tool_searches_with_the_arguments_read(tmp_path: Path) -> None:
    """The real one pass (the launcher, rg) gives what the reference reads in its output."""
    _awkward_tree(tmp_path)
    # Not the name with a newline here: its lines read as another path's ("lines.py"),
    # so what is shown depends on which of the two rg printed first, and the two runs
    # compared here are two rg runs, whose threads may order them differently. The
    # reading of such output is compared on one output by the tests above.
    (tmp_path / "two\nlines.py").unlink()
    ctx = ToolContext(
        cwd=tmp_path,
        mode=Mode.UNRESTRICTED,
        commands=CommandRunner(info=SandboxInfo(available=False)),
    )
    rg = ks.find_rg()
    assert rg is not None
    spec = ks.rg_spec(ctx, tmp_path, rg)
    terms = ["needle", "haystack"]
    result = asyncio.run(ks.KeywordSearchTool()._search("q", terms, tmp_path, spec, 1))
    args = [rg, "--no-config", *ks._one_pass_args(terms, 1)]
    data = subprocess.run(args, cwd=tmp_path, capture_output=True, check=False).stdout
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ks, "_rg", replaying([data]))
        patch.setattr(ks, "_one_pass", reference_one_pass)
        expected = asyncio.run(_search(terms, 1))
    # Two rg runs: files of equal rank may come in another order (rg's threads)
    lines = sorted(result[0].replace(str(tmp_path), "/r").splitlines())
    assert lines == sorted(expected[0].splitlines())
    assert result[1].terms == expected[1].terms
    assert sorted(result[1].files) == sorted(expected[1].files)


def test_a_read_of_many_lines_without_nul_is_read_line_by_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paths full of newlines print as runs of lines without NUL, and the fast pattern
    reads on from each such line to the next NUL: on a read with many of them it is not
    used (it would take time quadratic in a run), and the result is still exact."""
    path = b"./" + b"\n".join([b"d"] * 300) + b".py"
    lines = [path + b"\0%d%s needle" % (n, b":" if n % 2 else b"-") for n in range(1, 40)]
    data = b"\n".join([*lines, b"./ok.py\x001:needle", b"", b"2 files searched"]) + b"\n"
    used: list[int] = []
    fast = ks._MATCHED_FAST

    class Spy:
        def findall(self, data: bytes) -> list[tuple[bytes, bytes]]:
            used.append(len(data))
            return fast.findall(data)

    monkeypatch.setattr(ks, "_MATCHED_FAST", Spy())
    ours, theirs = both_readings(monkeypatch, [data], ["needle"], 1)
    assert ours == theirs
    assert not used
    assert "'needle': 21 hits in 2 files" in ours[0]
