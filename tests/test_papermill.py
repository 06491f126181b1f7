"""papermill runs both shipped notebooks offline (the demo model), as a user types it.

`papermill notebooks/quickstart.ipynb out.ipynb` and `papermill notebooks/tour.ipynb
out.ipynb` exit 0. The tour fails two cells on purpose (the agent has a real traceback to
read): they start with `%%phoenix_fails` (notebook/fails.py), because papermill 2.7 fails a
run on any `error` output whatever a `raises-exception` tag says.
Both run in a fresh copy of the notebooks, in subprocesses, with no API key.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_quickstart import NOTEBOOKS, RUN_TIMEOUT, offline_env, phoenix_records

pytestmark = pytest.mark.timeout(2 * RUN_TIMEOUT)


def _papermill(tmp_path: Path, name: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    work = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns("scratch", "__pycache__"))
    out = tmp_path / f"{name}.out.ipynb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(work / f"{name}.ipynb"),
            str(out),
            "--cwd",
            str(work),
            "-k",
            "python3",
        ],
        cwd=work,
        env=offline_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    return done, json.loads(out.read_text(encoding="utf-8"))


def test_papermill_runs_the_quickstart_with_exit_0(tmp_path: Path) -> None:
    done, notebook = _papermill(tmp_path, "quickstart")
    assert done.returncode == 0, done.stderr[-3000:]
    records = phoenix_records(notebook)
    assert records, "the quickstart's turns ran and left their records"
    assert all(not r["conversation"]["state"].get("busy") for r in records)


def test_papermill_runs_the_tour_with_exit_0_and_its_failing_cells_still_tell_the_story(
    tmp_path: Path,
) -> None:
    """The tour's two failing cells start with `%%phoenix_fails`: their traceback shows on
    stderr (no `error` output, which papermill 2.7 fails on whatever the tags say), and the
    agent still reads each one as the kernel's last error: the kernel scene finds the
    decimal comma in the traceback's locals, and the cell-fix scene names the cell."""
    done, notebook = _papermill(tmp_path, "tour")
    assert done.returncode == 0, done.stderr[-3000:]
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert not [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert code[-1].get("execution_count") is not None, "the run reached the last cell"
    failing = [c for c in code if "".join(c["source"]).startswith("%%phoenix_fails\n")]
    assert len(failing) == 2
    for cell, error in zip(failing, ("ValueError", "KeyError"), strict=True):
        shown = "".join(
            "".join(o.get("text", "")) for o in cell["outputs"] if o.get("name") == "stderr"
        )
        assert f"{error}" in shown and "Traceback" in shown, shown
    said = [json.dumps(r) for r in phoenix_records(notebook)]
    assert any("Found it" in s and "1,20" in s for s in said), "the kernel scene read the traceback"
    fix_prompt = f"In [{failing[1]['execution_count']}]` is the cell that failed"
    assert any(fix_prompt in s for s in said), "the cell-fix scene found the failing cell"
