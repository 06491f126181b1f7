"""Confining a fork of the kernel (``sandbox.fork``): the API the kernel tools use.

A forked child is confined as a Restricted bash command is: PID 1 of fresh
namespaces, the user's files read-only, credentials hidden, no host network,
a private TMPDIR, only the environment it was given. The fork runs in a fresh
interpreter (a single-threaded parent, as the kernel tools fork from).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from phoenix_nb.sandbox import detect_sandbox

needs_landlock = pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock")

CONFINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys, tempfile
    from phoenix_nb import sandbox
    from phoenix_nb.sandbox import remove_tree

    cwd, port = sys.argv[1], int(sys.argv[2])
    policy = sandbox.SandboxPolicy()
    cg = sandbox.child_cgroup("confine-test", policy.limits)
    tmp = tempfile.mkdtemp(dir=sandbox.run_dir())
    pol = sandbox.child_policy(
        cwd=cwd, env={"PATH": os.environ["PATH"]}, tmpdir=tmp, policy=policy, cgroup=cg
    )
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            sandbox.confine_forked_child(pol)
        except OSError as exc:
            os.write(w, json.dumps({"error": str(exc)}).encode()); os._exit(3)
        out = {"pid": os.getpid(), "env": sorted(os.environ), "tmpdir": os.environ["TMPDIR"]}
        for name, attempt in (
            ("write", lambda: open(os.path.join(cwd, "x"), "w")),
            ("canary", lambda: open(sys.argv[3]).read()),
            ("connect", lambda: socket.create_connection(("127.0.0.1", port), 1)),
            ("kill_parent", lambda: os.kill(os.getppid() or 1, 0) if os.getppid() else None),
        ):
            try:
                attempt()
                out[name] = "ALLOWED"
            except OSError as exc:
                out[name] = type(exc).__name__
        with open(os.path.join(os.environ["TMPDIR"], "scratch"), "w") as fh:
            out["tmp_write"] = fh.write("ok")
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        result = json.loads(fh.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    result["status"] = os.waitstatus_to_exitcode(status)
    if cg is not None:
        cg.remove()
    result["tmp_removed"] = remove_tree(tmp)
    print(json.dumps(result))
    """
)


@needs_landlock
def test_confine_forked_child_confines_a_fork_like_restricted_bash(tmp_path: Path) -> None:
    """The API the kernel tools use (`phoenix_nb.sandbox`): a forked child becomes PID 1 of
    fresh namespaces, cannot write the user's files, read hidden credentials or reach a
    host listener, gets a writable private TMPDIR and only the environment it was given."""
    import socket

    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("CANARY\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                CONFINE_SCRIPT,
                str(tmp_path),
                str(listener.getsockname()[1]),
                str(home / ".netrc"),
            ],
            env={**os.environ, "HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    out = json.loads(proc.stdout)
    assert out["status"] == 0, out
    assert out["pid"] == 1  # PID 1 of its own namespace
    assert out["write"] == "PermissionError"
    assert out["canary"] == "PermissionError"
    assert out["connect"] == "ConnectionRefusedError"  # its own empty loopback
    assert out["tmp_write"] == 2
    assert out["env"] == ["PATH", "TMPDIR"]
    assert out["tmp_removed"] and not (tmp_path / "x").exists()
