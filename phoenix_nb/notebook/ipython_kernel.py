"""The kernel tools' port onto the IPython kernel phoenix runs in.

This is the only module that lets the tools layer see IPython: it implements
`phoenix_nb.tools.kernel_port.KernelPort` over the shell.

What each cell printed or displayed is recorded as the kernel *sends* it: the
kernel session's `send` is wrapped to copy (bounded) the text of `stream`,
`execute_result`, `display_data` and `error` messages, keyed by the
`execute_input` that announced each cell's execution count. That text was
already produced for the front end, so recording it runs no user code and
calls no `__repr__` twice — a hook that re-formatted `Out[n]` would (and a
mutating `__repr__` would then change state). Cells run before
`%load_ext phoenix_nb` show their source only.

Each cell a front end names (JupyterLab and Notebook 7 send the cell's id as
`metadata.cellId`; ipykernel hands it to IPython as `ExecutionInfo.cell_id`) is
noted by a `post_run_cell` handler with its execution count and source, so
`kernel_history` can give the agent ids to edit and the `EditBook` knows what
the kernel last saw of each cell. Edits travel to the front end over a kernel
comm (`cell_edits_comm.py`).

Proposed cells are sent at the end of the `%%phoenix` cell (a `post_run_cell`
handler: it runs after the cell's code, before ipykernel reads the payloads
for the execute reply) as IPython's `set_next_input` payload, which JupyterLab
and Notebook 7 turn into a new, unexecuted cell below. Both read only the
first such payload of a reply (their bundled source: `payload.filter(...)[0]`),
so several proposals of one turn travel as one cell whose parts are separated by `# %%` lines (the
percent-cell convention; JupyterLab's "Split Cell" splits them); the record
shows each proposal on its own.

In a forked child (`enter_child`) every path to the front end — the session,
the display publisher, the kernel's stdout/stderr streams — is pointed at the
child's own sink, so nothing a child does reaches ZMQ.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.notebook.cell_edits_comm import EditChannel
from phoenix_nb.tools.cell_edits import EditBook
from phoenix_nb.tools.kernel_port import (
    CellOutput,
    ChildOutput,
    HistoryEntry,
    LastException,
    Proposal,
)

RECORD_MIME = "application/vnd.phoenix.conversation+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MAX_CELLS = 500  # cells whose outputs are kept
MAX_TEXT = 4000  # characters kept per cell and output kind
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


def _plain(text: str) -> str:
    return _ANSI.sub("", text)


class OutputRecorder:
    """Bounded text of every cell's outputs, fed by the session's outgoing messages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, int] = OrderedDict()  # execute_request id -> count
        self._outputs: OrderedDict[int, dict[str, list[str]]] = OrderedDict()
        self.last_error_count: int | None = None

    def observe(
        self, msg_type: str, content: Mapping[str, Any] | bytes, parent: Mapping[str, Any]
    ) -> None:
        request = str(parent.get("msg_id", "")) if isinstance(parent, Mapping) else ""
        if isinstance(content, bytes):  # encoded ahead (encoded_display): a whole record
            content = {"data": {RECORD_MIME: None}}
        with self._lock:
            if msg_type == "execute_input":
                count = content.get("execution_count")
                if isinstance(count, int):
                    self._counts[request] = count
                    while len(self._counts) > MAX_CELLS:
                        self._counts.popitem(last=False)
                return
            count = self._counts.get(request)
            if count is None:
                return
            if msg_type == "stream":
                text = _plain(str(content.get("text", "")))  # a traceback on stderr is coloured
                self._add(count, str(content.get("name", "stdout")), text)
            elif msg_type in ("execute_result", "display_data"):
                data = content.get("data") or {}
                if RECORD_MIME in data:
                    self._add(count, "display", "[phoenix conversation record]\n")
                    return
                if WIDGET_MIME in data:
                    return  # live controls: no content of the cell's own
                kind = "result" if msg_type == "execute_result" else "display"
                text = str(data.get("text/plain", ""))
                images = [m for m in data if str(m).startswith("image/")]
                if images:
                    text += f" [{', '.join(images)} shown]"
                self._add(count, kind, text + "\n")
            elif msg_type == "error":
                self.last_error_count = count
                trace = content.get("traceback") or []
                lines = _plain("\n".join(str(t) for t in trace)).strip().splitlines()
                summary = lines[-1] if lines else f"{content.get('ename')}: {content.get('evalue')}"
                self._add(count, "error", summary + "\n")

    def note_error(self, count: int) -> None:
        """Cell `count` raised without an `error` message (`%%phoenix_fails`, fails.py)."""
        with self._lock:
            self.last_error_count = count

    def _add(self, count: int, kind: str, text: str) -> None:
        cell = self._outputs.setdefault(count, {})
        parts = cell.setdefault(kind, [])
        used = sum(len(p) for p in parts)
        if used < MAX_TEXT:
            parts.append(text[: MAX_TEXT - used])
        elif not parts[-1].endswith("…"):
            parts.append("…")
        while len(self._outputs) > MAX_CELLS:
            self._outputs.popitem(last=False)

    def outputs(self, count: int) -> tuple[CellOutput, ...]:
        with self._lock:
            cell = self._outputs.get(count, {})
            return tuple(CellOutput(kind, "".join(parts)) for kind, parts in cell.items())


