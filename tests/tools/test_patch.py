"""The patch tool against real files in a temp dir (issue item 4, REQ-PATCH-009)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools.base import RESTRICTED_PATCH_MESSAGE, ToolContext
from phoenix_nb.tools.patch import PatchTool


def ctx_for(cwd: Path, mode: Mode = Mode.UNRESTRICTED) -> ToolContext:
    return ToolContext(
        cwd=cwd, mode=mode, commands=CommandRunner(info=SandboxInfo(available=True, abi=7))
    )


async def patch(
    cwd: Path, path: str, *patches: dict[str, Any], mode: Mode = Mode.UNRESTRICTED
) -> ToolResult:
    return await PatchTool().run(
        {"path": path, "patches": list(patches)}, ctx_for(cwd, mode), "tu1"
    )


def replace(old: str, new: str) -> dict[str, str]:
    return {"operation": "replace", "oldText": old, "newText": new}


async def test_restricted_mode_changes_nothing_and_says_exactly_why(tmp_path: Path) -> None:
    """REQ-PATCH-009: exact message, file untouched, nothing created."""
    (tmp_path / "a.txt").write_text("hello\n")
    result = await patch(tmp_path, "a.txt", replace("hello", "bye"), mode=Mode.RESTRICTED)
    assert result.is_error and result.content == RESTRICTED_PATCH_MESSAGE
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    result = await patch(
        tmp_path, "new/b.txt", {"operation": "overwrite", "newText": "x"}, mode=Mode.RESTRICTED
    )
    assert result.content == RESTRICTED_PATCH_MESSAGE
    assert not (tmp_path / "new").exists()


async def test_replace_unique_match_reports_counts_and_diff(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    f = tmp_path / "src" / "x.py"
    f.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    result = await patch(
        tmp_path,
        "src/x.py",
        replace("    return 1\n", "    a = 1\n    return a\n"),
        replace("return 2", "return 3"),
    )
    assert not result.is_error, result.content
    assert result.content == "Applied 2 patches to src/x.py (+3 −2)."
    assert f.read_text() == "def f():\n    a = 1\n    return a\n\n\ndef g():\n    return 3\n"
    assert result.display is not None and result.display.path == "src/x.py"
    assert "-    return 1\n" in result.display.diff and "+    return a\n" in result.display.diff
    assert result.display.diff.startswith("--- a/src/x.py\n+++ b/src/x.py\n")


async def test_all_or_nothing_when_a_later_patch_fails(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\n")
    before = f.stat()
    result = await patch(tmp_path, "a.txt", replace("one", "1"), replace("three", "3"))
    assert result.is_error
    assert "patches[1]" in result.content and "0 matches" in result.content
    assert "not changed" in result.content
    assert f.read_text() == "one\ntwo\n"
    assert f.stat().st_ino == before.st_ino and f.stat().st_mtime_ns == before.st_mtime_ns


async def test_ambiguous_match_reports_count_and_lines(tmp_path: Path) -> None:
    lines = ["x = 0\n"] * 40
    for n in (4, 19, 40):
        lines[n - 1] = "value = compute()\n"
    f = tmp_path / "a.py"
    f.write_text("".join(lines))
    result = await patch(tmp_path, "a.py", replace("value = compute()", "value = 1"))
    assert result.is_error
    assert "3 matches at lines 4, 19, 40" in result.content
    assert f.read_text() == "".join(lines)


async def test_not_found_hints_the_closest_line(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("import os\n\ndef compute_total(items, tax):\n    return sum(items)\n")
    result = await patch(tmp_path, "a.py", replace("def compute_totals(items, tax_rate):", "x"))
    assert result.is_error
    assert "0 matches" in result.content
    assert "line is 3" in result.content


async def test_tolerates_unicode_lookalikes_and_preserves_the_rest(tmp_path: Path) -> None:
    """Known failure of the original system: em dashes and curly quotes."""
    text = "title = “Phoenix — the agent’s notebook”\u00a0# note…\nkeep = ‘untouched’ – yes\n"
    f = tmp_path / "a.py"
    f.write_bytes(text.encode())
    result = await patch(
        tmp_path,
        "a.py",
        replace('title = "Phoenix - the agent\'s notebook" # note...', "title = 'P'"),
    )
    assert not result.is_error, result.content
    assert "typographic" in result.content
    assert f.read_bytes() == "title = 'P'\nkeep = ‘untouched’ – yes\n".encode()


async def test_crlf_file_stays_crlf_and_lf_oldtext_matches(tmp_path: Path) -> None:
    f = tmp_path / "win.txt"
    f.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    result = await patch(
        tmp_path,
        "win.txt",
        replace("first\nsecond\n", "uno\ndos\ntres\n"),
        {"operation": "append_eof", "newText": "last\n"},
    )
    assert not result.is_error, result.content
    assert f.read_bytes() == b"uno\r\ndos\r\ntres\r\nthird\r\nlast\r\n"


async def test_indentation_differences_are_tolerated_and_reindented(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("class A:\n\tdef f(self):\n\t\tif x:\n\t\t\treturn 1\n\t\treturn 2\n")
    old = "if x:\n    return 1\n"
    new = "if x and y:\n    return 10\nlog()\n"
    result = await patch(tmp_path, "a.py", replace(old, new))
    assert not result.is_error, result.content
    assert "indentation" in result.content
    assert (
        f.read_text()
        == "class A:\n\tdef f(self):\n\t\tif x and y:\n\t\t    return 10\n\t\tlog()\n\t\treturn 2\n"
    )


async def test_indentation_tolerant_delete_removes_whole_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("def f():\n\ta()\n\tb()\n\tc()\n")
    result = await patch(tmp_path, "a.py", replace("    b()\n", ""))
    assert not result.is_error, result.content
    assert f.read_text() == "def f():\n\ta()\n\tc()\n"


async def test_overwrite_creates_parents_and_uses_umask_mode(tmp_path: Path) -> None:
    result = await patch(tmp_path, "deep/er/new.txt", {"operation": "overwrite", "newText": "hi\n"})
    assert not result.is_error, result.content
    assert result.content.startswith("Created deep/er/new.txt (+1")
    created = tmp_path / "deep" / "er" / "new.txt"
    assert created.read_text() == "hi\n"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(created.stat().st_mode) == 0o666 & ~umask


async def test_permissions_preserved_and_no_temp_files_left(tmp_path: Path) -> None:
    f = tmp_path / "run.sh"
    f.write_text("echo 1\n")
    f.chmod(0o751)
    result = await patch(tmp_path, str(f), replace("echo 1", "echo 2"))  # absolute path allowed
    assert not result.is_error, result.content
    assert stat.S_IMODE(f.stat().st_mode) == 0o751
    assert f.read_text() == "echo 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


async def test_write_is_atomic_rename(tmp_path: Path) -> None:
    """A reader holding the old file sees the old content: the file was replaced, not rewritten."""
    f = tmp_path / "a.txt"
    f.write_text("old\n")
    with f.open() as held:
        result = await patch(tmp_path, "a.txt", replace("old", "new"))
        assert not result.is_error
        assert held.read() == "old\n"
    assert f.read_text() == "new\n"


async def test_symlink_target_is_patched_and_link_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("a\n")
    (tmp_path / "link.txt").symlink_to(real)
    result = await patch(tmp_path, "link.txt", replace("a", "b"))
    assert not result.is_error, result.content
    assert (tmp_path / "link.txt").is_symlink()
    assert real.read_text() == "b\n"


@pytest.mark.parametrize("data", [b"abc\x00def", b"caf\xe9\n"])
async def test_binary_files_are_refused_unchanged(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    result = await patch(tmp_path, "blob.bin", {"operation": "append_eof", "newText": "x"})
    assert result.is_error and ("binary" in result.content or "UTF-8" in result.content)
    assert f.read_bytes() == data


async def test_prepend_and_append_on_file_without_trailing_newline(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("middle")
    result = await patch(
        tmp_path,
        "a.txt",
        {"operation": "prepend_bof", "newText": "top"},
        {"operation": "append_eof", "newText": "bottom\n"},
    )
    assert not result.is_error, result.content
    assert f.read_text() == "top\nmiddle\nbottom\n"


async def test_replace_on_missing_file_and_directory_are_clear_errors(tmp_path: Path) -> None:
    result = await patch(tmp_path, "nope.txt", replace("a", "b"))
    assert result.is_error and "does not exist" in result.content
    assert not (tmp_path / "nope.txt").exists()
    (tmp_path / "d").mkdir()
    result = await patch(tmp_path, "d", {"operation": "overwrite", "newText": "x"})
    assert result.is_error and "directory" in result.content


@pytest.mark.parametrize(
    ("patches", "field"),
    [
        ([{"operation": "replace", "newText": "x"}], "patches[0].oldText is required for replace"),
        (
            [{"operation": "replace", "oldText": "", "newText": "x"}],
            "patches[0].oldText must not be empty",
        ),
        ([{"operation": "overwrite"}], "patches[0].newText is required for overwrite"),
        ([{"operation": "move", "newText": "x"}], "patches[0].operation must be one of"),
    ],
)
async def test_bad_patch_entries_name_the_field(
    tmp_path: Path, patches: list[dict[str, Any]], field: str
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    result = await PatchTool().run({"path": "a.txt", "patches": patches}, ctx_for(tmp_path), "tu")
    assert result.is_error and field in result.content
    assert (tmp_path / "a.txt").read_text() == "a\n"


async def test_unwritable_directory_reports_os_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    d = tmp_path / "ro"
    d.mkdir()
    (d / "a.txt").write_text("a\n")
    d.chmod(0o555)
    try:
        result = await patch(tmp_path, "ro/a.txt", replace("a", "b"))
        assert result.is_error and "not changed" in result.content
    finally:
        d.chmod(0o755)


# ------------------------------------------- what the file is: owner, setuid, links


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@needs_root
async def test_owner_and_group_are_kept_and_setuid_is_dropped(tmp_path: Path) -> None:
    """Root patching another user's 4755 file must not leave it root-owned and setuid."""
    f = tmp_path / "tool.sh"
    f.write_text("#!/bin/sh\necho old\n")
    os.chown(f, 1234, 2345)
    f.chmod(0o4755)
    result = await patch(tmp_path, "tool.sh", replace("echo old", "echo new"))
    assert not result.is_error, result.content
    info = f.stat()
    assert (info.st_uid, info.st_gid) == (1234, 2345)
    assert stat.S_IMODE(info.st_mode) == 0o755
    assert "setuid" in result.content
    assert f.read_text() == "#!/bin/sh\necho new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tool.sh"]


