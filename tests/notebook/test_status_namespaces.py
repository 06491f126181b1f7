"""`%phoenix status` names the namespace tier a host (a pod) gives and why, through a
real kernel: PHOENIX_SANDBOX_NAMESPACES=off is reported as a choice, not as the kernel
refusing (the refusal's wording is tests/sandbox/test_namespace_words.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import loaded_kernel

pytestmark = pytest.mark.timeout(180)


def test_status_says_namespaces_are_off_by_choice(fake: FakeAnthropic, tmp_path: Path) -> None:
    if not detect_sandbox().available:
        pytest.fail("this machine has Restricted mode (NOTES.md): " + detect_sandbox().reason)
    fake.clear()
    env = {"PHOENIX_SANDBOX_NAMESPACES": "off"}
    with loaded_kernel(tmp_path, fake.base_url, extra_env=env) as kernel:
        fake.script(Turn([text("hello")]))
        kernel.ok("%%phoenix\nhi")
        status = kernel.ok("%phoenix status").text("stdout")
    [line] = [x for x in status.splitlines() if x.startswith("namespaces")]
    assert "namespaces off by choice: PHOENIX_SANDBOX_NAMESPACES=off" in line, status
    assert "refused" not in line
    assert "LOST " in status  # what that choice costs is listed under it
