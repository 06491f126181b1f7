"""The notebooks run headless, offline, with the demo model .

Both checks run as a user or CI would, in subprocesses: `jupyter nbconvert
--execute` on the quickstart, and nbval on both notebooks. No API key and no
network: the kernel falls back to the demo model, which drives real tools in
a copy of the sample project. The notebooks are copied to a temporary folder
first, so the run writes nothing into the work tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MIME = "application/vnd.phoenix.conversation+json"
RUN_TIMEOUT = 240


def offline_env(home: Path) -> dict[str, str]:
    """No key, no base URL, no model override: the demo model is the default."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "PHOENIX_MODEL")
    }
    env["PHOENIX_HOME"] = str(home)
    env["PHOENIX_DEMO_PACE"] = "0"
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    target = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, target, ignore=shutil.ignore_patterns("scratch", "__pycache__"))
    return target


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def joined(value: str | list[str]) -> str:
    """nbformat stores multi-line strings as lists of lines on disk."""
    return value if isinstance(value, str) else "".join(value)


def phoenix_records(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        output["data"][MIME]
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
        if MIME in output.get("data", {})
    ]


def test_quickstart_executes_offline_and_shows_the_whole_conversation(
    workdir: Path, tmp_path: Path
) -> None:
    env = offline_env(tmp_path / "home")
    jupyter = [sys.executable, "-m", "jupyter"]
    run(
        [
            *jupyter,
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "quickstart.ipynb",
            "--output",
            "quickstart.out.ipynb",
        ],
        workdir,
        env,
    )
    notebook = json.loads((workdir / "quickstart.out.ipynb").read_text())
    errors = [
        o for c in notebook["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"
    ]
    assert not errors
    records = phoenix_records(notebook)
    assert records, "the %%phoenix cells displayed conversation records"
    assert {r["conversation"]["model"] for r in records} == {"demo"}
    shown = json.dumps(records, ensure_ascii=False)
    assert "The tests of this project fail. Find out why and fix it." in shown  # user text
    assert "[demo model — scripted, offline]" in shown and "No ANTHROPIC_API_KEY" in shown
    for command in ("ls -F", "python -m unittest", "cat -n shop/pricing.py"):
        assert command in shown, f"tool call {command!r} shown"
    assert '"name": "keyword_search"' in shown
    assert '"kind": "approval"' in shown and "request_mode_upgrade" in shown
    assert "+    if quantity >= BULK_THRESHOLD:" in shown  # the diff
    assert "All 6 tests pass now" in shown  # the final answer
    fallbacks = "".join(
        joined(o["data"].get("text/html", ""))
        for c in notebook["cells"]
        for o in c.get("outputs", [])
        if MIME in o.get("data", {})
    )
    assert "All 6 tests pass now" in fallbacks, "the shared notebook renders without a kernel"
    # The whole conversation once: approve and history cells add only what is new.
    plain = [
        joined(o["data"]["text/plain"])
        for c in notebook["cells"]
        for o in c.get("outputs", [])
        if MIME in o.get("data", {})
    ]
    for once in ("All 6 tests pass now", "+    if quantity >= BULK_THRESHOLD:", "$ ls -F"):
        assert sum(p.count(once) for p in plain) == 1, once
    assert not any(
        o.get("data") == {"text/plain": ""} for c in notebook["cells"] for o in c.get("outputs", [])
    )
    assert "widgets" not in notebook["metadata"], "no widget state from a headless run"
    # A run's outputs stay light: at most half of what the notebook once weighed.
    size = (workdir / "quickstart.out.ipynb").stat().st_size
    assert size <= 252_584 // 2, size
    stdout = "".join(
        joined(o.get("text", "")) for c in notebook["cells"] for o in c.get("outputs", [])
    )
    assert "tests of the copy: FAILED (failures=2)" in stdout
    assert "tests of the copy: OK" in stdout
    assert (NOTEBOOKS / "sample_project/shop/pricing.py").read_text().count(
        "quantity > BULK_THRESHOLD"
    ) == 1, "the shipped sample stays buggy"


def _files(root: Path) -> set[str]:
    """Every file under `root` but the notebooks' scratch folder and pytest's own."""
    skip = ("scratch", ".pytest_cache", "__pycache__", ".ipynb_checkpoints")
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not any(part in skip for part in path.relative_to(root).parts)
    }


def test_nbval_as_a_user_types_it_passes_twice_from_a_fresh_copy(tmp_path: Path) -> None:
    """`pytest --nbval-lax notebooks/` (twice: the second run finds the first one's
    scratch/ copies) and `pytest --nbval notebooks/*.ipynb`, from the root of a fresh
    copy of the repository's notebooks and pytest configuration; the runs leave nothing
    new beside the notebooks (the tour's export goes to the ignored scratch/)."""
    root = tmp_path / "clone"
    shutil.copytree(
        NOTEBOOKS,
        root / "notebooks",
        ignore=shutil.ignore_patterns("scratch", "__pycache__", "*.out.ipynb"),
    )
    shutil.copy(NOTEBOOKS.parent / "pyproject.toml", root / "pyproject.toml")
    before = _files(root)
    env = offline_env(tmp_path / "home")
    pytest_ = [sys.executable, "-m", "pytest", "-q"]
    for _ in range(2):
        done = run([*pytest_, "--nbval-lax", "notebooks/"], root, env)
        assert " passed" in done.stdout and "failed" not in done.stdout, done.stdout[-2000:]
        assert "sample_project" not in done.stdout, "the sample project's tests are not collected"
        assert _files(root) == before, "nothing new beside the notebooks"
    notebooks = sorted(str(p.relative_to(root)) for p in (root / "notebooks").glob("*.ipynb"))
    assert notebooks == ["notebooks/quickstart.ipynb", "notebooks/tour.ipynb"]
    done = run([*pytest_, "--nbval", *notebooks], root, env)
    assert " passed" in done.stdout and "failed" not in done.stdout, done.stdout[-2000:]
    assert _files(root) == before


def test_tour_names_each_export_option_once() -> None:
    """The tour's prose shows `%phoenix export` as it is typed: one --format, one --output."""
    tour = json.loads((NOTEBOOKS / "tour.ipynb").read_text())
    prose = "".join(joined(c["source"]) for c in tour["cells"] if c["cell_type"] == "markdown")
    commands = [part for part in prose.split("`") if part.startswith("%phoenix export")]
    assert commands
    for command in commands:
        assert command.count("--output") <= 1 and command.count("--format") <= 1, command
