"""Store faults through a real kernel: damage is contained, failures are one line.

Each test copies one prepared store (made by real turns in a real kernel against
the fake Messages API), damages it the way disks, sync tools and people do, and
starts a fresh kernel on it. The full disk and the read-only store are real:
the kernel runs inside its own mount namespace (`unshare`, CI runs as root)
where PHOENIX_HOME is a small tmpfs or a read-only bind mount; the namespace,
and every mount in it, ends with the kernel's process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

import tests.notebook.kernel_harness as harness
from phoenix_nb.store import Store
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Execution, Kernel, loaded_kernel, pid_alive

pytestmark = pytest.mark.timeout(180)

REPAIR_HINT = "run `%phoenix repair alpha`"


def _echo(fake: FakeAnthropic) -> None:
    fake.add_rule(lambda r: True, lambda r: Turn([text(f"echo: {r.last_user_text}")]))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def template(fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made by real turns: alpha (three turns) and beta (one)."""
    fake.clear()
    _echo(fake)
    root = tmp_path_factory.mktemp("template")
    with loaded_kernel(root, fake.base_url) as kernel:
        for word in ("one", "two", "three"):
            kernel.ok(f"%%phoenix --name alpha\n{word}")
        kernel.ok("%%phoenix --name beta\nhello beta")
    return root / "store"


@pytest.fixture
def fresh(fake: FakeAnthropic) -> FakeAnthropic:
    fake.clear()
    _echo(fake)
    return fake


def _copy(template: Path, tmp: Path) -> Path:
    shutil.copytree(template, tmp / "store", ignore=shutil.ignore_patterns("*.lock"))
    return tmp / "store"


def _journal(store: Path, slug: str) -> Path:
    with Store(store) as s:
        record = s.get_conversation(slug)
        assert record is not None
        return store / "conversations" / f"{record['id']}.jsonl"


def _line_with(path: Path, needle: bytes) -> int:
    lines = path.read_bytes().splitlines(keepends=True)
    return next(i for i, line in enumerate(lines) if needle in line)


