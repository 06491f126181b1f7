"""The sandbox's face: its names are pinned, so adding or dropping one is deliberate.

The runtime, the notebook and the tools import only these (an import-linter
contract holds that); the child package exports nothing, as it is run and loaded
by file path, never imported by name from outside the sandbox.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import phoenix_nb.sandbox as sandbox
from phoenix_nb.sandbox import child


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert sandbox.__all__ == [
        "DEFAULT_DENY_READ",
        "KERNEL_REQUIREMENT",
        "MIN_ABI",
        "SANDBOX_ENV",
        "ChildCgroup",
        "ChildPolicy",
        "ExitReport",
        "Guarantee",
        "Hello",
        "LauncherHandle",
        "Process",
        "RunSpec",
        "SandboxError",
        "SandboxInfo",
        "SandboxLimits",
        "SandboxPolicy",
        "Started",
        "child_cgroup",
        "child_policy",
        "confine_forked_child",
        "credential_files",
        "describe_hidden",
        "detect_sandbox",
        "detect_sandbox_soon",
        "group_for",
        "guarantees",
        "hidden_paths",
        "launcher",
        "lost_guarantees",
        "namespaces_words",
        "numeric_buffers",
        "privatize_shared_mappings",
        "read_some",
        "remove_tree",
        "run_dir",
        "scrub_secrets",
        "start_process",
        "with_limits",
    ]
    for name in sandbox.__all__:
        assert getattr(sandbox, name) is not None, name
    assert child.__all__ == []


def test_the_launcher_script_runs_without_the_package() -> None:
    """`python -I child/launcher.py` loads its siblings by file path: with phoenix_nb
    unimportable it still gets as far as needing its sockets."""
    script = Path(child.__file__).with_name("launcher.py")
    code = (
        "import sys, runpy; sys.modules['phoenix_nb'] = None; "
        f"sys.argv = [{str(script)!r}]; "
        f"runpy.run_path({str(script)!r}, run_name='not_main'); print('LOADED')"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "LOADED" in done.stdout
