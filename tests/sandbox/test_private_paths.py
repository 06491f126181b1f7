"""The stores the environment names are part of the policy value, read when it is built.

A command's hidden paths come from its conversation's policy, not from the
environment at the moment the command starts: a policy built while
$PHOENIX_HOME named one store keeps hiding that store, and a later change of
the variable does not reach a policy already handed out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb import sandbox


def test_a_policy_hides_the_store_named_when_it_was_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, later = tmp_path / "store-a", tmp_path / "store-b"
    first.mkdir()
    later.mkdir()
    monkeypatch.setenv("PHOENIX_HOME", str(first))
    policy = sandbox.SandboxPolicy()
    monkeypatch.setenv("PHOENIX_HOME", str(later))

    hidden = sandbox.hidden_paths(tmp_path / "project", policy)
    assert str(first) in hidden
    assert str(later) not in hidden
    # a policy built now names the store the environment names now
    assert str(later) in sandbox.hidden_paths(tmp_path / "project", sandbox.SandboxPolicy())
