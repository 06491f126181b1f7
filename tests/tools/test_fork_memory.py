"""The fork's own memory after the scrub, read by a job (this process plays the kernel).

Copies of a secret sit in a 2 MB bytes object, a str that CPython stores four
bytes per character, a dict value, and a numeric NumPy array (whose buffer the
scrub deliberately does not search: README). The job knows the secret only
reversed (its own copy of the value would be starred too) and reports which
copies still hold it; afterwards this process — the kernel — still holds
every copy intact. Both search strategies are run: one pass over all needles
(NumPy) and one memmem pass per needle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.tools import fork_memory
from phoenix_nb.tools.kernel_fork import ChildSink, Emit, run_in_fork
from phoenix_nb.tools.kernel_port import DictKernel

SECRET = "sk-ant-api03-Fm4Tq9Lw2Zx7Nc5Vb8Hj1Kd6-Ps3"
REVERSED = SECRET[::-1]


def namespace() -> dict[str, Any]:
    return {
        "blob": b"\0" * (2 << 20) + SECRET.encode() + b"\0" * 16,
        "wide": "🔑 " + SECRET,
        "config": {"nested": {"value": "prefix-" + SECRET}},
        "numbers": np.frombuffer(SECRET.encode() * (1 << 16), dtype=np.uint8).copy(),
    }


def job(emit: Emit, _sink: ChildSink) -> None:
    value = REVERSED[::-1]
    ns = kernel_namespace
    emit(
        {
            "blob": value.encode() in ns["blob"],
            "wide": value in ns["wide"],
            "config": value in ns["config"]["nested"]["value"],
            "numbers": value.encode() in ns["numbers"].tobytes(),
        }
    )


kernel_namespace: dict[str, Any] = {}


@pytest.fixture(params=["one pass", "memmem per needle"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "one pass":
        monkeypatch.setattr(fork_memory, "_MEMMEM_MAX", 0)
    else:
        monkeypatch.setattr(fork_memory, "_MEMMEM_MAX", 1 << 30)
    yield request.param


async def test_every_copy_is_starred_except_inside_numeric_arrays(strategy: str) -> None:
    kernel_namespace.clear()
    kernel_namespace.update(namespace())
    kernel = DictKernel(namespace=kernel_namespace)
    outcome = await run_in_fork(
        job,
        port=kernel,
        env={},
        cwd="/",
        confine=False,
        secrets=SecretValues.of([SECRET]),
        report_scrub=True,
    )
    assert outcome.records, outcome.stderr
    assert outcome.records[0] == {
        "blob": False,
        "wide": False,
        "config": False,
        "numbers": True,  # a numeric array's buffer is the user's data: not searched
    }, strategy
    assert outcome.scrub is not None and outcome.scrub["overwritten"] >= 3
    assert outcome.scrub["skipped"] >= kernel_namespace["numbers"].nbytes
    # The kernel's own copies are untouched (copy-on-write).
    assert SECRET.encode() in kernel_namespace["blob"]
    assert kernel_namespace["wide"].endswith(SECRET)
    assert kernel_namespace["config"]["nested"]["value"] == "prefix-" + SECRET
