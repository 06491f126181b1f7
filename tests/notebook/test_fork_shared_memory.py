"""Shared memory the kernel holds stays shared with nobody: a fork cannot write through it.

A real kernel maps, with libc's own `mmap`, four shared mappings of different
protections: a file opened `r+b` mapped PROT_READ (what `mmap(ACCESS_READ)`
does), a file mapped read-write, an anonymous shared mapping made read-only
after it was filled, and an anonymous read-write one. A `run_python` job then
tries every route to write through each: `mprotect` to read-write and a
store, a write through `/proc/self/mem` (which ignores protections),
`madvise(MADV_REMOVE)` (drops the shared pages, so the kernel would read
zeros), and `mremap` to a new address followed by a store.

Checked from outside the fork: each file's bytes on disk, the kernel's view
of each mapping (read in the kernel afterwards), and that the kernel still
runs cells.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_tools import result_of, text_of

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox"),
]

CONTENT = {"ro_file": b"kernel-ro-file-" * 300, "rw_file": b"kernel-rw-file-" * 300}
MEMORY = {"ro_anon": b"kernel-ro-anon-" * 300, "rw_anon": b"kernel-rw-anon-" * 300}
SIZE = 4096

MAP = """
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = (
    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
)
RW, SHARED = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
shared = {{}}
_ro = open({ro!r}, "r+b")
shared["ro_file"] = libc.mmap(None, {size}, mmap.PROT_READ, mmap.MAP_SHARED, _ro.fileno(), 0)
_rw = open({rw!r}, "r+b")
shared["rw_file"] = libc.mmap(None, {size}, RW, SHARED, _rw.fileno(), 0)
for _name, _data in {memory!r}.items():
    _at = libc.mmap(None, {size}, RW, SHARED | mmap.MAP_ANONYMOUS, -1, 0)
    ctypes.memmove(_at, _data[:{size}], {size})
    shared[_name] = _at
assert libc.mprotect(shared["ro_anon"], {size}, mmap.PROT_READ) == 0
print({{k: hex(v) for k, v in shared.items()}})
"""

ATTACK = """
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)
MADV_REMOVE, MREMAP_MAYMOVE = 9, 1
maps = open("/proc/self/maps").read()
for name, at in shared.items():
    def holds(entry):
        low, high = (int(x, 16) for x in entry.split()[0].split("-"))
        return low <= at < high
    line = next((entry for entry in maps.splitlines() if holds(entry)), "unmapped")
    print(name, "mapping:", line.split()[1] if line != "unmapped" else line)
    rc = libc.mprotect(at, 4096, mmap.PROT_READ | mmap.PROT_WRITE)
    print(name, "mprotect rw:", rc, os.strerror(ctypes.get_errno()) if rc else "")
    if rc == 0:
        ctypes.memmove(at, b"PWNED-BY-MPROTECT", 17)
    try:
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(at + 100)
            print(name, "proc mem wrote:", mem.write(b"PWNED-BY-PROCMEM"))
    except OSError as exc:
        print(name, "proc mem:", exc)
    print(name, "madvise remove:", libc.madvise(at, 4096, MADV_REMOVE))
    moved = libc.mremap(at, 4096, 8192, MREMAP_MAYMOVE)
    if moved not in (None, ctypes.c_void_p(-1).value):
        ok = libc.mprotect(moved, 4096, mmap.PROT_READ | mmap.PROT_WRITE) == 0
        if ok:
            ctypes.memmove(moved + 200, b"PWNED-BY-MREMAP", 15)
        print(name, "mremap:", hex(moved), "write" if ok else "no write")
print("attack done")
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("shared")
    out = {}
    for name, data in CONTENT.items():
        path = folder / f"{name}.bin"
        path.write_bytes(data)
        out[name] = path
    return out


@pytest.fixture(scope="module")
def kernel_setup(files: dict[str, Path]) -> Callable[[Kernel], None]:
    cell = MAP.format(ro=str(files["ro_file"]), rw=str(files["rw_file"]), memory=MEMORY, size=SIZE)
    return lambda kernel: kernel.ok(cell)


def test_no_route_writes_through_a_shared_mapping(
    kern: Kernel, fake: FakeAnthropic, files: dict[str, Path]
) -> None:
    attack = tool_use("run_python", {"code": ATTACK, "timeout": 60})
    fake.script(Turn([attack]), Turn([text("Tried.")]))
    cell = kern.run("%%phoenix --new\nTry to write.", timeout=120)
    assert cell.status == "ok", cell.error()
    report = text_of(result_of(fake, attack.id))
    print(report)
    assert "attack done" in report, report
    for name, path in files.items():
        assert path.read_bytes() == CONTENT[name], f"{name} changed on disk"
    seen = kern.eval(
        "{k: __import__('ctypes').string_at(v, 4096).decode() for k, v in shared.items()}"
    )
    expected = {**CONTENT, **MEMORY}
    for name, data in expected.items():
        assert seen[name] == data[:SIZE].decode(), f"the kernel's {name} changed"
    assert kern.eval("6 * 7") == 42
    # Every mapping the fork saw was private, whatever it was in the kernel.
    mappings = re.findall(r"(\w+) mapping: (\S+)", report)
    assert len(mappings) == 4 and all(perms[3] == "p" for _, perms in mappings), mappings
