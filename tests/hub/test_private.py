"""Every user apart on a shared host: a new store is its user's alone, and a run
folder someone else made (or can enter) is refused, not used."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from phoenix_nb.sandbox.rundir import run_dir
from phoenix_nb.store import Store


def test_a_new_store_folder_is_private(tmp_path: Path) -> None:
    root = tmp_path / "a" / "phoenix"
    store = Store(root)
    try:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
    finally:
        store.close()


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_run_folder_others_can_enter_is_refused(tmpdir_here: Path) -> None:
    base = tmpdir_here / f"phoenix-{os.getuid()}"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    with pytest.raises(PermissionError, match="not this user's private folder"):
        run_dir()


def test_a_run_folder_planted_as_a_symlink_is_refused(tmpdir_here: Path) -> None:
    elsewhere = tmpdir_here / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmpdir_here / f"phoenix-{os.getuid()}").symlink_to(elsewhere)
    with pytest.raises(PermissionError, match="not this user's private folder"):
        run_dir()


def test_a_run_folder_of_its_own_is_used(tmpdir_here: Path) -> None:
    path = run_dir()
    assert path.parent == tmpdir_here / f"phoenix-{os.getuid()}"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
