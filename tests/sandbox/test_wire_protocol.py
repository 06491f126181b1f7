"""The launcher's request is one typed value on both sides (`sandbox/protocol.py`).

The kernel writes it (`RunSpec.to_request().to_wire()`); the launcher, which imports
nothing of phoenix_nb, loads protocol.py by file path and parses each request once
(`Request.parse`). A malformed request is refused with a `ProtocolError` naming the
field, and the caller reads that refusal on its status pipe, instead of the command
side failing with a bare ``KeyError`` half-way through its set-up.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from phoenix_nb.sandbox import RunSpec, SandboxLimits, launcher
from phoenix_nb.sandbox import protocol as sandbox_protocol
from phoenix_nb.sandbox.protocol import ProtocolError, Request

PROTOCOL_FILE = Path(sandbox_protocol.__file__)
VALID = {"argv": ["/bin/true"], "cwd": "/", "env": {"PATH": "/usr/bin:/bin"}}


def test_a_run_specs_request_reads_back_equal() -> None:
    spec = RunSpec(
        argv=("/bin/echo", "hi"),
        cwd="/tmp",
        env={"PATH": "/usr/bin"},
        restricted=True,
        writable=("/tmp/w",),
        network=True,
        limits=SandboxLimits(memory=1 << 30, max_procs=64),
        linger=True,
        group="c-1",
        hidden=("/root/.ssh",),
        stdin=True,
        separate_stderr=True,
    )
    request = spec.to_request()
    assert Request.parse(request.to_wire()) == request
    assert request.memory == 1 << 30 and request.max_procs == 64
    assert request.rlimits["RLIMIT_NPROC"] == 64


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cwd": None}, "'cwd'"),
        ({"argv": None}, "'argv'"),
        ({"argv": []}, "'argv'"),
        ({"argv": "/bin/true"}, "'argv'"),
        ({"env": {"A": 1}}, "'env'"),
        ({"rlimits": {"RLIMIT_AS": "big"}}, "'rlimits'"),
        ({"restricted": "yes"}, "'restricted'"),
        ({"memory": True}, "'memory'"),
        ({"hidden": [1]}, "'hidden'"),
    ],
)
def test_a_malformed_request_names_its_field(change: dict[str, object], named: str) -> None:
    message = {**VALID, **change}
    message = {k: v for k, v in message.items() if v is not None}
    with pytest.raises(ProtocolError, match=named):
        Request.parse(json.dumps(message))


@pytest.mark.parametrize("data", [b"", b"not json", b"[1, 2]"])
def test_a_request_that_is_no_object_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        Request.parse(data)


def test_the_launcher_loads_the_wire_types_by_path_with_the_standard_library_only() -> None:
    """As the launcher does (``python -I``, the file by path): nothing of phoenix_nb and
    no third-party package is imported, and the types work there."""
    script = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("_phoenix_protocol", {str(PROTOCOL_FILE)!r})
module = importlib.util.module_from_spec(spec)
sys.modules["_phoenix_protocol"] = module
spec.loader.exec_module(module)
try:
    module.Request.parse(json.dumps({{"argv": ["/bin/true"], "env": {{}}}}))
except module.ProtocolError as exc:
    error = type(exc).__name__ + ": " + str(exc)
loaded = sorted(m for m in sys.modules if m.startswith(("phoenix_nb", "pyseccomp", "landlock")))
print(json.dumps({{"error": error, "loaded": loaded}}))
"""
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert result["loaded"] == []
    assert result["error"] == "ProtocolError: the request has no 'cwd'"


def _ask_launcher(message: bytes) -> list[dict[str, object]]:
    """Send one raw request on the launcher's Unrestricted socket (as `LauncherHandle.start`
    does) and read the status pipe to its end: what the launcher answered."""
    plain = launcher()._ensure()[0]
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    try:
        socket.send_fds(plain, [message], [out_w, status_w])
    finally:
        os.close(out_w)
        os.close(status_w)
    data = b""
    try:
        while True:
            ready, _, _ = select.select([status_r], [], [], 60.0)
            assert ready, f"no answer from the launcher within 60 s: {data!r}"
            chunk = os.read(status_r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(status_r)
        os.close(out_r)
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def test_the_launcher_refuses_a_malformed_request_and_says_why(tmp_path: Path) -> None:
    lines = _ask_launcher(json.dumps({"argv": ["/bin/true"], "env": {}}).encode())
    assert lines[0] == {"pid": 0}, lines
    report = lines[-1]
    assert report["exit"] == 126
    refused = str(report["refused"])
    assert "malformed request" in refused and "the request has no 'cwd'" in refused, refused

    # The launcher is still there and runs the next (well-formed) request.
    marker = tmp_path / "ran"
    good = RunSpec(
        argv=("/bin/sh", "-c", f"echo ok > {marker}"), cwd=str(tmp_path), env={}, restricted=False
    )
    answered = _ask_launcher(good.to_request().to_wire())
    assert answered[-1].get("exit") == 0, answered
    assert marker.read_text() == "ok\n"
