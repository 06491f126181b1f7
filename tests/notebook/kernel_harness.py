"""A real IPython kernel driven like a front end, for notebook-layer tests.

The kernel runs /work/venv's python (`sys.executable`), reaches the fake
Messages API over loopback, and keeps its store in a temporary folder. One
thread (the caller's) owns the client's sockets: `pump()` drains iopub and
shell replies into lists, and every wait is a bounded poll on those lists, so a
test can send a widget click or an interrupt while a cell is still running.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

MIME = "application/vnd.phoenix.conversation+json"
MODEL = "claude-sonnet-4-5"
KERNEL_NAME = "phoenix-test"


def venv_kernelspecs(folder: Path) -> KernelSpecManager:
    """Kernel specs holding one kernel that runs this very interpreter (not `python` on PATH)."""
    spec_dir = folder / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "phoenix test",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(folder)])


@dataclass
class Execution:
    """One execute_request and everything the kernel said about it."""

    msg_id: str
    sent_at: float
    reply: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    idle: bool = False

    @property
    def status(self) -> str | None:
        return None if self.reply is None else self.reply["content"]["status"]

    def text(self, name: str | None = None) -> str:
        """Everything printed to stdout/stderr (or one of them)."""
        return "".join(
            o["content"]["text"]
            for o in self.outputs
            if o["msg_type"] == "stream" and (name is None or o["content"]["name"] == name)
        )

    def records(self) -> list[dict[str, Any]]:
        """Every conversation record this cell displayed or updated, in order."""
        return [
            o["content"]["data"][MIME]
            for o in self.outputs
            if o["msg_type"] in ("display_data", "update_display_data")
            and MIME in o["content"].get("data", {})
        ]

    def last_bundle(self) -> dict[str, Any]:
        bundles = [
            o["content"]["data"]
            for o in self.outputs
            if o["msg_type"] in ("display_data", "update_display_data")
            and MIME in o["content"].get("data", {})
        ]
        assert bundles, f"no phoenix record displayed; outputs: {self.summary()}"
        return bundles[-1]

    def final_outputs(self) -> list[dict[str, Any]]:
        """The outputs a notebook keeps for this cell, applying updates by display id and
        clear_output like JupyterLab's output area (what a saved notebook holds)."""
        kept: list[dict[str, Any]] = []
        clear_pending = False
        for o in self.outputs:
            kind, content = o["msg_type"], o["content"]
            if kind == "clear_output":
                if content.get("wait"):
                    clear_pending = True
                else:
                    kept = []
                continue
            if kind == "update_display_data":
                display_id = content.get("transient", {}).get("display_id")
                for i, old in enumerate(kept):
                    if old.get("display_id") == display_id:
                        kept[i] = {**old, "data": content["data"]}
                continue
            if clear_pending:
                kept, clear_pending = [], False
            if kind in ("display_data", "execute_result"):
                display_id = content.get("transient", {}).get("display_id")
                kept.append({"type": kind, "data": content["data"], "display_id": display_id})
            elif kind == "stream":
                kept.append({"type": "stream", "name": content["name"], "text": content["text"]})
            elif kind == "error":
                kept.append({"type": "error", "traceback": content["traceback"]})
        return kept

    def error(self) -> dict[str, Any] | None:
        for o in self.outputs:
            if o["msg_type"] == "error":
                return o["content"]
        return None

    def summary(self) -> list[str]:
        return [o["msg_type"] for o in self.outputs]


