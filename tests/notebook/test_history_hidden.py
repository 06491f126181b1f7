"""IPython's history is hidden from Restricted commands wherever IPython keeps it.

The kernel runs with its own ``IPYTHONDIR`` (as in many images) whose profile
config moves the running shell's history database elsewhere
(``c.HistoryManager.hist_file``); another profile under that IPYTHONDIR holds a
history database of its own. A cell assigns a password, so the running shell's
database holds it. The scripted model then sends Restricted bash commands that
read each database every way a command can (cat, a copy, Python's sqlite3).

Checked from outside: the tool results the fake server received hold the
password in no spelling (verbatim, reversed, hex, base64, percent), and the
databases themselves do hold it (the attack had something to find).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_fork_secrets import spellings_found
from tests.notebook.test_kernel_tools import result_of, text_of

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not detect_sandbox().available, reason="Restricted bash needs the sandbox"),
]

DB_PASSWORD = "Qz8-Hist-Wv3-Pm6-Kd1"
OTHER_PASSWORD = "Other-Profile-Xr4-Ty7"


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ipython-places")
    ipython_dir = root / "ipd"
    profile = ipython_dir / "profile_default"
    profile.mkdir(parents=True)
    moved = root / "elsewhere" / "cells.db"
    moved.parent.mkdir()
    (profile / "ipython_kernel_config.py").write_text(
        f"c.HistoryManager.hist_file = {str(moved)!r}\n"
    )
    other = ipython_dir / "profile_work" / "history.sqlite"
    other.parent.mkdir()
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE history (session, line, source, source_raw)")
        db.execute("INSERT INTO history VALUES (1, 1, ?, ?)", (OTHER_PASSWORD,) * 2)
    return {"ipython_dir": ipython_dir, "moved": moved, "other": other}


@pytest.fixture(scope="module")
def kernel_env(places: dict[str, Path]) -> Mapping[str, str]:
    return {"IPYTHONDIR": str(places["ipython_dir"])}


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    def setup(kernel: Kernel) -> None:
        kernel.ok(f'DB_PASSWORD = "{DB_PASSWORD}"')
        kernel.ok("get_ipython().history_manager.writeout_cache()")

    return setup


def test_a_restricted_command_reads_no_history_database(
    kern: Kernel, fake: FakeAnthropic, places: dict[str, Path]
) -> None:
    moved, other = places["moved"], places["other"]
    assert kern.eval("get_ipython().history_manager.hist_file") == str(moved)
    assert DB_PASSWORD.encode() in moved.read_bytes(), "the shell's database holds the cell"
    reads = {
        "cat": f"cat {moved} {moved}-journal {other} | base64 -w0; echo",
        "copy": f"cp {moved} ./copy.db && base64 -w0 ./copy.db; echo",
        "find": f"find {places['ipython_dir']} -name 'history.sqlite*' -exec base64 -w0 {{}} +",
        "sqlite": (
            'python3 -c "import sqlite3,sys\n'
            "for p in sys.argv[1:]:\n"
            "  try: print(sqlite3.connect(p).execute('select * from history').fetchall())\n"
            '  except Exception as e: print(p, e)" '
            f"{moved} {other} $IPYTHONDIR/profile_default/history.sqlite"
        ),
    }
    calls = {name: tool_use("bash", {"command": command}) for name, command in reads.items()}
    fake.script(Turn(list(calls.values())), Turn([text("Done.")]))
    cell = kern.run("%%phoenix --name hist\nRead the history.", timeout=200)
    assert cell.status == "ok", cell.error()
    assert len(fake.requests) == 2
    for name, call in calls.items():
        result = text_of(result_of(fake, call.id))
        for secret in (DB_PASSWORD, OTHER_PASSWORD):
            assert not spellings_found(secret, result), (name, result[:2000])
    denied = "".join(text_of(result_of(fake, calls[name].id)) for name in ("cat", "sqlite"))
    assert "Permission denied" in denied or "unable to open" in denied, denied[:2000]
