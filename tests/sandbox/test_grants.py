"""An MCP server's grants lifted inside the Restricted sandbox, and nothing more.

A granted stdio server (``write: [dirs]``, ``network: true``, user config only)
runs through `CommandRunner` as a Restricted process whose `RunSpec` carries the
grants: ``writable`` (a writable bind mount past the read-only remount, and a
Landlock write rule) and ``network`` (no private network namespace; inet sockets
allowed). Each case runs in a fresh interpreter (its own launcher, its own $HOME,
namespaces on or off) and is checked from outside: the files on disk, a loopback
listener's count.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from phoenix_nb.sandbox import detect_sandbox

pytestmark = pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock")

KEY = "phoenix-grant-test-key"

# What the granted process tries: write into the grant, the working folder and
# $HOME, connect to the listener, read ~/.ssh. Prints what it saw (the test
# trusts only what it checks from outside, but the text explains a failure).
PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    grant, work, home, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = {}
    for key, path in (("grant", grant), ("work", work), ("home", home)):
        try:
            with open(os.path.join(path, "planted.txt"), "w") as f:
                f.write("planted")
            seen[key] = "written"
        except OSError as exc:
            seen[key] = f"failed: {exc}"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"x")
        seen["connect"] = "connected"
    except OSError as exc:
        seen["connect"] = f"failed: {exc}"
    try:
        with open(os.path.join(home, ".ssh", "id_ed25519")) as f:
            seen["ssh"] = "read: " + f.read()
    except OSError as exc:
        seen["ssh"] = f"failed: {exc}"
    print(json.dumps(seen))
    """
)

# Runs in a fresh interpreter: CommandRunner -> the launcher -> the probe.
START = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from pathlib import Path
    from phoenix_nb.commands import CommandRunner
    from phoenix_nb.sandbox import SandboxPolicy

    async def main():
        probe, grant, work, home, port, writable, network = sys.argv[1:8]
        runner = CommandRunner(SandboxPolicy.build(), group="grant-test")
        spec = runner.spec(
            (sys.executable, "-I", probe, grant, work, home, port),
            Path(work),
            {"PATH": os.environ["PATH"], "HOME": home},
            restricted=True,
            cpu_seconds=60,
            writable=(grant,) if writable == "1" else (),
            network=network == "1",
        )
        process = await runner.start(spec)
        report = await process.wait()
        out = b""
        while True:
            try:
                chunk = os.read(process.output_fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            out += chunk
        os.close(process.output_fd)
        print(json.dumps({"exit": report.exit, "refused": report.refused, "out": out.decode()}))

    asyncio.run(main())
    """
)


class Listener:
    """A loopback TCP listener counting the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _run(
    tmp_path: Path, *, writable: bool, network: bool, namespaces: str
) -> tuple[dict[str, str], Path, Path, Path, int]:
    grant, work, home = tmp_path / "grant", tmp_path / "work", tmp_path / "home"
    for folder in (grant, work, home / ".ssh"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(KEY)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    listener = Listener()
    try:
        env = {**os.environ, "HOME": str(home), "PHOENIX_SANDBOX_NAMESPACES": namespaces}
        args = [str(probe), str(grant), str(work), str(home), str(listener.port)]
        proc = subprocess.run(
            [sys.executable, "-c", START, *args, str(int(writable)), str(int(network))],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        result = json.loads(proc.stdout)
    finally:
        listener.close()
    assert result["exit"] == 0 and not result["refused"], (result, proc.stderr)
    seen = json.loads(result["out"].strip().splitlines()[-1])
    return seen, grant, work, home, listener.accepted


@pytest.mark.parametrize("namespaces", ["on", "off"])
def test_a_write_grant_writes_only_below_its_folder(tmp_path: Path, namespaces: str) -> None:
    """``write: [dir]``: the file lands in dir; the working folder and $HOME stay
    untouched; the network stays closed; ~/.ssh stays hidden where namespaces hold."""
    seen, grant, work, home, accepted = _run(
        tmp_path, writable=True, network=False, namespaces=namespaces
    )
    assert (grant / "planted.txt").read_text() == "planted", seen
    assert not (work / "planted.txt").exists(), seen
    assert not (home / "planted.txt").exists(), seen
    assert accepted == 0, seen
    if namespaces == "on":
        assert KEY not in seen["ssh"], seen


@pytest.mark.parametrize("namespaces", ["on", "off"])
def test_a_network_grant_connects_but_writes_nothing(tmp_path: Path, namespaces: str) -> None:
    """``network: true``: the loopback listener is reached (the host's network, not a
    private one); no file is written anywhere; ~/.ssh stays hidden where namespaces hold."""
    seen, grant, work, home, accepted = _run(
        tmp_path, writable=False, network=True, namespaces=namespaces
    )
    assert accepted > 0, seen
    for folder in (grant, work, home):
        assert not (folder / "planted.txt").exists(), (folder, seen)
    if namespaces == "on":
        assert KEY not in seen["ssh"], seen


def test_no_grant_keeps_everything_closed(tmp_path: Path) -> None:
    """The same probe without grants: nothing written, nothing reached (the grants
    above are what opened their paths, not the harness)."""
    seen, grant, work, home, accepted = _run(
        tmp_path, writable=False, network=False, namespaces="on"
    )
    assert accepted == 0, seen
    for folder in (grant, work, home):
        assert not (folder / "planted.txt").exists(), (folder, seen)
    assert KEY not in seen["ssh"], seen
