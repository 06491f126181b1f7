"""The fork's own memory after the scrub, read by a job (this process plays the kernel).

Copies of a secret sit in a 2 MB bytes object, a str that CPython stores four
bytes per character, a dict value, and a numeric NumPy array (whose buffer the
scrub deliberately does not search: README). The job knows the secret only
reversed (its own copy of the value would be starred too) and reports which
copies still hold it; afterwards this process — the kernel — still holds
every copy intact. Both search strategies are run: one pass over all needles
(NumPy) and one memmem pass per needle, and both ways of finding the pages in
use (mincore; the pagemap, as with swap on). Pages the kernel wrote and then
made read-only or inaccessible are starred too (a job may mprotect them).
Last, a service-account key file named by GOOGLE_APPLICATION_CREDENTIALS: its
private key, held by the kernel under an ordinary name, is starred in
run_python's fork.
"""

from __future__ import annotations

import ctypes
import mmap
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.sandbox import fork_memory
from phoenix_nb.tools.kernel.fork import ChildSink, Emit, ForkLimits, run_in_fork, sandbox_ready
from phoenix_nb.tools.kernel_port import DictKernel
from tests.seeds import phoenix_seed

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
        confine=None,
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


async def test_with_swap_the_pagemap_finds_the_same_copies(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With swap, mincore would call a swapped-out page absent: the pagemap is read instead.
    monkeypatch.setattr(fork_memory, "_swap_on", lambda: True)
    await test_every_copy_is_starred_except_inside_numeric_arrays(strategy)


@pytest.mark.skipif(not sandbox_ready(), reason="run_python needs the sandbox")
async def test_a_service_account_key_is_scrubbed_wherever_the_kernel_holds_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from phoenix_nb.tools.kernel import RunPythonTool
    from tests.tools.kernel_stand_in import stand_in

    line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vb8nM3qW6eR1tY4u"
    pem = f"-----BEGIN PRIVATE KEY-----\n{line}\n-----END PRIVATE KEY-----\n"
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({"type": "service_account", "private_key": pem}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    # An SDK that loaded the key keeps it under names phoenix cannot guess.
    _kernel, ctx = stand_in({"client": {"signer": pem}, "copy": line[::-1]})
    code = "print(client['signer'][::-1]); print(copy[::-1] in client['signer'])"
    result = await RunPythonTool().run({"code": code}, ctx, "t")
    assert not result.is_error, result.content
    assert line not in result.content and line[::-1] not in result.content
    assert "False" in result.content  # the fork's copy of the key no longer holds the line


def _protected_copies() -> list[tuple[int, int]]:
    """Two private anonymous pages holding SECRET: one made read-only, one inaccessible."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int)
    libc.mmap.argtypes += (ctypes.c_int, ctypes.c_long)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    pages = []
    for prot in (mmap.PROT_READ, 0):
        at = libc.mmap(None, mmap.PAGESIZE, 3, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        assert at not in (None, ctypes.c_void_p(-1).value)
        ctypes.memmove(at + 100, SECRET.encode(), len(SECRET))
        assert libc.mprotect(at, mmap.PAGESIZE, prot) == 0
        pages.append((at, prot))
    return pages


def protected_job(emit: Emit, _sink: ChildSink) -> None:
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    value = REVERSED[::-1].encode()
    found = []
    for at, _prot in kernel_namespace["pages"]:
        libc.mprotect(at, mmap.PAGESIZE, mmap.PROT_READ)  # the job may do this too
        found.append(value in ctypes.string_at(at, mmap.PAGESIZE))
    emit({"found": found})


async def test_memory_protected_after_it_was_written_is_scrubbed_too(strategy: str) -> None:
    # A job can mprotect any mapping of its own readable: a page the kernel wrote and
    # then made read-only or inaccessible is as readable as the heap.
    pages = _protected_copies()
    kernel_namespace.clear()
    kernel_namespace["pages"] = pages
    outcome = await run_in_fork(
        protected_job,
        port=DictKernel(namespace=kernel_namespace),
        env={},
        cwd="/",
        confine=None,
        secrets=SecretValues.of([SECRET]),
    )
    assert outcome.records == [{"found": [False, False]}], (strategy, outcome.stderr)
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for at, _prot in pages:  # the kernel's own pages are untouched
        libc.mprotect(at, mmap.PAGESIZE, mmap.PROT_READ)
        assert SECRET.encode() in ctypes.string_at(at, mmap.PAGESIZE)


SHORT = "pw-7Qz!x9K"  # 8 to 14 bytes: found through 4-byte windows
SHORT_REVERSED = SHORT[::-1]  # the fork stars SHORT itself


def short_job(emit: Emit, _sink: ChildSink) -> None:
    view = kernel_namespace["view"]
    emit({"found": SHORT_REVERSED[::-1].encode() in view.base.tobytes()})


async def test_a_short_secret_right_after_a_skipped_array_is_starred(strategy: str) -> None:
    # The array's buffer is left out, so the searched range begins at an odd byte,
    # 1 byte before the secret: the windows there must still be read.
    buffer = np.full((2 << 20) + 64, 7, dtype=np.uint8)  # written: every page resident
    size = (2 << 20) + (3 - buffer.ctypes.data) % 8  # the range starts at 8k+3, the secret 8k+4
    buffer[size + 1 : size + 1 + len(SHORT)] = np.frombuffer(SHORT.encode(), dtype=np.uint8)
    kernel_namespace.clear()
    kernel_namespace["view"] = buffer[:size]  # skipped: an exact ndarray of 1 MB or more
    outcome = await run_in_fork(
        short_job,
        port=DictKernel(namespace=kernel_namespace),
        env={},
        cwd="/",
        confine=None,
        secrets=SecretValues.of([SHORT]),
        report_scrub=True,
    )
    assert outcome.records == [{"found": False}], (strategy, outcome.stderr)
    assert outcome.scrub is not None and outcome.scrub["skipped"] >= size
    assert SHORT.encode() in buffer.tobytes()  # the kernel's copy is untouched


def _random_needles(rng: random.Random) -> list[str]:
    """Secrets of every length class the search treats apart (8-14: 4-byte windows)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_"
    lengths = (8, 9, 11, 14, 15, 16, 17, 23, 40, 108)
    values = {"".join(rng.choice(alphabet) for _ in range(n)) for n in lengths for _ in range(4)}
    return sorted(values)


def planted_job(emit: Emit, _sink: ChildSink) -> None:
    blob = kernel_namespace["blob"]
    left = [value[::-1] for value in kernel_namespace["reversed"] if value[::-1].encode() in blob]
    emit({"left": len(left)})


async def test_every_planted_copy_at_every_alignment_is_starred(strategy: str) -> None:
    # Copies of 40 secrets of every length class at random byte offsets (every alignment
    # to 4 and 8 bytes), some side by side, in 3 MB of random bytes.
    rng = random.Random(phoenix_seed())
    values = _random_needles(rng)
    blob = bytearray(rng.randbytes(3 << 20))
    for _ in range(2000):
        copy = rng.choice(values).encode()
        at = rng.randrange(len(blob) - len(copy))
        blob[at : at + len(copy)] = copy
    for value in values:  # at least one untouched copy of each
        at = rng.randrange(len(blob) - 200)
        blob[at : at + len(value)] = value.encode()
    kernel_namespace.clear()
    kernel_namespace["blob"] = bytes(blob)
    kernel_namespace["reversed"] = [value[::-1] for value in values]
    outcome = await run_in_fork(
        planted_job,
        port=DictKernel(namespace=kernel_namespace),
        env={},
        cwd="/",
        confine=None,
        secrets=SecretValues.of(values),
        # Correctness, not speed: memmem for every needle over the test process's heap
        # outlived the 30 s default on a saturated machine.
        limits=ForkLimits(timeout=300.0),
    )
    assert outcome.records == [{"left": 0}], (strategy, phoenix_seed(), outcome.stderr)
    assert all(value.encode() in kernel_namespace["blob"] for value in values)
