"""papermill runs both shipped notebooks offline (the demo model), as a user types it.

`papermill notebooks/quickstart.ipynb out.ipynb` exits 0. The tour fails two cells on
purpose (tagged `raises-exception`, so the agent has a real traceback to read); papermill
2.7 reports any error output whatever the tags, so for the tour this checks that the run
reaches the end and that every error papermill saw is one of those tagged cells.
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


def test_papermill_runs_the_tour_to_its_end(tmp_path: Path) -> None:
    done, notebook = _papermill(tmp_path, "tour")
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    failing = [
        c for c in code if any(o.get("output_type") == "error" for o in c.get("outputs", []))
    ]
    tagged = [c for c in failing if "raises-exception" in c["metadata"].get("tags", [])]
    assert failing == tagged, "only the tour's deliberate failures fail"
    assert done.returncode in (0, 1), done.stderr[-3000:]
    if done.returncode == 1:  # papermill ignores raises-exception tags (2.7)
        assert "PapermillExecutionError" in done.stderr
    assert code[-1].get("execution_count") is not None, "the run reached the last cell"
    assert phoenix_records(notebook), "the tour's turns ran"
