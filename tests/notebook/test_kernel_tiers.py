"""Every tool, through a real kernel, in whichever tier the suite runs (issue 34).

The same module runs as root and, from .ci/run, as an ordinary user with and
without a cgroup delegated to it (``tests/nonroot/tier.py``). As an ordinary
user on this kind of machine every Restricted command used to hang (a non-root
spare could not write its namespace's id maps) and run_python failed at once
(the confined fork could not open its own pagemap for the secret scrub).

What the other side shows is checked: the uid the command saw is the kernel's
own, the planted word is found in the file it was planted in, the value the
fork computed, and whether the conversation's cgroup budget held (a command
allocating past ``c.Phoenix.sandbox_memory`` is stopped with ``[limit hit: …]``
in the tiers with cgroups; the status says which).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from phoenix_nb.demo.turns import ToolUseSpec
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_tools import result_of, text_of
from tests.tiers import TIER, cgroups_expected, needs_cgroup

pytestmark = [
    pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock"),
    pytest.mark.timeout(240),
]

# A tool's command starts within seconds on a idle machine; this bound only tells a
# hang (the cell never finishes) from a slow start on a machine with load 8.
TURN_BOUND = 90.0
SECRET = "sk-tier-" + "7q" * 12


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    def setup(kernel: Kernel) -> None:
        (kernel.project / "notes.txt").write_text("alpha\nthe zanzibar-tier word\nomega\n")
        kernel.ok(f"API_TOKEN = {SECRET!r}\nprint('ready')")

    return setup


def _turn(kern: Kernel, fake: FakeAnthropic, call: ToolUseSpec) -> str:
    """One %%phoenix turn whose model calls one tool; the tool result the model got."""
    fake.script(Turn([call]), Turn([text("done")]))
    started = time.monotonic()
    cell = kern.run("%%phoenix --new\nGo.", timeout=TURN_BOUND)
    assert cell.status == "ok", (cell.error(), time.monotonic() - started)
    assert len(fake.requests) == 2, cell.text()
    return text_of(result_of(fake, call.id))


def test_a_restricted_command_returns_its_output_and_uid(kern: Kernel, fake: FakeAnthropic) -> None:
    call = tool_use("bash", {"command": "echo tier-$((6 * 7)); id -u"})
    result = _turn(kern, fake, call)
    assert "tier-42" in result, result
    assert str(os.geteuid()) in result.split(), (TIER, result)


def test_a_background_job_runs_and_its_log_holds_its_output(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    call = tool_use("bash", {"command": "echo bg-$((5 * 5)); id -u", "background": True})
    result = _turn(kern, fake, call)
    found = re.search(r"Output goes to (\S+)", result)
    assert found is not None, result
    log = Path(found.group(1))
    want = [b"bg-25", str(os.geteuid()).encode()]
    deadline = time.monotonic() + TURN_BOUND
    while time.monotonic() < deadline and log.read_bytes().split() != want:
        kern.pump(0.2)  # a bounded wait for the job's output, not a sleep standing in for it
    assert log.read_bytes().split() == want


def test_keyword_search_finds_the_planted_word(kern: Kernel, fake: FakeAnthropic) -> None:
    call = tool_use("keyword_search", {"query": "the word", "search_terms": ["zanzibar-tier"]})
    result = _turn(kern, fake, call)
    assert "notes.txt" in result and "zanzibar-tier" in result, result


def test_run_python_returns_its_value_and_no_planted_key(kern: Kernel, fake: FakeAnthropic) -> None:
    """The job reads every readable mapping of its own memory (ctypes: the confined,
    non-dumpable fork may not open /proc/self/mem) for the kernel's secret-named value."""
    code = (
        "import ctypes\n"
        # No heap trimming while it is read: a mapping listed must stay mapped.
        "ctypes.CDLL(None).mallopt(-1, 0x7FFFFFFF)\n"
        f"needle = bytes(reversed({SECRET[::-1].encode()!r}))\n"
        "hits = 0\n"
        "maps = open('/proc/self/maps').read().splitlines()\n"
        "for line in maps:\n"
        "    addr, perms, *rest = line.split()\n"
        "    path = rest[3] if len(rest) > 3 else ''\n"
        "    if perms[0] != 'r' or path in ('[vvar]', '[vsyscall]', '[vvar_vclock]'):\n"
        "        continue\n"
        "    if path.startswith('/') and perms[1] != 'w':\n"
        "        continue  # a file's own pages: what is on disk\n"
        "    lo, hi = (int(x, 16) for x in addr.split('-'))\n"
        "    for at in range(lo, hi, 1 << 22):\n"
        "        hits += ctypes.string_at(at, min(1 << 22, hi - at)).count(needle)\n"
        "print('value', 6 * 7, 'hits', hits - 1)\n"  # the needle itself is one
    )
    result = _turn(kern, fake, tool_use("run_python", {"code": code, "timeout": 120}))
    assert "value 42 hits 0" in result, result


def test_status_says_whether_the_budgets_hold(kern: Kernel) -> None:
    status = kern.ok("%phoenix status").text("stdout")
    if cgroups_expected():
        assert "holds  whole-tree memory and process limits: cgroup v" in status, status
    else:
        assert "LOST   whole-tree memory and process limits" in status, status


@needs_cgroup
def test_a_command_past_the_memory_budget_is_stopped(kern: Kernel, fake: FakeAnthropic) -> None:
    kern.ok("%config Phoenix.sandbox_memory = 256 << 20")
    hog = "python3 -c 'b = bytearray(160 << 20); import time; time.sleep(3)'"
    call = tool_use("bash", {"command": f"{hog} & {hog} & {hog} & wait; exit 0", "timeout": 60})
    try:
        result = _turn(kern, fake, call)
    finally:
        kern.ok("%config Phoenix.sandbox_memory = 4 << 30")  # the default
    assert "[limit hit: memory" in result, result