def _flip(path: Path, line_no: int) -> bytes:
    """Flip one byte in the middle of line `line_no` (0-based); returns the new bytes."""
    lines = path.read_bytes().splitlines(keepends=True)
    line = bytearray(lines[line_no])
    line[len(line) // 2] ^= 0x20
    lines[line_no] = bytes(line)
    data = b"".join(lines)
    path.write_bytes(data)
    return data


def _start(
    tmp: Path,
    base_url: str,
    monkeypatch: pytest.MonkeyPatch,
    wrap: str = "",
    env: dict[str, str] | None = None,
) -> Kernel:
    """A kernel on tmp/store; `wrap` is shell run first inside a private mount namespace."""
    if wrap:

        def specs(folder: Path) -> KernelSpecManager:
            spec_dir = folder / harness.KERNEL_NAME
            spec_dir.mkdir(parents=True, exist_ok=True)
            script = f'set -e; {wrap}; exec "$0" -m ipykernel_launcher -f "$1"'
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
            spec = {
                "argv": [*argv, sys.executable, "{connection_file}"],
                "display_name": "phoenix test (private mounts)",
                "language": "python",
            }
            (spec_dir / "kernel.json").write_text(json.dumps(spec))
            return KernelSpecManager(kernel_dirs=[str(folder)])

        monkeypatch.setattr(harness, "venv_kernelspecs", specs)
    return Kernel(tmp, base_url, extra_env=env or {})


@pytest.fixture
def kernels() -> Iterator[list[Kernel]]:
    """Kernels a test started, shut down after it; their namespaces and mounts end with them."""
    started: list[Kernel] = []
    yield started
    for kernel in started:
        pid = kernel.km.provisioner.pid if kernel.km.provisioner else None  # type: ignore[attr-defined]
        kernel.shutdown()
        if pid is not None:
            assert not pid_alive(pid), "the kernel (and its mount namespace) outlived the test"


def _clean(cell: Execution) -> str:
    """The cell succeeded without a traceback; returns its stderr."""
    assert cell.status == "ok", (cell.error(), cell.text())
    assert cell.error() is None
    assert "Traceback" not in cell.text()
    return cell.text("stderr").strip()


def _one_line(cell: Execution) -> str:
    err = _clean(cell)
    assert len(err.splitlines()) == 1, err
    return err


def _requests(fake: FakeAnthropic) -> list[dict]:
    return [r.body for r in fake.requests if r.path.endswith("/messages")]


def _texts(body: dict) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [b["text"] for b in blocks if b.get("type") == "text"]
    return out


def _load(kernel: Kernel) -> str:
    """`%load_ext` on the kernel; returns what it printed."""
    cell = kernel.run("%load_ext phoenix_nb")
    _clean(cell)
    return cell.text("stdout")


# -- damaged conversation journals ---------------------------------------------------------


@pytest.mark.parametrize("where", ["middle", "last line", "valid json, wrong checksum"])
def test_a_damaged_journal_is_contained_quarantined_and_repaired(
    where: str,
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    store = _copy(template, tmp_path)
    journal = _journal(store, "alpha")
    if where == "middle":
        damaged = _flip(journal, _line_with(journal, b'"text":"two"'))
        lost, kept = "two", ["one", "echo: one", "echo: two", "three", "echo: three"]
    elif where == "last line":
        last = len(journal.read_bytes().splitlines()) - 1
        damaged = _flip(journal, last)
        lost, kept = "echo: three", ["one", "echo: one", "two", "echo: two", "three"]
    else:  # a hand edit that keeps the JSON valid but not the checksum
        lines = journal.read_bytes().splitlines(keepends=True)
        n = _line_with(journal, b'"text":"two"')
        lines[n] = lines[n].replace(b'"text":"two"', b'"text":"TWO"')
        damaged = b"".join(lines)
        journal.write_bytes(damaged)
        lost, kept = "TWO", ["one", "echo: one", "echo: two", "three", "echo: three"]
    # Left mid-work, so start-up restore reads it first (where the issue saw the traceback).
    (store / "locks").mkdir(exist_ok=True)
    (store / "locks" / f"{journal.stem}.working").touch()
    kernel = _start(tmp_path, fresh.base_url, monkeypatch)
    kernels.append(kernel)
    assert "Traceback" not in _load(kernel)
    _clean(kernel.run("%%phoenix --new\na new conversation works"))
    assert _texts(_requests(fresh)[-1]) == ["a new conversation works"]

    status = kernel.run("%phoenix status alpha")
    assert _clean(status) == ""
    out = status.text("stdout")
    line = next(x for x in out.splitlines() if x.startswith("damaged"))
    assert "unreadable" in line and "lost" in line and REPAIR_HINT in line, out
    listing = kernel.run("%phoenix list")
    _clean(listing)
    alpha = next(x for x in listing.text("stdout").splitlines() if " alpha " in x)
    assert "damaged" in alpha, listing.text("stdout")
    beta = next(x for x in listing.text("stdout").splitlines() if " beta " in x)
    assert "damaged" not in beta

    # The original is kept beside it, untouched; the journal itself is not rewritten yet.
    assert (journal.parent / (journal.name + ".damaged")).read_bytes() == damaged
    assert journal.read_bytes() == damaged

    # Every other conversation works.
    _clean(kernel.run("%%phoenix --name beta\nbeta still works?"))
    assert _texts(_requests(fresh)[-1])[-1] == "beta still works?"

    # The damaged one reads (history) but takes no message until repaired.
    history = kernel.run("%phoenix history alpha")
    _clean(history)
    shown = history.last_bundle()["text/markdown"]
    for word in kept:
        assert word in shown, (word, shown)
    sent = len(_requests(fresh))
    refused = _one_line(kernel.run("%%phoenix --name alpha\nfour"))
    assert refused.startswith("phoenix: Conversation alpha is damaged") and REPAIR_HINT in refused
    assert len(_requests(fresh)) == sent, "nothing sent for a damaged conversation"

    repaired = _one_line_out(kernel.run("%phoenix repair alpha"))
    assert repaired.startswith("Repaired alpha:"), repaired
    assert ".damaged" in repaired
    _clean(kernel.run("%%phoenix --name alpha\nfour"))
    texts = _texts(_requests(fresh)[-1])
    assert texts[-1] == "four"
    assert [t for t in texts if t in {*kept, lost}] == kept, texts
    after = kernel.run("%phoenix list")
    alpha = next(x for x in after.text("stdout").splitlines() if " alpha " in x)
    assert "damaged" not in alpha
    assert (journal.parent / (journal.name + ".damaged")).read_bytes() == damaged
    assert not (store / "locks" / f"{journal.stem}.working").exists(), "at rest after repair"


def _one_line_out(cell: Execution) -> str:
    assert _clean(cell) == ""
    out = cell.text("stdout").strip()
    assert len(out.splitlines()) == 1, out
    return out


def test_a_journal_replaced_by_a_directory(
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    store = _copy(template, tmp_path)
    journal = _journal(store, "alpha")
    journal.unlink()
    journal.mkdir()
    (journal / "note.txt").write_text("a sync tool made this")
    kernel = _start(tmp_path, fresh.base_url, monkeypatch)
    kernels.append(kernel)
    _load(kernel)
    out = kernel.run("%phoenix status alpha")
    _clean(out)
    assert "damaged       a directory stands where its file should be" in out.text("stdout")
    _clean(kernel.run("%%phoenix --name beta\nbeta still works?"))
    refused = _one_line(kernel.run("%%phoenix --name alpha\nfour"))
    assert refused.startswith("phoenix: Conversation alpha is damaged")
    repaired = _one_line_out(kernel.run("%phoenix repair alpha"))
    assert repaired.startswith("Repaired alpha:")
    kept = journal.parent / (journal.name + ".damaged")
    assert (kept / "note.txt").read_text() == "a sync tool made this"
    _clean(kernel.run("%%phoenix --name alpha\nfresh start"))
    assert _texts(_requests(fresh)[-1]) == ["fresh start"]


# -- the index -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["damaged", "missing"])
def test_the_index_is_rebuilt_from_the_conversation_journals(
    how: str,
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    store = _copy(template, tmp_path)
    index = store / "index.jsonl"
    if how == "damaged":
        lines = index.read_bytes().splitlines()
        damaged = _flip(index, len(lines) // 2)
    else:
        index.unlink()
    kernel = _start(tmp_path, fresh.base_url, monkeypatch)
    kernels.append(kernel)
    _load(kernel)
    listing = kernel.run("%phoenix list")
    _clean(listing)
    out = listing.text("stdout")
    note = out.splitlines()[0]
    assert note.startswith(f"phoenix: index.jsonl was {how}") and "rebuilt from 2" in note, out
    assert " alpha " in out and " beta " in out
    if how == "damaged":
        assert (store / "index.jsonl.damaged").read_bytes() == damaged
    again = kernel.run("%phoenix list")
    assert "rebuilt" not in again.text("stdout"), "said once"
    _clean(kernel.run("%%phoenix --name alpha\nfour"))
    texts = _texts(_requests(fresh)[-1])
    assert texts == ["one", "echo: one", "two", "echo: two", "three", "echo: three", "four"]


# -- a full disk and a read-only store (private mount namespaces) -----------------------------


def _need_unshare() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("these tests need root and unshare (CI runs as root)")
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True
    )
    assert probe.returncode == 0, probe.stderr


def test_a_full_disk_loses_nothing_and_sends_nothing_unsaved(
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    _need_unshare()
    prepared = _copy(template, tmp_path / "prepared")
    (tmp_path / "store").mkdir()
    wrap = (
        'mount -t tmpfs -o size=256k phoenix-full "$PHOENIX_HOME"; '
        f'cp -a {prepared}/. "$PHOENIX_HOME"/'
    )
    kernel = _start(tmp_path, fresh.base_url, monkeypatch, wrap)
    kernels.append(kernel)
    assert _load(kernel) == ""
    _clean(kernel.run("%%phoenix --name beta\nbefore the disk filled"))
    fill = kernel.ok(
        "import os, errno\n"
        "filler = os.path.join(os.environ['PHOENIX_HOME'], 'filler')\n"
        "fd = os.open(filler, os.O_WRONLY | os.O_CREAT)\n"
        "try:\n"
        "    while True:\n"
        "        os.write(fd, b'x' * 512)\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno])\n"
        "finally:\n"
        "    os.close(fd)\n"
    )
    assert fill.text("stdout").strip() == "ENOSPC"
    sent = len(_requests(fresh))
    # Larger than any page a journal still has room in: its save needs a block of its own.
    full = "while the disk is full " * 500
    for cell in (f"%%phoenix --name beta\n{full}", "%%phoenix --new\nhello"):
        failed = _one_line(kernel.run(cell))
        assert failed.startswith("phoenix: Could not save"), failed
        assert "the disk is full" in failed and str(tmp_path / "store") in failed, failed
        assert "free some space" in failed
    assert len(_requests(fresh)) == sent, "nothing unsaved was sent to the model"
    for command in ("list", "status beta", "history beta"):
        _clean(kernel.run(f"%phoenix {command}"))
    kernel.ok("os.remove(os.path.join(os.environ['PHOENIX_HOME'], 'filler'))")
    _clean(kernel.run("%%phoenix --name beta\nafter freeing space"))
    texts = _texts(_requests(fresh)[-1])
    assert texts == [
        "hello beta",
        "echo: hello beta",
        "before the disk filled",
        "echo: before the disk filled",
        "after freeing space",
    ], texts
    state = kernel.run("%phoenix status beta").text("stdout")
    assert "state         idle" in state.lower() or "idle" in state.lower()


@pytest.mark.parametrize("notebook", [None, "analysis.ipynb"])
def test_a_read_only_store_is_reported_once_and_still_read(
    notebook: str | None,
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    _need_unshare()
    store = _copy(template, tmp_path)
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    wrap = 'mount --bind "$PHOENIX_HOME" "$PHOENIX_HOME"; mount -o remount,bind,ro "$PHOENIX_HOME"'
    env = {"JPY_SESSION_NAME": notebook} if notebook else {}  # bindings are kept in the store
    kernel = _start(tmp_path, fresh.base_url, monkeypatch, wrap, env)
    kernels.append(kernel)
    loaded = _load(kernel).strip()
    assert len(loaded.splitlines()) == 1, loaded
    assert loaded.startswith(f"phoenix: its store {store} (PHOENIX_HOME) cannot be written")
    assert "read-only file system" in loaded
    for command in ("list", "status alpha", "history alpha", "use alpha", "history"):
        cell = kernel.run(f"%phoenix {command}")
        _clean(cell)
        assert cell.text("stdout").splitlines()[0] == loaded, command
    listing = kernel.run("%phoenix list").text("stdout")
    assert " alpha " in listing and " beta " in listing
    help_cell = kernel.run("%phoenix help")
    _clean(help_cell)
    for code in ("%%phoenix --name alpha\nfour", "%%phoenix --new\nhello"):
        failed = _one_line(kernel.run(code))
        assert failed.startswith("phoenix: Could not save") and "read-only" in failed, failed
    assert _requests(fresh) == [], "nothing sent that could not be saved"
    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert after == before


def test_a_store_that_cannot_exist_is_one_line(
    fresh: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernels: list[Kernel]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    kernel = Kernel(tmp_path, fresh.base_url, extra_env={"PHOENIX_HOME": str(blocker / "store")})
    kernels.append(kernel)
    loaded = _load(kernel).strip()
    assert loaded.startswith(f"phoenix: its store {blocker / 'store'} (PHOENIX_HOME)"), loaded
    assert "does not exist and cannot be created" in loaded
    assert len(loaded.splitlines()) == 1
    for command in ("list", "help"):
        _clean(kernel.run(f"%phoenix {command}"))
    failed = _one_line(kernel.run("%%phoenix --new\nhello"))
    assert failed.startswith("phoenix: Could not save"), failed
    assert _requests(fresh) == []


def test_a_disk_that_fills_mid_turn_stops_the_turn_with_one_line(
    template: Path,
    fresh: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernels: list[Kernel],
) -> None:
    """The agent's own command fills the disk: its result cannot be saved, so it is never
    sent; the turn stops at rest with one line, and the next turn (space freed) goes on
    with the call answered as restore answers it."""
    _need_unshare()
    prepared = _copy(template, tmp_path / "prepared")
    home = tmp_path / "store"
    home.mkdir()
    wrap = (
        'mount -t tmpfs -o size=256k phoenix-full "$PHOENIX_HOME"; '
        f'cp -a {prepared}/. "$PHOENIX_HOME"/'
    )
    kernel = _start(tmp_path, fresh.base_url, monkeypatch, wrap)
    kernels.append(kernel)
    _load(kernel)
    # Checkpoints live in the store too; their own failure notice is theirs, not this test's.
    kernel.ok("%config Phoenix.checkpoints = False")
    fill = (
        f"head -c 400000 /dev/zero > {home}/filler 2>/dev/null; "
        "head -c 20000 /dev/zero | tr '\\0' x"
    )
    fresh.clear()
    fresh.script(Turn([text("Filling."), tool_use("bash", {"command": fill})]))
    _echo(fresh)
    cell = kernel.run("%%phoenix --name gamma --mode unrestricted\nfill the disk", timeout=60)
    failed = _one_line(cell)
    assert failed.startswith("phoenix: Could not save") and "the disk is full" in failed
    assert len(_requests(fresh)) == 1, "the unsaved result was never sent"
    state = kernel.run("%phoenix status gamma").text("stdout")
    assert "state         idle" in state.lower(), state
    kernel.ok(f"import os; os.remove({str(home / 'filler')!r})")
    _clean(kernel.run("%%phoenix --name gamma\nand now?"))
    body = _requests(fresh)[-1]
    assert _texts(body)[-1] == "and now?"
    results = [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert len(results) == 1 and results[0]["is_error"], results
