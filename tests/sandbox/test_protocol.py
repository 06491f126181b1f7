"""The launcher's JSON messages are parsed into types once, at the edge.

The real launcher's own hello is parsed (no hand-written sample of it), and
damaged messages meet the rules the kernel side relies on: a damaged hello or
start line is a ProtocolError (the module is standard library only: the launcher
loads it too; `LauncherHandle` raises SandboxError from it), a damaged or missing
exit report reads as killed.
"""

from __future__ import annotations

import pytest

from phoenix_nb import sandbox
from phoenix_nb.sandbox import ExitReport, Hello, Started
from phoenix_nb.sandbox.protocol import ProtocolError


@pytest.mark.skipif(not sandbox.detect_sandbox().available, reason="needs the sandbox")
def test_the_real_launchers_hello_is_typed() -> None:
    hello = sandbox.launcher().hello()
    assert isinstance(hello, Hello)
    assert hello.error == "" and hello.landlock_abi == sandbox.detect_sandbox().abi


def test_hello_with_an_error_keeps_it() -> None:
    assert Hello.parse(b'{"hello": {"error": "unavailable"}}').error == "unavailable"


@pytest.mark.parametrize("data", [b"", b"[]", b'{"hello": 3}', b'{"hello": {"cgroup": "x"}}'])
def test_a_damaged_hello_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        Hello.parse(data)


def test_start_line() -> None:
    assert Started.parse(b'{"pid": 7, "pgid": 9, "tmpdir": "/t"}') == Started(7, 9, "/t")
    with pytest.raises(ProtocolError, match="no supervisor pid"):
        Started.parse(b'{"pgid": 9}')


def test_exit_report_and_a_damaged_one() -> None:
    line = b'{"exit": 1, "signal": null, "killed": false, "limits": ["memory"]}'
    assert ExitReport.parse(line) == ExitReport(1, None, False, ("memory",))
    for damaged in (b"", b"{", b'{"exit": "x"}'):
        assert ExitReport.parse(damaged) == ExitReport(None, None, killed=True)
