"""Escape battery: Restricted mode under the real kernel's Landlock (REQ-BASH-008).

Each case runs one escape attempt through the bash tool in Restricted mode and
asserts that it was denied (by the kernel's own error or a limit) and that the
user's files are exactly as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import json
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxLimits, detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.tiers import needs_cgroup

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
# A write is refused by the read-only mounts first where the command has its own
# namespaces (EROFS), else by Landlock (EACCES).
ROFS = "Permission denied|Read-only file system"
CASES: dict[str, tuple[str, str]] = {
    # name: (command, text that must appear in the output)
    "write_existing": ("echo pwned > f.txt", ROFS),
    "append_existing": ("echo pwned >> f.txt", ROFS),
    "create_file": ("echo pwned > new.txt", ROFS),
    "rename": ("mv f.txt g.txt", ROFS),
    "unlink": ("rm -f f.txt", ROFS),
    "rmdir": ("rmdir sub/empty", ROFS),
    "mkdir": ("mkdir newdir", ROFS),
    "hard_link": ("ln f.txt hard", ROFS),
    "symlink": ("ln -s f.txt soft", ROFS),
    "truncate": ("truncate -s 0 f.txt", ROFS),
    "mkfifo": ("mkfifo fifo", "Operation not permitted"),
    "chmod": ("chmod 777 f.txt", "Operation not permitted"),
    "chown": ("chown 1:1 f.txt", "Operation not permitted"),
    "touch_existing": ("touch f.txt", ROFS),
    "utime_python": (f"{PY} 'import os; os.utime(\"f.txt\", (0, 0))'", "PermissionError"),
    "proc_self_fd": ("exec 3<f.txt; echo pwned > /proc/self/fd/3", ROFS),
    "python_open_w": (f'{PY} \'open("f.txt", "w").write("x")\'', f"PermissionError|{ROFS}"),
    "write_outside_cwd": ("echo x > /tmp/phoenix-escape-outside", ROFS),
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
def mark() -> Iterator[str]:
    word = f"phoenix_escape_{os.getpid()}_{time.monotonic_ns()}"
    yield word
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    os.kill(int(entry), 9)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "f.txt").write_text("precious\n")
    (tmp_path / "sub" / "empty").mkdir(parents=True)
    return tmp_path


def ctx_for(cwd: Path) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        mode=Mode.RESTRICTED,
        commands=CommandRunner(group="esc", info=detect_sandbox()),
        conversation_id="esc",
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
    (user_dir / "bomb.sh").write_text("b(){ b|b& }; b\n")
    before = snapshot(user_dir)
    result = await tool.run(
        {"command": "bash bomb.sh; sleep 30", "timeout": 3},
        ctx_for(user_dir),
        "t",
    )
    assert result.display is not None and result.display.timed_out
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


# ---------------------------------------------------------------------------------------
# One test per escape family Landlock alone lets through, each checked from outside.


async def _run(command: str, cwd: Path, tool: BashTool | None = None, **more: object) -> str:
    result = await (tool or BashTool()).run(
        {"command": command, "timeout": 30, **more}, ctx_for(cwd), "t"
    )
    return result.content


async def test_item1_no_tcp_of_any_flavour_reaches_a_host_listener(
    user_dir: Path, listeners: dict[str, Listener]
) -> None:
    """TFO (v4/v6), MPTCP with high bits in the protocol, UDP: nothing reaches the host."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    v4, v6 = listeners["v4"].sock.getsockname()[1], listeners["v6"].sock.getsockname()[1]
    before = {key: listener.accepted for key, listener in listeners.items()}
    script = (
        "import ctypes, socket\n"
        f"for fam, host, port in ((socket.AF_INET, '127.0.0.1', {v4}), "
        f"(socket.AF_INET6, '::1', {v6})):\n"
        "    s = socket.socket(fam, socket.SOCK_STREAM)\n"
        "    try:\n"
        "        s.sendto(b'x', socket.MSG_FASTOPEN, (host, port)); print('TFO-SENT')\n"
        "    except OSError as e: print('tfo', e)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.syscall(41, 2, 1, ctypes.c_long(262 | 1 << 32))\n"
        "print('mptcp-high-bits', fd, ctypes.get_errno())\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"u.sendto(b'x', ('127.0.0.1', {udp.getsockname()[1]}))\n"
    )
    (user_dir / "net.py").write_text(script)
    try:
        out = await _run("python3 net.py", user_dir)
        assert "mptcp-high-bits -1 1" in out, out  # EPERM, whatever the high bits say
        with pytest.raises(BlockingIOError):
            udp.recv(16)
    finally:
        udp.close()
    assert {key: listener.accepted for key, listener in listeners.items()} == before


