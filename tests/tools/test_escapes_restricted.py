"""Escape battery: Restricted mode under the real kernel's Landlock (REQ-BASH-008).

Each case runs one escape attempt through the bash tool in Restricted mode and
asserts that it was denied (by the kernel's own error or a limit) and that the
user's files are exactly as before.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.core.values import Mode
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.sandbox import SandboxLimits, detect_sandbox

pytestmark = pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock")

SECRET = "sk-ant-escape-test-0123456789"


class Listener:
    """A real listener outside the sandbox that records accepted connections."""

    def __init__(self, family: int, address: object) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def listeners() -> Iterator[dict[str, Listener]]:
    made = {
        "v4": Listener(socket.AF_INET, ("127.0.0.1", 0)),
        "v6": Listener(socket.AF_INET6, ("::1", 0)),
        "abstract": Listener(socket.AF_UNIX, f"\0phoenix-escape-{os.getpid()}"),
    }
    yield made
    for listener in made.values():
        listener.close()


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    found: dict[str, tuple[object, ...]] = {}
    for path in sorted([root, *root.rglob("*")]):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[str(path.relative_to(root))] = (
            st.st_mode,
            st.st_uid,
            st.st_gid,
            st.st_mtime_ns,
            data,
        )
    return found


PY = "python3 -c"
CASES: dict[str, tuple[str, str]] = {
    # name: (command, text that must appear in the output)
    "write_existing": ("echo pwned > f.txt", "Permission denied"),
    "append_existing": ("echo pwned >> f.txt", "Permission denied"),
    "create_file": ("echo pwned > new.txt", "Permission denied"),
    "rename": ("mv f.txt g.txt", "Permission denied"),
    "unlink": ("rm -f f.txt", "Permission denied"),
    "rmdir": ("rmdir sub/empty", "Permission denied"),
    "mkdir": ("mkdir newdir", "Permission denied"),
    "hard_link": ("ln f.txt hard", "Permission denied"),
    "symlink": ("ln -s f.txt soft", "Permission denied"),
    "truncate": ("truncate -s 0 f.txt", "Permission denied"),
    "mkfifo": ("mkfifo fifo", "Operation not permitted"),
    "chmod": ("chmod 777 f.txt", "Operation not permitted"),
    "chown": ("chown 1:1 f.txt", "Operation not permitted"),
    "touch_existing": ("touch f.txt", "Permission denied"),
    "utime_python": (f"{PY} 'import os; os.utime(\"f.txt\", (0, 0))'", "PermissionError"),
    "proc_self_fd": ("exec 3<f.txt; echo pwned > /proc/self/fd/3", "Permission denied"),
    "python_open_w": (f'{PY} \'open("f.txt", "w").write("x")\'', "PermissionError"),
    "write_outside_cwd": ("echo x > /tmp/phoenix-escape-outside", "Permission denied"),
    # Inside its private network namespace the host's listeners do not exist.
    "tcp_v4_connect": (
        f"{PY} 'import socket; socket.create_connection((\"127.0.0.1\", {{v4}}), 2)'",
        "ConnectionRefusedError|PermissionError",
    ),
    "tcp_v6_connect": (
        f"{PY} 'import socket; socket.create_connection((\"::1\", {{v6}}), 2)'",
        "ConnectionRefusedError|OSError|PermissionError",
    ),
    "mptcp_socket": (
        f"{PY} 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)'",
        "PermissionError",
    ),
    "raw_socket": (
        f"{PY} 'import socket; "
        "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'",
        "PermissionError",
    ),
    "abstract_unix_connect": (
        f"{PY} 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0{{abstract}}\")'",
        "PermissionError",
    ),
    # The kernel is outside the command's PID namespace: "No such process/file"
    # (or, on a host without namespaces, Landlock scoping's "not permitted").
    "signal_kernel_probe": ("kill -0 {kernel_pid}", "No such process|Operation not permitted"),
    "signal_kernel_term": ("kill -TERM {kernel_pid}", "No such process|Operation not permitted"),
    "kernel_environ": ("cat /proc/{kernel_pid}/environ", "No such file|Permission denied"),
    "kernel_mem": ("head -c 64 /proc/{kernel_pid}/mem", "No such file|Permission denied"),
    "kernel_fd_write": (
        "for f in /proc/{kernel_pid}/fd/*; do echo pwned > $f && echo WROTE $f; done; exit 3",
        "No such file|Permission denied",
    ),
    "init_environ": ("cat /proc/1/environ", "Permission denied"),
    "capabilities_regained": (
        f"{PY} 'import ctypes, sys; l=ctypes.CDLL(None); "
        "sys.exit(0 if l.prctl(24, 8, 0, 0, 0) == 0 else 9)'",
        "exit code 9",
    ),
    "setsid_escape": ("setsid sleep 5 || exit 1", "setsid"),
    "ptrace_kernel": (
        f"{PY} 'import ctypes, sys; l=ctypes.CDLL(None); "
        "sys.exit(0 if l.ptrace(16, {kernel_pid}, 0, 0) == 0 else 7)'",
        "exit code 7",
    ),
}


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "f.txt").write_text("precious\n")
    (tmp_path / "sub" / "empty").mkdir(parents=True)
    return tmp_path


def ctx_for(cwd: Path) -> ToolContext:
    return ToolContext(
        cwd=cwd, mode=Mode.RESTRICTED, sandbox=detect_sandbox(), conversation_id="esc"
    )


@pytest.mark.parametrize("name", sorted(CASES))
async def test_escape_is_denied_and_files_unchanged(
    name: str, user_dir: Path, listeners: dict[str, Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    """REQ-BASH-008: each attempt fails with the kernel's error; nothing changes."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    command, expected = CASES[name]
    command = command.format(
        v4=listeners["v4"].sock.getsockname()[1],
        v6=listeners["v6"].sock.getsockname()[1],
        abstract=listeners["abstract"].sock.getsockname()[1:].decode(),
        kernel_pid=os.getpid(),
    )
    before = snapshot(user_dir)
    accepted = {key: listener.accepted for key, listener in listeners.items()}
    result = await BashTool().run({"command": command, "timeout": 20}, ctx_for(user_dir), "t")
    assert any(e in result.content for e in expected.split("|")), result.content
    assert "exit code" in result.content
    assert snapshot(user_dir) == before
    assert SECRET not in result.content
    assert "WROTE" not in result.content
    assert not Path("/tmp/phoenix-escape-outside").exists()
    assert {key: listener.accepted for key, listener in listeners.items()} == accepted


