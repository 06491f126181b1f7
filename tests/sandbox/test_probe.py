"""Sandbox detection started early on a thread (`%load_ext`), answered once to every caller.

A fresh interpreter (detection is once per process): callers arriving while the
probe `detect_sandbox_soon()` started is under way (or before it began) all get
the answer of one probe — one answer object, one launcher. (That `%load_ext`
no longer waits for it is a time, shown by tests/benchmarks/bench_startup.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, threading
    from pathlib import Path
    from phoenix_nb import sandbox
    from phoenix_nb.sandbox import probe

    calls = []
    real = probe._probe
    def counted():
        calls.append(threading.current_thread().name)
        return real()
    probe._probe = counted  # counts probes; the probe itself is the real one

    sandbox.detect_sandbox_soon()
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(sandbox.detect_sandbox()))
               for _ in range(4)]
    for t in threads:
        t.start()
    answers.append(sandbox.detect_sandbox())
    for t in threads:
        t.join()
    def launcher_of_mine(p):
        # A process can exit between the listing and the reads (the launcher's
        # spares fork short-lived helpers; a loaded machine runs many others).
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes()
            ppid = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            return False
        return b"sandbox/child/launcher.py" in cmdline and ppid == str(os.getpid())
    launchers = [p for p in os.listdir("/proc") if p.isdigit() and launcher_of_mine(p)]
    print(json.dumps({
        "probes": calls, "same": all(a is answers[0] for a in answers),
        "answers": len(answers), "launchers": len(launchers),
        "available": answers[0].available,
    }))
    """
)


def test_early_detection_runs_once_and_every_caller_gets_its_answer() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    assert len(result["probes"]) == 1, result
    assert result["answers"] == 5 and result["same"], result
    assert result["launchers"] <= 1, result


@pytest.mark.timeout(120)
def test_in_a_kernel_without_the_sandbox_the_first_phoenix_cell_says_so_once(
    tmp_path: Path,
) -> None:
    """`%load_ext` only starts the detection; the first cell that uses phoenix (not an
    ordinary cell before it) says the sandbox is unavailable, and no later one repeats it."""
    from phoenix_nb.testing import FakeAnthropic
    from tests.notebook.kernel_harness import loaded_kernel

    warning = "phoenix: the kernel sandbox (Landlock) is unavailable here"
    with (
        FakeAnthropic() as fake,
        loaded_kernel(tmp_path, fake.base_url, extra_env={"PHOENIX_SANDBOX": "off"}) as kern,
    ):
        ordinary = kern.ok("x = 1\nprint(x)").text()
        first = kern.ok("%phoenix status").text("stdout")
        second = kern.ok("%phoenix status").text("stdout")
        loaded = kern.executions[next(iter(kern.executions))].text()
    assert warning not in loaded + ordinary, (loaded, ordinary)
    assert first.startswith(warning) and "PHOENIX_SANDBOX=off" in first.splitlines()[0], first
    assert warning not in second, second