async def test_item1_autobind_listener_is_not_reachable_from_outside(
    user_dir: Path, mark: str
) -> None:
    """`listen()` without `bind()` autobinds, but only inside the command's own netns."""
    script = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.listen()\n"
        "c = socket.create_connection(('127.0.0.1', s.getsockname()[1]), 2)\n"
        "print('PORT', s.getsockname()[1], 'self-connect-ok', flush=True)\n"
        f"time.sleep(30)  # {mark}\n"
    )
    (user_dir / "listen.py").write_text(script)
    ctx = ctx_for(user_dir)
    result = await BashTool().run({"command": "python3 listen.py", "background": True}, ctx, "t")
    assert result.display is not None
    log = Path(str(result.display.log))
    try:
        deadline = time.monotonic() + 20
        while "PORT" not in log.read_text() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        text = log.read_text()
        assert "self-connect-ok" in text, text  # its own loopback works
        port = int(text.split("PORT ")[1].split()[0])
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), 1).close()
    finally:
        await ctx.commands.jobs.kill(ctx.conversation_id)


def _limits(pid: int) -> str:
    return Path(f"/proc/{pid}/limits").read_text()


async def test_item3_no_prlimit_kill_or_core_dump_of_another_process(user_dir: Path) -> None:
    """prlimit/kill on a victim (same uid) fail; checked from outside, it keeps its limits."""
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        before = _limits(victim.pid)
        out = await _run(
            f"prlimit --pid {victim.pid} --cpu=1:1; prlimit --pid {victim.pid} --nofile=12:12; "
            f"prlimit --pid {victim.pid} --core=unlimited; kill -XCPU {victim.pid}; "
            f"python3 -c 'import resource; resource.prlimit({victim.pid}, resource.RLIMIT_CPU, "
            "(1, 1))'; exit 0",
            user_dir,
        )
        assert _limits(victim.pid) == before, out
        assert victim.poll() is None
        assert _limits(os.getpid()) == _limits(os.getpid())  # this kernel stand-in untouched
    finally:
        victim.kill()
        victim.wait()


FS_IOC_GETFLAGS = 0x80086601


def _inode_flags(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return int.from_bytes(fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4], "little")
    finally:
        os.close(fd)


async def test_item4_inode_flag_ioctls_are_denied(user_dir: Path) -> None:
    """FS_IOC_SETFLAGS/SETVERSION (64-bit and 32-bit numbers) on read-only fds: EPERM."""
    target = user_dir / "f.txt"
    flags_before = _inode_flags(target)
    sub_before = _inode_flags(user_dir / "sub")
    script = (
        "import fcntl, os, struct, errno\n"
        "for path in ('f.txt', 'sub'):\n"
        "    fd = os.open(path, os.O_RDONLY)\n"
        "    for req in (0x40086602, 0x40046602, 0x40087602, 0x40047602, "
        "0x40086604, 0x140086602):\n"
        "        try:\n"
        "            fcntl.ioctl(fd, req, struct.pack('q', 0x00010000 | 0x80 | 0x8 | 0x4000))\n"
        "            print('CHANGED', path, hex(req))\n"
        "        except OSError as e: print('denied', hex(req), e.errno)\n"
    )
    (user_dir / "flags.py").write_text(script)
    out = await _run("python3 flags.py; chattr +S +A f.txt; chattr +d +D sub; exit 0", user_dir)
    assert "CHANGED" not in out, out
    assert _inode_flags(target) == flags_before
    assert _inode_flags(user_dir / "sub") == sub_before


