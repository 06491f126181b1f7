"""`%phoenix restrict` means now: write access ends for what already runs in the background.

Seen from outside the sandbox: the background job's processes (its shell, a child
it detached with `setsid`, a grandchild) are looked up by pid after the magic
returns; the file outside the folder they were appending to is checked; the store
and the model's next request are read for the note that names the stopped job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phoenix_nb.store import Store
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel, pid_alive

pytestmark = pytest.mark.timeout(120)


def _job(outside: Path) -> str:
    """A job that writes outside the folder forever from three processes, one detached."""
    pids, ticks = outside / "pids", outside / "ticks"
    loop = f"while :; do echo x >> {ticks}; sleep 0.01; done"
    return (
        f"echo $$ >> {pids}; "
        f"setsid sh -c 'echo $$ >> {pids}; {loop}' & "
        f"sh -c 'echo $$ >> {pids}; {loop}' & "
        "wait"
    )


def _pids(outside: Path) -> list[int]:
    path = outside / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _history(kernel: Kernel, slug: str) -> list[dict]:
    with Store(kernel.home) as store:
        conv = store.get_conversation(slug)
        assert conv is not None, slug
        return store.messages(conv["id"])


def test_restrict_stops_unrestricted_background_jobs_and_says_so(
    kern: Kernel, fake: FakeAnthropic, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = _job(outside)
    fake.script(
        Turn([tool_use("bash", {"command": command, "background": True})]),
        Turn([text("Started it.")]),
    )
    kern.ok("%%phoenix --name restrict-now --mode unrestricted\nstart the writer")
    kern.wait_until(lambda: len(_pids(outside)) == 3, 20, "the job's three processes")
    pids = _pids(outside)
    ticks = outside / "ticks"
    kern.wait_until(lambda: ticks.exists() and ticks.stat().st_size > 0, 20, "writes outside")
    assert all(pid_alive(p) for p in pids)

    said = kern.ok("%phoenix restrict").text()

    # The magic returns only once the job's whole tree is gone: checked at once,
    # with no grace period, so "Restricted" is true when the user reads it.
    alive = [p for p in pids if pid_alive(p)]
    assert not alive, f"still running after restrict: {alive}"
    assert "is now Restricted" in said and "Stopped 1 background job" in said, said
    assert "setsid sh -c" in said, "the cell names the job it stopped"
    size = ticks.stat().st_size
    kern.ok("1")  # one more round trip through the kernel: nothing writes any more
    assert ticks.stat().st_size == size

    notes = [
        m["content"]["text"]
        for m in _history(kern, "restrict-now")
        if m["message_type"] == "system"
    ]
    stopped = [n for n in notes if "Stopped 1 background job" in n]
    assert len(stopped) == 1, notes
    assert "Mode changed to Restricted" in stopped[0]
    assert "setsid sh -c" in stopped[0], "the note names the job by its command"

    fake.script(Turn([text("Understood.")]))
    cell = kern.ok("%%phoenix\nwhat changed?")
    body = json.dumps(fake.requests[-1].body)
    assert "Stopped 1 background job" in body, "the model is told which jobs were stopped"
    assert cell.status == "ok", cell.error()