async def test_env_has_no_api_key(user_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret-token-value")
    result = await BashTool().run({"command": "env"}, ctx_for(user_dir), "t")
    assert "PATH=" in result.content
    assert SECRET not in result.content and "ghp-secret-token-value" not in result.content


async def test_fork_bomb_ends_and_leaves_nothing(user_dir: Path) -> None:
    """A fork bomb is bounded (pids cgroup / RLIMIT_NPROC) and killed at the timeout."""
    tool = BashTool(SandboxLimits(max_procs=64))
    before = snapshot(user_dir)
    result = await tool.run(
        {"command": "b(){ b|b& }; b; sleep 30", "timeout": 3}, ctx_for(user_dir), "t"
    )
    assert result.display is not None and result.display["timed_out"]
    assert snapshot(user_dir) == before


async def test_memory_bomb_hits_address_space_limit(user_dir: Path) -> None:
    tool = BashTool(SandboxLimits(address_space=512 << 20))
    cmd = f"{PY} 'a=[]\nwhile True: a.append(bytearray(32 << 20))'"
    result = await tool.run({"command": cmd, "timeout": 30}, ctx_for(user_dir), "t")
    assert "MemoryError" in result.content


async def test_filling_tmpdir_hits_file_size_limit(user_dir: Path) -> None:
    tool = BashTool(SandboxLimits(file_size=8 << 20))
    result = await tool.run(
        {"command": "head -c 100000000 /dev/zero > $TMPDIR/big; ls -l $TMPDIR/big", "timeout": 30},
        ctx_for(user_dir),
        "t",
    )
    assert "File size limit exceeded" in result.content
    assert " 8388608 " in result.content


async def test_secret_in_a_process_environment_is_unreadable(user_dir: Path) -> None:
    """The kernel's *initial* environment (what /proc/<pid>/environ shows) is denied.

    A stand-in kernel is started with the key in its environment, the way
    Jupyter starts one; outside the sandbox the key is readable, inside it is
    not, and neither is the environment of the supervisor ($PPID) or the
    launcher (its parent).
    """
    holder = subprocess.Popen(
        ["sh", "-c", "echo ready; sleep 60"],
        env={"ANTHROPIC_API_KEY": SECRET, "PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        assert SECRET.encode() in Path(f"/proc/{holder.pid}/environ").read_bytes()
        command = (
            f"cat /proc/{holder.pid}/environ; "
            "cat /proc/$PPID/environ; "
            "cat /proc/$(cut -d' ' -f4 /proc/$PPID/stat)/environ; "
            "grep CapEff /proc/self/status"
        )
        result = await BashTool().run({"command": command}, ctx_for(user_dir), "t")
    finally:
        os.killpg(holder.pid, 9)
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert SECRET not in result.content
    # Denied, or (PID namespace) not even there to be denied.
    denied = result.content.count("Permission denied") + result.content.count("No such file")
    assert denied == 3, result.content
    # Only CAP_DAC_READ_SEARCH (bit 2) may be left, so reads keep working for root.
    assert int(result.content.split("CapEff:")[1].split()[0], 16) & ~0x4 == 0