def _ipcs() -> str:
    return subprocess.run(["ipcs"], capture_output=True, text=True, check=True).stdout


def _shm(shmid: int) -> ctypes.c_void_p:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(shmid, None, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value)
    return addr


async def test_item5_sysv_ipc_is_private_and_gone_with_the_command(user_dir: Path) -> None:
    """A host shm segment cannot be written; objects made inside vanish with the command."""
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True)
    shmid = int(made.stdout.split(":")[1])
    addr = _shm(shmid)
    ctypes.memmove(addr, b"host-data", 9)
    try:
        keys = (0x50480001, 0x50480002, 0x50480003)  # this test's own SysV keys
        script = (
            "import ctypes\n"
            "l = ctypes.CDLL(None, use_errno=True); l.shmat.restype = ctypes.c_void_p\n"
            f"a = l.shmat({shmid}, None, 0)\n"
            "if a not in (None, ctypes.c_void_p(-1).value): ctypes.memmove(a, b'PWNED', 5)\n"
            "print('shmat', a, ctypes.get_errno())\n"
            f"print('made', l.shmget({keys[0]}, 1 << 20, 0o1600), "
            f"l.msgget({keys[1]}, 0o1600), l.semget({keys[2]}, 4, 0o1600))\n"
        )
        (user_dir / "shm.py").write_text(script)
        out = await _run("python3 shm.py; ipcs", user_dir)
        assert ctypes.string_at(addr, 9) == b"host-data", out
        assert all(f"{key:#010x}" in out for key in keys), out  # made inside, seen inside
        after = _ipcs()
        assert not any(f"{key:#010x}" in after for key in keys), after  # gone with it
    finally:
        ctypes.CDLL(None).shmdt(ctypes.c_void_p(addr))
        subprocess.run(["ipcrm", "-m", str(shmid)], check=False)


async def test_item6_unix_datagrams_cannot_reach_a_host_socket(
    user_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    where = tmp_path_factory.mktemp("dgram") / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(where))
    server.setblocking(False)
    script = (
        "import socket\n"
        "for make in (lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0],\n"
        "             lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)):\n"
        "    try:\n"
        "        s = make()\n"
        f"        s.sendto(b'x', {str(where)!r}); print('SENT')\n"
        "    except OSError as e: print('denied', e)\n"
    )
    (user_dir / "dgram.py").write_text(script)
    try:
        out = await _run("python3 dgram.py", user_dir)
        assert "SENT" not in out, out
        with pytest.raises(BlockingIOError):
            server.recv(16)
    finally:
        server.close()


@needs_cgroup
async def test_item7_memory_is_bounded_for_the_whole_tree(user_dir: Path) -> None:
    """Three processes and a memfd together cannot hold more than the budget."""
    tool = BashTool(SandboxLimits(memory=256 << 20, address_space=8 << 30))
    hog = "python3 -c 'b = bytearray(160 << 20); import time; time.sleep(5)'"
    memfd = (
        'python3 -c \'import os, mmap; fd = os.memfd_create("x"); os.ftruncate(fd, 400 << 20); '
        'm = mmap.mmap(fd, 400 << 20); m.write(b"x" * (400 << 20))\''
    )
    out = await _run(f"{hog} & {hog} & {hog} & wait; {memfd}; exit 0", user_dir, tool)
    assert "[limit hit: memory" in out, out
    assert "c.Phoenix.sandbox_memory" in out


async def test_item7_tmpdir_is_capped_in_bytes_and_inodes(user_dir: Path) -> None:
    tool = BashTool(SandboxLimits(tmp_bytes=32 << 20, tmp_inodes=500))
    out = await _run("head -c 100000000 /dev/zero > $TMPDIR/big; exit 0", user_dir, tool)
    assert "No space left on device" in out and "[limit hit: TMPDIR size" in out, out
    out = await _run(
        "for i in $(seq 1000); do : > $TMPDIR/f$i || break; done; exit 0", user_dir, tool
    )
    assert "[limit hit: TMPDIR files" in out, out