class IPythonKernel:
    """KernelPort over a live IPython shell (ipykernel's ZMQInteractiveShell)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.recorder = OutputRecorder()
        self._proposals: list[Proposal] = []
        self._session: Any = None
        self._original_send: Any = None
        self._cell_ids: OrderedDict[int, str] = OrderedDict()  # execution count -> cell id
        # The id of the cell running now (or last run) as its front end sent it; None
        # where none is sent (nbclient). A turn's view names its asking cell by it.
        self.running_cell_id: str | None = None
        self.edits = EditBook()
        self.channel = EditChannel(self.edits)
        self._install()
        events = getattr(shell, "events", None)
        if events is not None:
            events.register("pre_run_cell", self._before_cell)
            events.register("post_run_cell", self._after_cell)

    @property
    def running_count(self) -> int | None:
        """The execution count of the cell running now: its index in the input history,
        stored before its code runs (`shell.execution_count` is already the next cell's
        number by then in IPython 9, and not yet in older versions)."""
        inputs = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        return len(inputs) - 1 if isinstance(inputs, list) and len(inputs) > 1 else None

    def _before_cell(self, info: Any = None) -> None:
        """A cell starts: remember the id its front end sent (ExecutionInfo.cell_id)."""
        cell_id = getattr(info, "cell_id", None)
        self.running_cell_id = cell_id if isinstance(cell_id, str) and cell_id else None

    def _note_cell(self, result: Any) -> None:
        """Remember which notebook cell an execution count belongs to (front ends that
        send no id, e.g. nbclient, leave it unnamed)."""
        info = getattr(result, "info", None)
        cell_id = getattr(info, "cell_id", None)
        count = getattr(result, "execution_count", None)
        if not isinstance(cell_id, str) or not cell_id or not isinstance(count, int):
            return
        self._cell_ids[count] = cell_id
        while len(self._cell_ids) > MAX_CELLS:
            self._cell_ids.popitem(last=False)
        self.edits.saw_run(cell_id, str(getattr(info, "raw_cell", "") or ""), count)

    def _after_cell(self, result: Any = None, *_args: Any) -> None:
        """A cell ended: note its id; a turn's proposals go out with its execute reply."""
        with contextlib.suppress(Exception):  # bookkeeping must never break a cell
            self._note_cell(result)
        self.send_proposals()

    # -- recording -------------------------------------------------------------------
    def _install(self) -> None:
        session = getattr(getattr(self.shell, "kernel", None), "session", None)
        if session is None or getattr(session.send, "_phoenix_recorder", False):
            return
        original = session.send
        recorder = self.recorder

        def send(stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None,
                 *args: Any, **kwargs: Any) -> Any:  # fmt: skip
            with contextlib.suppress(Exception):  # recording must never break sending
                if isinstance(msg_or_type, dict):
                    recorder.observe(
                        str(msg_or_type.get("header", {}).get("msg_type", "")),
                        msg_or_type.get("content") or {},
                        msg_or_type.get("parent_header") or {},
                    )
                else:
                    recorder.observe(
                        str(msg_or_type),
                        content or {},
                        parent if isinstance(parent, Mapping) else {},
                    )
            return original(stream, msg_or_type, content, parent, *args, **kwargs)

        send._phoenix_recorder = True  # type: ignore[attr-defined]
        session.send = send
        self._session, self._original_send = session, original

    def close(self) -> None:
        """Stop recording (`%unload_ext`)."""
        if self._session is not None and self._original_send is not None:
            self._session.send = self._original_send
            self._session = self._original_send = None
        events = getattr(self.shell, "events", None)
        if events is not None:
            with contextlib.suppress(ValueError):
                events.unregister("post_run_cell", self._after_cell)
            with contextlib.suppress(ValueError):
                events.unregister("pre_run_cell", self._before_cell)
        self.channel.close()

    # -- KernelPort ------------------------------------------------------------------
    def user_namespace(self) -> Mapping[str, Any]:
        namespace: Mapping[str, Any] = self.shell.user_ns
        return namespace

    def hidden_names(self) -> Collection[str]:
        hidden = getattr(self.shell, "user_ns_hidden", {}) or {}
        return frozenset(hidden) | _HIDDEN

    def history(self, last: int) -> Sequence[HistoryEntry]:
        sources = list(getattr(self.shell.history_manager, "input_hist_raw", []) or [])
        first = max(1, len(sources) - last)
        return [
            HistoryEntry(
                count, str(sources[count]), self.recorder.outputs(count), self._cell_ids.get(count)
            )
            for count in range(first, len(sources))
            if str(sources[count]).strip()
        ]

    def last_exception(self) -> LastException | None:
        value = getattr(sys, "last_value", None)
        if value is None:
            return None
        return LastException(
            type(value), value, getattr(sys, "last_traceback", None), self.recorder.last_error_count
        )

    def propose_cell(self, proposal: Proposal) -> None:
        self._proposals.append(proposal)

    def connection_secrets(self) -> SecretValues:
        """The session's HMAC key, the connection file's path, its endpoints and ports."""
        values: list[str] = []
        ports: list[int] = []
        for session in _sessions(self.shell):
            key = getattr(session, "key", b"")
            if isinstance(key, bytes) and key:
                values.append(key.decode("utf-8", "replace"))
        app = _kernel_app()
        if app is not None:
            with contextlib.suppress(Exception):
                path = str(app.abs_connection_file or "")
                if path:
                    values += [path, os.path.basename(path)]
            ip, transport = str(getattr(app, "ip", "") or ""), str(getattr(app, "transport", ""))
            for name in _PORTS:
                port = getattr(app, name, 0)
                if isinstance(port, int) and port > 0:
                    ports.append(port)
                    if ip:
                        values += [f"{ip}:{port}", f"{transport}://{ip}:{port}"]
        return SecretValues.of(values, ports)

    def cell_edits(self) -> EditBook:
        return self.edits

    def enter_child(self, sink: ChildOutput) -> None:
        """In a forked child only: nothing may reach the kernel's sockets from here on, and
        the kernel's session key and connection info are dropped (`_forget_connection`)."""
        shell = self.shell
        session = getattr(getattr(shell, "kernel", None), "session", None)
        if session is not None:
            session.send = lambda *args, **kwargs: None
        _forget_connection(shell)
        publisher = getattr(shell, "display_pub", None)
        if publisher is not None:
            publisher.publish = lambda data, *args, **kwargs: sink.display(data)
            publisher.clear_output = lambda *args, **kwargs: None
        for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
            if type(stream).__module__.startswith("ipykernel"):
                stream.write = lambda text, _n=name: sink.write(_n, str(text))  # type: ignore[method-assign]
                stream.flush = lambda: None  # type: ignore[method-assign]

    # -- the front end ----------------------------------------------------------------
    def take_proposals(self, conversation_id: str | None = None) -> list[Proposal]:
        """Remove and return the queued proposals (of one conversation, or all)."""
        taken = [p for p in self._proposals if conversation_id in (None, p.conversation_id)]
        self._proposals = [p for p in self._proposals if p not in taken]
        return taken

    def send_proposals(self, conversation_id: str | None = None) -> list[Proposal]:
        """Queue the turn's proposals as the running cell's `set_next_input` payload."""
        proposals = self.take_proposals(conversation_id)
        if proposals:
            payload = {
                "source": "set_next_input",
                "text": proposal_text(proposals),
                "replace": False,
            }
            manager = getattr(self.shell, "payload_manager", None)
            if manager is not None:
                manager.write_payload(payload, single=False)
        return proposals


_PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def _kernel_app() -> Any:
    """ipykernel's application object, if this process is an ipykernel (never imported here)."""
    module = sys.modules.get("ipykernel.kernelapp")
    app_class = getattr(module, "IPKernelApp", None)
    if app_class is None or not app_class.initialized():
        return None
    return app_class.instance()


def _sessions(shell: Any) -> list[Any]:
    """Every distinct jupyter_client Session the kernel's objects hold."""
    found: dict[int, Any] = {}
    holders = [getattr(shell, "kernel", None), getattr(shell, "display_pub", None), _kernel_app()]
    holders += [sys.stdout, sys.stderr, getattr(sys, "__stdout__", None)]
    for holder in holders:
        session = getattr(holder, "session", None) if holder is not None else None
        if session is not None and hasattr(session, "key"):
            found[id(session)] = session
    return list(found.values())


def _forget_connection(shell: Any) -> None:
    """In a fork: the session key (and its HMAC object) and the connection info, gone.

    The HMAC object holds the key's inner and outer pads, which sign as well as
    the key does; setting the key empty makes the session drop it. The bytes
    of the key, the path and the endpoints left in memory are overwritten by
    the fork's scrub (`sandbox/fork_memory.py`).
    """
    for session in _sessions(shell):
        with contextlib.suppress(Exception):
            session.key = b""
        with contextlib.suppress(Exception):
            session.auth = None
    app = _kernel_app()
    if app is None:
        return
    for name in _PORTS:
        with contextlib.suppress(Exception):
            setattr(app, name, 0)
    for name in ("connection_file",):
        with contextlib.suppress(Exception):
            setattr(app, name, "")
    for holder, names in (
        (app, ("_ports",)),
        (getattr(app, "kernel", None), ("_recorded_ports",)),
    ):
        for name in names:
            if holder is not None and isinstance(getattr(holder, name, None), dict):
                with contextlib.suppress(Exception):
                    setattr(holder, name, {})
    heartbeat = getattr(app, "heartbeat", None)
    if heartbeat is not None:
        for name, value in (("port", 0), ("original_port", 0), ("addr", ("", 0))):
            with contextlib.suppress(Exception):
                setattr(heartbeat, name, value)


def _comment(text: str) -> str:
    """The explanation as `#` lines ("" for none): plain text in a code cell, never run."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def proposal_text(proposals: Sequence[Proposal]) -> str:
    """One cell's text: each proposal's explanation as comments above its code, and
    `# %%`-separated parts for several proposals."""
    if len(proposals) == 1:
        return _comment(proposals[0].explanation) + proposals[0].code
    parts = []
    for i, proposal in enumerate(proposals, 1):
        lines = proposal.explanation.strip().splitlines()
        title = lines[0].strip() if lines else ""
        header = f"# %% Proposal {i} of {len(proposals)}" + (f": {title}" if title else "")
        rest = _comment("\n".join(lines[1:]))
        parts.append(f"{header}\n{rest}{proposal.code.rstrip()}\n")
    return "\n".join(parts)
