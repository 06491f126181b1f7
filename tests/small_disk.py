"""A real full disk for tests: a small tmpfs seen only by one child process.

The child runs inside a private mount namespace (`unshare --mount`, CI runs as
root) where `mountpoint` is a tmpfs of `size`; the namespace and its mount end
with the child, so nothing is left mounted and the folder is empty again after.
`fill()` is run by the child to use up that filesystem, leaving `free` bytes.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_on_small_tmpfs(
    mountpoint: Path, size: str, args: list[str], timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    """Run `python *args` (from the repository root) with `mountpoint` a tmpfs of `size`."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("this test needs root and unshare (CI runs as root)")
    mountpoint.mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" phoenix-small "$2" && shift 2 && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]
    result = subprocess.run(
        [*argv, size, str(mountpoint), sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert not any(mountpoint.iterdir()), "the tmpfs was only ever visible to the child"
    return result


def fill(folder: Path, free: int = 0) -> None:
    """Fill the filesystem holding `folder` (a file `filler` in it), then give back `free`
    bytes; fails unless the disk really ended full (ENOSPC)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (65536, 512):
            try:
                while True:
                    os.write(fd, b"x" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - free))
    finally:
        os.close(fd)