@pytest.mark.parametrize("bits", [0o4755, 0o2755, 0o6750, 0o2644, 0o4700])
async def test_setuid_and_setgid_never_survive_a_change(tmp_path: Path, bits: int) -> None:
    f = tmp_path / "bin.sh"
    f.write_text("a\n")
    f.chmod(bits)
    result = await patch(tmp_path, "bin.sh", {"operation": "append_eof", "newText": "b\n"})
    assert not result.is_error, result.content
    assert stat.S_IMODE(f.stat().st_mode) == bits & 0o1777
    assert f.read_text() == "a\nb\n"


async def test_no_change_keeps_setuid(tmp_path: Path) -> None:
    """Nothing written, nothing dropped: only a changed file loses its privileges."""
    f = tmp_path / "bin.sh"
    f.write_text("a\n")
    f.chmod(0o4755)
    result = await patch(tmp_path, "bin.sh", replace("a", "a"))
    assert result.content.startswith("No change")
    assert stat.S_IMODE(f.stat().st_mode) == 0o4755


async def test_hard_links_are_kept(tmp_path: Path) -> None:
    """The other name sees the change: the inode was rewritten, not replaced."""
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\n")
    other = tmp_path / "sub"
    other.mkdir()
    os.link(f, other / "b.txt")
    inode = f.stat().st_ino
    result = await patch(tmp_path, "a.txt", replace("two", "deux"), replace("one", "un"))
    assert not result.is_error, result.content
    assert "hard links" in result.content
    assert (other / "b.txt").read_text() == "un\ndeux\n" == f.read_text()
    assert f.stat().st_ino == inode and f.stat().st_nlink == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "sub"]


