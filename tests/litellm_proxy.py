"""A real LiteLLM proxy for tests, in a virtual environment of its own.

LiteLLM is 380 MB and some of its 2026 releases carried a credential stealer: it
never enters phoenix's dependencies or the kernel's environment. The tests run the
proxy as a separate program from a virtual environment made for it, at
`PHOENIX_LITELLM_VENV` or else `~/.cache/phoenix_nb/litellm-<version>` (where `.ci/run`
makes it, so fresh clones share it); a missing one is made here, once, under a file lock
(a few minutes). A venv counts as made only once `COMPLETE` is written in it after the
install succeeded, so an interrupted install is made again rather than half used.
The version is pinned to one known to install from the registry and to serve both
endpoints.

The configuration is the README's (the block between `<!-- litellm-config -->`
markers), with the upstream's address put in for `http://VLLM_HOST:8000/v1`: the
recipe the README gives is the one the tests run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

LITELLM_VERSION = "1.106.12"
README = Path(__file__).resolve().parent.parent / "README.md"
UPSTREAM_PLACEHOLDER = "http://VLLM_HOST:8000/v1"
PROXY_PLACEHOLDER = "localhost:4000"
COMPLETE = ".phoenix-complete"  # written last by whoever installs the venv (.ci/run too)


def readme_block(name: str) -> str:
    """The fenced block between `<!-- name -->` and `<!-- /name -->` in the README."""
    text = README.read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- {re.escape(name)} -->\s*```[a-z]*\n(.*?)```\s*<!-- /{re.escape(name)} -->",
        text,
        re.S,
    )
    if found is None:
        raise AssertionError(f"README.md has no block marked {name}")
    return found.group(1)


def venv_path() -> Path:
    given = os.environ.get("PHOENIX_LITELLM_VENV")
    if given:
        return Path(given)
    return Path.home() / ".cache" / "phoenix_nb" / f"litellm-{LITELLM_VERSION}"


def ensure_venv() -> Path:
    """The proxy's `litellm` program, installing it into its own venv when missing."""
    venv = venv_path()
    program = venv / "bin" / "litellm"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / COMPLETE).exists():
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    f"litellm[proxy]=={LITELLM_VERSION}",
                ],
                check=True,
                timeout=1800,
            )
            (venv / COMPLETE).write_text(LITELLM_VERSION)
    return program


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def litellm_proxy(upstream: str, folder: Path, *, timeout: float = 300.0) -> Iterator[str]:
    """A running proxy with the README's configuration in front of `upstream` (a
    Chat Completions base URL ending in /v1); yields the proxy's base URL."""
    program = ensure_venv()
    config = folder / "litellm.yaml"
    config.write_text(readme_block("litellm-config").replace(UPSTREAM_PLACEHOLDER, upstream))
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price map at start
        "LITELLM_TELEMETRY": "False",
    }
    log = open(folder / "litellm.log", "wb")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(
        [str(program), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health/liveliness", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (folder / "litellm.log").read_text(errors="replace")[-3000:]
                    raise AssertionError(f"the LiteLLM proxy did not start:\n{tail}") from None
                time.sleep(0.25)  # polling a port that is not yet open
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)
        log.close()
