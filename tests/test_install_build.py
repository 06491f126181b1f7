"""The README's two commands build the JupyterLab extension once.

`pip install .` builds it into the source tree (pip builds in-tree); the second
command, `pip install ".[test]"`, must reuse that build rather than spend minutes on
the same output, yet rebuild whenever anything under `labextension/` changed. That
is hatch-jupyter-builder's staleness check, enabled by `source_dir`/`build_dir` in
pyproject.toml; .ci/run removes a build left in the tree, so CI still proves the
Node-free build. (Checked by hand: a second `pip wheel .` logs "No build required"
and the wheel still carries the extension.)
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _builder() -> dict:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hook: dict = pyproject["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    return hook


def test_the_second_install_reuses_a_build_that_is_not_stale() -> None:
    hook = _builder()
    kwargs = hook["build-kwargs"]
    # The folder the ensured targets are built into.
    assert all(t.startswith(kwargs["build_dir"] + "/") for t in hook["ensured-targets"])
    # Staleness is judged on the whole package folder (src/, style/, package.json, …).
    assert kwargs["source_dir"] == kwargs["path"] == "labextension"
    # A developer's editable install always rebuilds.
    assert "source_dir" not in hook["editable-build-kwargs"]


def test_ci_builds_the_extension_itself_before_the_readme_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = 'pip install ".[test]" && python -m pytest -q'
    assert command in readme and command in script
    removal = script.index("rm -rf phoenix_nb/labextension")
    assert removal < script.index(command)