@needs_root
async def test_hard_linked_setuid_file_of_another_user(tmp_path: Path) -> None:
    """All four at once: owner, group, link and no setuid."""
    f = tmp_path / "x"
    f.write_text("v1\n")
    os.link(f, tmp_path / "y")
    os.chown(f, 4321, 4321)
    f.chmod(0o6755)
    result = await patch(tmp_path, "x", replace("v1", "v2"))
    assert not result.is_error, result.content
    y = (tmp_path / "y").stat()
    assert (tmp_path / "y").read_text() == "v2\n"
    assert (y.st_uid, y.st_gid, stat.S_IMODE(y.st_mode)) == (4321, 4321, 0o755)


async def test_hard_link_write_failure_is_not_reported_as_unchanged(tmp_path: Path) -> None:
    """A failing in-place write says the file may be partly written (RLIMIT_FSIZE in a child)."""
    import subprocess
    import sys

    f = tmp_path / "a.txt"
    f.write_text("x\n")
    os.link(f, tmp_path / "b.txt")
    script = (
        "import asyncio, resource, signal, sys\n"
        "from pathlib import Path\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "from tests.tools.test_patch import patch\n"
        "r = asyncio.run(patch(Path(sys.argv[1]), 'a.txt', "
        "{'operation': 'overwrite', 'newText': 'y' * 5000}))\n"
        "print(r.content)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert "may hold part of the new content" in out and "was not changed" not in out


# ---------------------------------------------------------- linear, off the loop


def _many_matches(lines: int) -> str:
    return "".join(f"    value = compute()  # {i % 7}\n" for i in range(lines))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "old",
    [
        "value = compute()",  # exact: 2 matches a line
        "value = compute()  # 3",  # exact, every 7th line
        "compute()  # 6 - never",  # folded: the file has an em dash
        "value = compute()  # 1\nvalue = compute()  # 2\n",  # indentation-tolerant
    ],
)
async def test_ambiguous_replace_on_a_large_file_is_linear(tmp_path: Path, old: str) -> None:
    """The quadratic case: 300k lines (~9 MB). The old line counting took hours here.

    (Speed is measured in tests/benchmarks/bench_patch.py; the timeout only
    catches a quadratic relapse.)
    """
    f = tmp_path / "big.py"
    text = _many_matches(300_000).replace("compute()  # 6", "compute()  # 6 \u2014 never", 50_000)
    f.write_text(text)
    result = await patch(tmp_path, "big.py", replace(old, "x"))
    assert result.is_error
    assert "ambiguous" in result.content and "more" in result.content
    assert f.read_text() == text