def _conversation_processes(word: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    count += 1
    return count


@needs_cgroup
async def test_item7_background_jobs_share_one_process_budget(user_dir: Path, mark: str) -> None:
    """Three background jobs each trying for 100 processes stay within 40 together."""
    tool = BashTool(SandboxLimits(max_procs=40))
    ctx = ctx_for(user_dir)
    try:
        for _ in range(3):
            await tool.run(
                {
                    "command": f"for i in $(seq 100); do sh -c 'sleep 30 # {mark}' & done; wait",
                    "background": True,
                },
                ctx,
                "t",
            )
        peak = 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            peak = max(peak, _conversation_processes(mark))
            await asyncio.sleep(0.05)
        assert 0 < peak <= 40, peak
    finally:
        await ctx.commands.jobs.kill(ctx.conversation_id)


async def test_item8_deep_tree_cleanup_returns_and_leaves_nothing(user_dir: Path) -> None:
    out = await _run(
        'python3 -c \'import os\nos.chdir(os.environ["TMPDIR"])\n'
        'for i in range(2000): os.mkdir("d"); os.chdir("d"); open("f", "w")\n'
        "print(len(os.getcwd()))'; chmod 000 $TMPDIR/d; echo $TMPDIR",
        user_dir,
    )
    tmpdir = out.strip().splitlines()[-1]
    assert tmpdir.startswith("/") and not Path(tmpdir, "d").exists(), out
    # Where namespaces hold the tree was in the namespace's tmpfs; its empty mount
    # point here is removed by the supervisor right after its report.
    deadline = time.monotonic() + 30
    while Path(tmpdir).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not Path(tmpdir).exists(), out


async def test_item8_background_log_is_written_by_the_supervisor(user_dir: Path) -> None:
    """A job cannot truncate or rewrite its own log: it only ever holds a pipe."""
    ctx = ctx_for(user_dir)
    cmd = (
        "echo first-line; python3 -c 'import os; os.ftruncate(1, 0)'; "
        "echo rewritten > /proc/self/fd/1; ls -l /proc/self/fd/1; echo last-line"
    )
    result = await BashTool().run({"command": cmd, "background": True}, ctx, "t")
    assert result.display is not None
    log = Path(str(result.display.log))
    try:
        deadline = time.monotonic() + 20
        while "last-line" not in log.read_text() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        text = log.read_text()
        assert text.startswith("first-line\n"), text
        assert "pipe:" in text and "last-line" in text
    finally:
        await ctx.commands.jobs.kill(ctx.conversation_id)


async def test_item8_store_files_cannot_be_opened(
    user_dir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("store")
    (home / "phoenix.lock").write_text("")
    monkeypatch.setenv("PHOENIX_HOME", str(home))
    out = await _run(
        f'python3 -c \'import fcntl; f = open("{home}/phoenix.lock"); '
        'fcntl.flock(f, fcntl.LOCK_EX); print("LOCKED")\'; ls {home}',
        user_dir,
    )
    assert "LOCKED" not in out and "Permission denied" in out, out


# A prompt-injected command's attack on its own kernel: find the kernel by walking
# up the parent pids, read its connection file (or use the key and ports it was
# handed anyway), and send a signed execute_request over TCP Fast Open, a plain
# connect, or an ipc:// socket. Speaks ZMTP 3.0 itself (stdlib only).
TAKEOVER = r"""
import hashlib, hmac, json, os, socket, struct, sys, uuid, datetime
known = json.loads(sys.argv[1])
marker = sys.argv[2]
found = []
pid = os.getpid()
for _ in range(64):
    try:
        stat = open(f"/proc/{pid}/stat").read()
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError as e:
        print("walk stopped:", e); break
    for i, a in enumerate(argv):
        if a == b"-f" and i + 1 < len(argv):
            found.append(argv[i + 1].decode())
    pid = int(stat.rsplit(")", 1)[1].split()[1])
    if pid <= 1:
        print("walk reached", pid); break
info = dict(known)
for path in found + [known["connection_file"]]:
    try:
        info.update(json.load(open(path))); print("READ CONNECTION FILE", path)
    except OSError as e:
        print("connection file:", e)
key = info["key"].encode()

def frames(parts):
    out = b""
    for i, p in enumerate(parts):
        more = 1 if i < len(parts) - 1 else 0
        if len(p) < 256:
            out += bytes([more, len(p)]) + p
        else:
            out += bytes([more | 2]) + struct.pack(">Q", len(p)) + p
    return out

def message():
    header = json.dumps({"msg_id": uuid.uuid4().hex, "username": "x", "session": uuid.uuid4().hex,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "msg_type": "execute_request", "version": "5.3"}).encode()
    content = json.dumps({"code": f"open({marker!r}, 'w').write('owned')", "silent": False,
        "store_history": False, "user_expressions": {}, "allow_stdin": False,
        "stop_on_error": True}).encode()
    parts = [header, b"{}", b"{}", content]
    sig = hmac.new(key, b"".join(parts), hashlib.sha256).hexdigest().encode()
    return frames([b"<IDS|MSG>", sig] + parts)

greeting = b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + bytes(32)
ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
command = bytes([4, len(ready)]) + ready

def talk(s, fastopen_addr=None):
    if fastopen_addr:
        s.sendto(greeting, socket.MSG_FASTOPEN, fastopen_addr)
    else:
        s.sendall(greeting)
    s.settimeout(3)
    s.recv(64)
    s.sendall(command + message())
    print("SENT execute_request", s.recv(256)[:8])

for port_name in ("shell_port", "control_port"):
    addr = (info.get("ip", "127.0.0.1"), info[port_name])
    for route in ("tfo", "connect"):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if route == "tfo":
                talk(s, addr)
            else:
                s.settimeout(3); s.connect(addr); talk(s)
        except OSError as e:
            print(route, port_name, "failed:", e)
for path in (p for p in os.listdir(os.path.dirname(known["connection_file"]) or ".") if "ipc" in p):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); talk(s)
    except OSError as e:
        print("ipc failed:", e)
print("ATTACK DONE")
"""


@pytest.mark.timeout(180)
def test_item2_kernel_takeover_from_a_phoenix_cell_fails(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A Restricted command cannot run code in the very kernel that started it.

    Real kernel (kernel_harness), real %%phoenix cell, real SDK against the fake
    Messages API. The attacker even gets the HMAC key and ports handed to it,
    so what stops it is that the kernel is unreachable, not that it is secret;
    the marker must not appear and the kernel must keep running cells.
    """
    from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
    from tests.notebook.kernel_harness import Kernel

    root = tmp_path_factory.mktemp("takeover")
    marker = root / "owned-marker"
    with FakeAnthropic() as fake:
        kern = Kernel(root, fake.base_url)
        try:
            kern.ok("%load_ext phoenix_nb")
            conn = json.loads(Path(kern.km.connection_file).read_text())
            known = {**conn, "connection_file": kern.km.connection_file}
            (kern.project / "attack.py").write_text(TAKEOVER)
            command = f"python3 attack.py {shlex.quote(json.dumps(known))} {marker}"
            fake.script(
                Turn([tool_use("bash", {"command": command})]),
                Turn([text("done")]),
            )
            cell = kern.run("%%phoenix --new --mode restricted\nTake over.", timeout=120)
            assert cell.status == "ok", cell.error()
            output = json.dumps(fake.requests[-1].tool_results)
            assert "ATTACK DONE" in output, output[-3000:]
            assert "SENT execute_request" not in output and "READ CONNECTION FILE" not in output
            assert not marker.exists()
            assert kern.eval("1 + 1") == 2  # the kernel keeps running later cells
            assert not marker.exists()
        finally:
            kern.shutdown()


# ---------------------------------------------------------------------------------------
# Credential files: canaries under a fake HOME.

CANARY_PATHS = (
    ".ssh/id_ed25519",
    ".gnupg/private-keys-v1.d/key.key",
    ".aws/credentials",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".config/gh/hosts.yml",
    ".password-store/bank.gpg",
    ".env.home",
    "project/.env",
    "project/.env.local",
    "jupyter-runtime/kernel-123.json",
    "phoenix-store/phoenix.json",
)


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for i, rel in enumerate(CANARY_PATHS):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"CANARY-{i}-secret\n")
    (home / "project" / "main.py").write_text("print('ok')\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(home / "jupyter-runtime"))
    monkeypatch.setenv("PHOENIX_HOME", str(home / "phoenix-store"))
    return home


def _cat_all(home: Path) -> str:
    return "; ".join(f"cat {home / rel}" for rel in CANARY_PATHS) + "; cat main.py; exit 0"


async def test_credential_files_unreadable_in_restricted_mode(fake_home: Path) -> None:
    out = await _run(_cat_all(fake_home), fake_home / "project")
    assert "CANARY" not in out, out
    assert out.count("Permission denied") == len(CANARY_PATHS), out
    assert "ok" in out  # ordinary files still read


async def test_credential_files_readable_in_unrestricted_mode(fake_home: Path) -> None:
    ctx = ToolContext(
        cwd=fake_home / "project",
        mode=Mode.UNRESTRICTED,
        commands=CommandRunner(info=detect_sandbox()),
    )
    result = await BashTool().run({"command": _cat_all(fake_home)}, ctx, "t")
    for i in range(len(CANARY_PATHS)):
        assert f"CANARY-{i}-secret" in result.content


async def test_deny_read_is_configurable(fake_home: Path) -> None:
    """c.Phoenix.deny_read extends (a new path hidden) or trims (.netrc readable) the list."""
    from phoenix_nb import sandbox

    (fake_home / "project" / "private.txt").write_text("CANARY-extra\n")
    trimmed = [p for p in sandbox.DEFAULT_DENY_READ if p != "~/.netrc"]
    policy = sandbox.SandboxPolicy.build(deny_read=[*trimmed, "private.txt"])
    ctx = ctx_for(fake_home / "project")
    ctx = replace(ctx, commands=replace(ctx.commands, policy=policy))
    result = await BashTool().run(
        {"command": "cat private.txt; cat ~/.netrc; exit 0", "timeout": 30}, ctx, "t"
    )
    out = result.content
    assert "CANARY-extra" not in out and "Permission denied" in out
    assert f"CANARY-{CANARY_PATHS.index('.netrc')}-secret" in out


async def test_credential_files_unreadable_from_a_sub_agent(
    fake_home: Path, tmp_path: Path
) -> None:
    """A sub-agent (always Restricted) runs the same bash: the canaries stay unread."""
    from phoenix_nb.runtime.manager import Phoenix
    from phoenix_nb.runtime.prompts import PARENT_PROMPT
    from phoenix_nb.runtime.settings import Settings
    from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use

    mark = PARENT_PROMPT.split("\n")[0][:40]

    def is_parent(req: Any) -> bool:
        return str(req.body.get("system", "")).startswith(mark)

    def turns(req: Any) -> int:
        return sum(1 for m in req.body.get("messages", []) if m.get("role") == "assistant")

    spawn = Turn([tool_use("spawn_agents", {"tasks": [{"task": "Read the keys"}]})])
    read = Turn([tool_use("bash", {"command": _cat_all(fake_home)})])
    submit = Turn([tool_use("submit_result", {"result": "read", "success": True})])
    async with FakeAnthropic() as fake:
        fake.add_rule(is_parent, lambda r: spawn if turns(r) == 0 else Turn([text("done")]))
        fake.add_rule(lambda r: not is_parent(r), lambda r: read if turns(r) == 0 else submit)
        phoenix = Phoenix(
            Settings(
                home=tmp_path / "store",
                base_url=fake.base_url,
                api_key="k",
                model="claude-sonnet-4-5",
                retry_delay_scale=0.01,
            )
        )
        try:
            conv = phoenix.create(cwd=fake_home / "project")
            await conv.run("Delegate.")
        finally:
            await phoenix.aclose()
        child_results = [
            json.dumps(r.tool_results) for r in fake.requests if not is_parent(r) and r.tool_results
        ]
    assert child_results, "the sub-agent never ran bash"
    assert "Permission denied" in child_results[0]
    assert not any("CANARY" in r for r in child_results)
