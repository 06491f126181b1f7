"""`c.Phoenix.checkpoint_*` reach the checkpoint executor unchanged."""

from __future__ import annotations

from pathlib import Path

from traitlets.config import Config

from phoenix_nb.notebook.session import PhoenixConfig, Session


def test_traitlets_reach_the_executor(tmp_path: Path) -> None:
    c = Config()
    c.Phoenix.home = str(tmp_path / "home")
    c.Phoenix.model = "demo"
    c.Phoenix.checkpoints = False
    c.Phoenix.checkpoint_max_file_size = 12345
    c.Phoenix.checkpoint_keep_days = 2.5
    c.Phoenix.checkpoint_max_bytes = 999
    session = Session(PhoenixConfig(config=c), cwd=tmp_path)
    config = session.phoenix.worktree.config
    assert (config.enabled, config.max_file_size, config.keep_days, config.max_bytes) == (
        False,
        12345,
        2.5,
        999,
    )
    assert session.phoenix.worktree.root == tmp_path / "home" / "checkpoints"