async def test_patch_work_runs_off_the_event_loop(tmp_path: Path) -> None:
    """While a large file is searched, the loop keeps serving other tasks."""
    import asyncio

    f = tmp_path / "big.py"
    f.write_text(_many_matches(200_000))
    task = asyncio.ensure_future(patch(tmp_path, "big.py", replace("value = compute()", "x")))
    await asyncio.sleep(0)
    assert not task.done()  # a synchronous search would have finished in its first step
    ticks = 0
    while not task.done():
        ticks += 1
        await asyncio.sleep(0)
    assert ticks > 0
    assert (await task).is_error


async def test_ambiguous_lines_are_counted_right_after_folding(tmp_path: Path) -> None:
    """Line numbers of folded and CRLF matches point at the original's lines."""
    f = tmp_path / "w.txt"
    f.write_bytes("a\u2026\r\nx \u201cq\u201d\r\nb\r\nx \u201cq\u201d\r\n".encode())
    result = await patch(tmp_path, "w.txt", replace('x "q"', "y"))
    assert "2 matches at lines 2, 4" in result.content
    result = await patch(tmp_path, "w.txt", replace('a...\nx "q"', "z"))
    assert not result.is_error, result.content
    assert f.read_bytes() == "z\r\nb\r\nx \u201cq\u201d\r\n".encode()