class Kernel:
    """A started kernel and a single-threaded client with message bookkeeping."""

    def __init__(self, root: Path, base_url: str, *, extra_env: Mapping[str, str] = ()) -> None:
        self.root = root
        self.home = root / "store"
        self.project = root / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PHOENIX_"))}
        env.update(
            PHOENIX_HOME=str(self.home),
            ANTHROPIC_BASE_URL=base_url,
            ANTHROPIC_API_KEY="test-key",
            PHOENIX_MODEL=MODEL,
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        )
        env.update(dict(extra_env))
        self.km = KernelManager(
            kernel_name=KERNEL_NAME, kernel_spec_manager=venv_kernelspecs(root / "kernels")
        )
        self.km.start_kernel(env=env, cwd=str(self.project))
        self.client = self.km.blocking_client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.executions: dict[str, Execution] = {}
        self.iopub: list[tuple[float, dict[str, Any]]] = []  # (arrival time, message)

    # -- plumbing -------------------------------------------------------------------------
    def pump(self, timeout: float = 0.02) -> None:
        """Move every available message into the bookkeeping (waits at most `timeout`)."""
        client = self.client
        got = True
        while got:
            got = False
            if client.iopub_channel.msg_ready() or client.iopub_channel.socket.poll(
                int(timeout * 1000)
            ):
                while client.iopub_channel.msg_ready():
                    self._on_iopub(client.iopub_channel.get_msg(timeout=0))
                    got = True
            while client.shell_channel.msg_ready():
                self._on_shell(client.shell_channel.get_msg(timeout=0))
                got = True
            timeout = 0

    def _on_iopub(self, msg: dict[str, Any]) -> None:
        self.iopub.append((time.monotonic(), msg))
        parent = msg.get("parent_header", {}).get("msg_id")
        execution = self.executions.get(parent)
        if execution is None:
            return
        if msg["msg_type"] == "status":
            if msg["content"]["execution_state"] == "idle":
                execution.idle = True
        elif msg["msg_type"] not in ("execute_input", "comm_open", "comm_msg", "comm_close"):
            execution.outputs.append(msg)

    def _on_shell(self, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        execution = self.executions.get(parent)
        if execution is not None and msg["msg_type"] == "execute_reply":
            execution.reply = msg

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Pump until `predicate()` holds; returns the monotonic time it first held."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
            self.pump(0.005)
        return time.monotonic()

    # -- front-end actions -------------------------------------------------------------
    def submit(self, code: str, *, allow_stdin: bool = True) -> Execution:
        """Send a cell without waiting (cells queue in the kernel like Run All)."""
        msg_id = self.client.execute(code, allow_stdin=allow_stdin, stop_on_error=True)
        execution = Execution(msg_id, time.monotonic())
        self.executions[msg_id] = execution
        return execution

    def finish(self, execution: Execution, timeout: float = 30.0) -> Execution:
        self.wait_until(
            lambda: execution.reply is not None and execution.idle,
            timeout,
            f"cell {execution.msg_id} to finish",
        )
        return execution

    def finish_turn(self, execution: Execution, timeout: float = 30.0) -> Execution:
        """The cell finished and so did its turn: a cell whose turn waited for an answer
        ends at once and its record goes on updating (a detached view, notebook/cell.py)
        until the final record, the one with its fallbacks, arrives."""
        self.finish(execution, timeout)

        def final() -> bool:
            bundles = [
                o["content"]["data"]
                for o in execution.outputs
                if o["msg_type"] in ("display_data", "update_display_data")
                and MIME in o["content"].get("data", {})
            ]
            return not bundles or "text/html" in bundles[-1]

        self.wait_until(final, timeout, f"the turn of cell {execution.msg_id} to rest")
        return execution

    def run(self, code: str, *, allow_stdin: bool = True, timeout: float = 30.0) -> Execution:
        execution = self.finish(self.submit(code, allow_stdin=allow_stdin), timeout)
        return execution

    def ok(self, code: str, **kwargs: Any) -> Execution:
        """Run a cell that must succeed."""
        execution = self.run(code, **kwargs)
        assert execution.status == "ok", (execution.status, execution.error(), execution.text())
        return execution

    def widgets(self, since: float = 0.0) -> Iterator[tuple[str, dict[str, Any]]]:
        """(model id, state) of every widget opened after `since`."""
        for at, msg in self.iopub:
            if at >= since and msg["msg_type"] == "comm_open":
                content = msg["content"]
                if content.get("target_name") == "jupyter.widget":
                    yield content["comm_id"], content["data"].get("state", {})

    def button(self, description: str, since: float = 0.0) -> str:
        """The model id of the newest Button with this description opened after `since`."""
        found = [
            comm_id
            for comm_id, state in self.widgets(since)
            if state.get("_model_name") == "ButtonModel" and state.get("description") == description
        ]
        assert found, f"no {description!r} button was opened"
        return found[-1]

    def wait_for_button(self, description: str, since: float, timeout: float = 10.0) -> str:
        self.wait_until(
            lambda: any(
                s.get("_model_name") == "ButtonModel" and s.get("description") == description
                for _, s in self.widgets(since)
            ),
            timeout,
            f"a {description!r} button",
        )
        return self.button(description, since)

    def click(self, model_id: str) -> float:
        """Send a click like the widget manager does; returns when it was sent."""
        msg = self.client.session.msg(
            "comm_msg",
            {"comm_id": model_id, "data": {"method": "custom", "content": {"event": "click"}}},
        )
        self.client.shell_channel.send(msg)
        return time.monotonic()

    def widget_updates(self, model_id: str, since: float = 0.0) -> list[dict[str, Any]]:
        return [
            msg["content"]["data"].get("state", {})
            for at, msg in self.iopub
            if at >= since
            and msg["msg_type"] == "comm_msg"
            and msg["content"]["comm_id"] == model_id
            and msg["content"]["data"].get("method") == "update"
        ]

    def closed_comms(self) -> set[str]:
        return {m["content"]["comm_id"] for _, m in self.iopub if m["msg_type"] == "comm_close"}

    def eval(self, expression: str) -> Any:
        """Evaluate a JSON-able expression in the kernel."""
        execution = self.ok(f"import json as _j; print(_j.dumps({expression}))")
        return json.loads(execution.text("stdout").strip().splitlines()[-1])

    def restart(self) -> None:
        """Restart the kernel like the front end's Restart (same environment and folder)."""
        self.km.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=60)
        self.iopub.clear()
        self.executions.clear()

    def shutdown(self) -> None:
        try:
            self.client.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


@contextmanager
def loaded_kernel(
    root: Path, base_url: str, *, extra_env: Mapping[str, str] | None = None
) -> Iterator[Kernel]:
    """A started kernel that ran `%load_ext phoenix_nb`; shut down on exit, even if set-up fails."""
    kernel = Kernel(root, base_url, extra_env=extra_env or {})
    try:
        kernel.ok("%load_ext phoenix_nb")
        yield kernel
    finally:
        kernel.shutdown()


def settle(kernel: Kernel) -> None:
    """Interrupt any cell a (failed) test left running: the next test starts on an idle kernel."""
    running = [e for e in kernel.executions.values() if e.reply is None]
    if running:
        kernel.km.interrupt_kernel()
        for execution in running:
            kernel.finish(execution, timeout=15)


def state_name(record: Mapping[str, Any]) -> str:
    return str(record.get("conversation", {}).get("state", {}).get("name", ""))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): read its state.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
