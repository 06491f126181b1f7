"""Scratch projects for checkpoint tests: the user's git, and byte snapshots to compare.

Shared by tests/checkpoints/ and tests/notebook/test_kernel_revert.py: both
build a project holding a user `.git` and check that a revert leaves the
working tree exactly as it was and the user's repository byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path


def tree_state(root: Path) -> dict[str, tuple[str, str]]:
    """Everything a revert must bring back, outside every `.git`:
    file path -> (permission bits or "link", sha256 of the bytes or the link target),
    folder path + "/" -> (permission bits, "dir")."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs:
            path = Path(dirpath) / name
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                out[path.relative_to(root).as_posix() + "/"] = (
                    oct(stat.S_IMODE(st.st_mode)),
                    "dir",
                )
        for name in files:
            if name == ".git":
                continue  # a worktree's or submodule's .git file
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            else:
                out[rel] = (
                    oct(stat.S_IMODE(st.st_mode)),
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                )
    return out


def git_dir_state(git_dir: Path) -> dict[str, str]:
    """Every file of a .git folder and its sha256: the user's repository, byte for byte."""
    return {
        p.relative_to(git_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(git_dir.rglob("*"))
        if p.is_file()
    }


def user_git(repo: Path, *args: str) -> str:
    """git as the user runs it in their repository (no system config, a fixed identity)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "u",
        "GIT_AUTHOR_EMAIL": "u@x",
        "GIT_COMMITTER_NAME": "u",
        "GIT_COMMITTER_EMAIL": "u@x",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return done.stdout.decode()