async def test_diff_of_a_change_deep_in_a_file_has_the_files_line_numbers(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    result = await patch(tmp_path, "a.txt", replace("line 500\n", "five hundred\n"))
    assert result.display is not None
    diff = result.display.diff
    assert "@@ -497,7 +497,7 @@" in diff
    assert "-line 500\n+five hundred\n" in diff and " line 497\n" in diff and "line 496" not in diff


async def test_a_cancel_leaves_the_file_whole_and_no_temp_files(tmp_path: Path) -> None:
    """Cancelled at any await: the file is the old or the new text, never part of either."""
    import asyncio

    f = tmp_path / "big.txt"
    old = "".join(f"line {i}\n" for i in range(200_000))
    for steps in range(6):
        f.write_text(old)
        task = asyncio.ensure_future(patch(tmp_path, "big.txt", replace("line 199999\n", "last\n")))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert f.read_text() in (old, old.replace("line 199999\n", "last\n"))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def _patch_children() -> list[int]:
    """Child processes of this one running the patch worker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat_line.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"patch._serve" in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_large_file_is_patched_by_a_child_process_like_a_small_one(
    tmp_path: Path,
) -> None:
    """Above the offload size the work runs in a child process (its C calls cannot hold
    the kernel's GIL); the result, the diff and the file are what the thread gives."""
    import asyncio

    from phoenix_nb.tools import patch as module

    text = "".join(f"row {i} \u2014 value\n" for i in range(120_000))  # ~2.5 MB
    assert len(text.encode()) > module._OFFLOAD_BYTES
    results = []
    for name in ("away.txt", "thread.txt"):
        (tmp_path / name).write_text(text)
    seen: list[int] = []
    task = asyncio.ensure_future(
        patch(tmp_path, "away.txt", replace("row 99999 - value\n", "changed\n"))
    )
    while not task.done():
        seen += _patch_children()
        await asyncio.sleep(0.001)
    results.append(await task)
    assert seen, "the large file's work ran in a child process"
    small = module._OFFLOAD_BYTES
    module._OFFLOAD_BYTES = 1 << 40  # the same work in a thread, for comparison
    try:
        results.append(
            await patch(tmp_path, "thread.txt", replace("row 99999 - value\n", "changed\n"))
        )
    finally:
        module._OFFLOAD_BYTES = small
    away, thread = results
    assert not away.is_error, away.content
    assert away.content.replace("away", "thread") == thread.content
    assert away.display is not None and thread.display is not None
    assert away.display.diff.replace("away", "thread") == thread.display.diff
    assert "+changed" in away.display.diff
    expected = text.replace("row 99999 \u2014 value\n", "changed\n")
    assert (tmp_path / "away.txt").read_text() == (tmp_path / "thread.txt").read_text() == expected


async def test_a_cancelled_large_patch_leaves_no_child_process(tmp_path: Path) -> None:
    import asyncio

    f = tmp_path / "big.py"
    text = _many_matches(200_000)
    f.write_text(text)
    task = asyncio.ensure_future(patch(tmp_path, "big.py", replace("value = compute()", "x")))
    while not _patch_children():
        assert not task.done(), "the child ran and finished before it was seen"
        await asyncio.sleep(0.001)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert _patch_children() == []
    assert f.read_text() == text


async def test_the_diff_of_a_huge_change_is_bounded_and_still_counts_it_whole(
    tmp_path: Path,
) -> None:
    """An overwrite of a large file removes every line: the person gets the diff's head
    and tail around a line with the whole change's counts, which the record's renderers
    read (the model's result counts it whole too)."""
    from phoenix_nb.notebook._render.view import diff_counts
    from phoenix_nb.tools.patch import DISPLAY_DIFF_CHARS

    f = tmp_path / "big.txt"
    f.write_text("".join(f"row {i}\n" for i in range(50_000)))
    result = await patch(tmp_path, "big.txt", {"operation": "overwrite", "newText": "tiny\n"})
    assert result.content == "Applied 1 patch to big.txt (+1 −50000)."
    assert f.read_text() == "tiny\n"
    assert result.display is not None
    diff = result.display.diff
    assert len(diff) <= DISPLAY_DIFF_CHARS + 200
    assert diff.startswith("--- a/big.txt\n+++ b/big.txt\n@@ -1,50000 +1 @@\n-row 0\n")
    assert diff.endswith("-row 49999\n+tiny\n"), "the tail is kept"
    assert "lines of this diff not shown; the whole change is +1 -50000 @@\n" in diff
    assert diff_counts(diff) == (1, 50_000)
    # A diff under the bound is whole.
    small = await patch(tmp_path, "big.txt", replace("tiny\n", "small\n"))
    assert small.display is not None and "not shown" not in small.display.diff
    assert diff_counts(small.display.diff) == (1, 1)
