"""Run a benchmark as root and as an ordinary user in one go; print the two side by side.

Issue 34: the figures that matter to most users are an ordinary user's (no
cgroup of its own, its own user namespace). A benchmark script calls
``run_in_both_tiers(__file__)`` first thing under ``__main__``: run as root, it
runs the script twice more, as root and as the user ``tests/nonroot/tier.py``
makes (its venv from /usr/bin/python3), one after the other so neither run's
load falls on the other, and prints each run's lines with the differing ones
paired, ``root │`` over ``user │``. Each run's ratios are against baselines
measured in that same run. Returns False (run normally) in either child, or
where that is not possible (not root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from itertools import zip_longest
from pathlib import Path

from tests.nonroot.tier import REPO, ensure_user, user_venv

__all__ = ["run_in_both_tiers"]

CHILD = "PHOENIX_BENCH_TIER"
USER = "phxuser"


def run_in_both_tiers(script: str) -> bool:
    """True once both runs are printed; False: the caller runs the benchmark itself."""
    if os.environ.get(CHILD) or os.geteuid() != 0 or not Path("/usr/bin/python3").exists():
        return False
    argv = [str(Path(script).resolve()), *sys.argv[1:]]
    root = subprocess.run(
        [sys.executable, *argv], env={**os.environ, CHILD: "root"}, capture_output=True, text=True
    )
    user = ensure_user(USER)
    python = user_venv(REPO / ".ci" / "user-venv")
    env = {
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        CHILD: "user",
    }
    command = [
        shutil.which("runuser") or "/usr/sbin/runuser",
        "-u",
        user.pw_name,
        "--",
        str(python),
        *argv,
    ]
    ordinary = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    print(f"{Path(script).name}: root, then the ordinary user {USER!r} (no cgroup of its own)")
    for a, b in zip_longest(root.stdout.splitlines(), ordinary.stdout.splitlines(), fillvalue=""):
        if a == b:
            print(f"     │ {a}")
        else:
            print(f"root │ {a}\nuser │ {b}")
    for name, run in (("root", root), ("user", ordinary)):
        if run.returncode:
            print(f"{name} run failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return True
