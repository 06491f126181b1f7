"""Registration with IPython: the magics, the input transformers and `c.Phoenix.*`.

`%load_ext phoenix_nb` must be quick (≤ 0.3 s): it runs when a notebook
starts, before anyone has asked phoenix anything. So it loads only what
registration needs — the cell transformer, a stand-in for the `%phoenix`
magic and the `Phoenix` configurable that `%config Phoenix.…` talks to — and
the rest (the magics proper, the runtime, the SDK) is imported on a background
thread right away (warmup.py), so it is usually ready by the first `%%phoenix` cell.

The transformer rewrites `%%phoenix` cells and `%phoenix` lines into awaited calls
of `run_cell` / `run_line` here. Each first awaits what it needs of that warm-up —
a `%phoenix` line the magics only (`status`, `list`, `history` never wait for the
SDK), a cell everything a turn uses — and only then imports it: importing on the
loop a module the warm-up thread is half-way through would block the loop on that
module's import lock. Sandbox detection (which starts the launcher, ~0.2 s) runs
on a thread too; what it found, when that is a warning (unavailable, or partial
with what is lost), is said once at the top of the first cell that uses phoenix,
which awaits the detection off the loop if it is not done yet.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from phoenix_nb.errors import PhoenixError
from phoenix_nb.notebook.session import get_session, reset_session
from phoenix_nb.notebook.transformer import transform_phoenix_cell, transform_phoenix_lines
from phoenix_nb.notebook.warmup import PROVIDER_MODULES, WARM_MODULES, WarmUp
from phoenix_nb.policy import PolicyError

if TYPE_CHECKING:
    from phoenix_nb.sandbox import SandboxInfo

MAGICS = "phoenix_nb.notebook.magics"
WARM_UP = WarmUp(WARM_MODULES)  # one per process, like the modules it imports


def _magics() -> Any:
    return importlib.import_module(MAGICS)


async def run_cell(line: str, body: str) -> None:
    """What a `%%phoenix` cell awaits: the warm-up's imports (off the loop), then the turn."""
    await _announce_sandbox_once()
    await WARM_UP.ready()
    from phoenix_nb.notebook.cell import run_cell as run_turn

    await run_turn(line, body)


async def run_line(line: str) -> None:
    """What a `%phoenix` line awaits: the magics' import (never the SDK's), then the command."""
    await _announce_sandbox_once()
    await WARM_UP.ready(MAGICS)
    await _magics().run_line(line)


_TRANSFORMERS = (transform_phoenix_cell, transform_phoenix_lines)
PANEL_TARGET = "phoenix.panel"  # panel_comm.TARGET, named here so load imports nothing more
PENDING_TARGET = "phoenix.pending"  # pending_comm.TARGET, likewise


def _register_panel(shell: Any) -> None:
    """The side panel's comm target (panel_comm.py), and the waiting requests' one that
    every notebook page opens at connection (pending_comm.py). A panel that opens the
    comm on a kernel without phoenix loaded sees it closed at once and offers `%load_ext`.

    The opener may run on a subshell thread: it hands the comm to the kernel's loop,
    which awaits the warm-up's imports (as a cell does) before importing the panel."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None:
        return
    loop = asyncio.get_event_loop()

    async def open_panel(comm: Any) -> None:
        await WARM_UP.ready()
        from phoenix_nb.notebook.panel_comm import open_channel

        open_channel(comm, get_session(shell), loop)

    def opened(comm: Any, _msg: Any) -> None:
        loop.call_soon_threadsafe(lambda: loop.create_task(open_panel(comm)))

    manager.register_target(PANEL_TARGET, opened)

    async def open_pending(comm: Any) -> None:
        await WARM_UP.ready()
        from phoenix_nb.notebook.pending_comm import open_channel as open_pending_channel

        open_pending_channel(comm, get_session(shell), loop)

    def pending_opened(comm: Any, _msg: Any) -> None:
        loop.call_soon_threadsafe(lambda: loop.create_task(open_pending(comm)))

    manager.register_target(PENDING_TARGET, pending_opened)


def _unregister_panel(shell: Any) -> None:
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is not None:
        manager.unregister_target(PANEL_TARGET, None)
        manager.unregister_target(PENDING_TARGET, None)
    import sys

    for name in ("phoenix_nb.notebook.panel_comm", "phoenix_nb.notebook.pending_comm"):
        module = sys.modules.get(name)
        if module is not None:
            module.close_all()


_SANDBOX_SAID = True  # until `%load_ext`: nothing to announce without the extension


def _sandbox_unsaid() -> bool:
    """True the first time a cell uses phoenix after `%load_ext` (then never again)."""
    global _SANDBOX_SAID
    unsaid = not _SANDBOX_SAID
    _SANDBOX_SAID = True
    return unsaid


async def _announce_sandbox_once() -> None:
    """Before the first cell that uses phoenix: a warning if the sandbox is missing or
    partial (never a silent downgrade, sandbox/); said once. The detection `%load_ext`
    started is awaited on a worker thread: it may still be starting the launcher."""
    if _sandbox_unsaid():
        from phoenix_nb.sandbox import detect_sandbox

        _say_sandbox(await asyncio.to_thread(detect_sandbox))


def _say_sandbox(sandbox: SandboxInfo) -> None:
    if not sandbox.available:
        print(
            "phoenix: the kernel sandbox (Landlock) is unavailable here — conversations run "
            f"Unrestricted only. {sandbox.reason}"
        )
    elif "LOST here" in sandbox.reason:
        from phoenix_nb.sandbox import lost_guarantees

        print("phoenix: Restricted mode is partial on this host; not guaranteed here:")
        for line in lost_guarantees():
            print(f"  - {line}")


@magics_class
class LazyPhoenixMagics(Magics):
    """`%phoenix`, served by notebook/magics.py's PhoenixMagics once it is imported."""

    _real: Any = None

    @line_magic("phoenix")  # type: ignore[arg-type]  # IPython types the method as Never
    def phoenix(self, line: str) -> None:
        """%phoenix help|status|list|new|use|approve|deny|restrict|cancel|continue|history|…"""
        if _sandbox_unsaid():  # a magic cannot await: this path waits in place
            from phoenix_nb.sandbox import detect_sandbox

            _say_sandbox(detect_sandbox())
        if self._real is None:
            self._real = _magics().PhoenixMagics(self.shell)
        self._real.phoenix(line)

    @cell_magic("phoenix_fails")  # type: ignore[arg-type]  # IPython types the method as Never
    def phoenix_fails(self, line: str, cell: str) -> None:
        """%%phoenix_fails: the cell's exception is shown and kept as the kernel's last
        error, without failing the cell (Run All and papermill go on; fails.py)."""
        from phoenix_nb.notebook.fails import run_failing_cell

        run_failing_cell(self.shell, cell)


class NotLoaded(PhoenixError):
    """`%load_ext` refused to load phoenix (the admin's policy cannot be used).

    Raised, not printed: the cell that loads phoenix fails, so "Run All" stops there,
    and IPython leaves the extension unloaded (a later `%load_ext` tries again). Shown
    as its one line (IPython shows an exception's `_render_traceback_`)."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def load(shell: Any) -> None:
    """Register phoenix, after reading the policy: a policy the admin named that is
    missing, unreadable or malformed fails closed (`NotLoaded`), with nothing registered,
    so no `%%phoenix` cell or `%phoenix` line runs without the policy's bounds."""
    try:
        session = get_session(shell)
    except PolicyError as exc:
        raise NotLoaded(f"phoenix is not loaded: {exc}") from None
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer not in cleanup:
            cleanup.append(transformer)
    shell.register_magics(LazyPhoenixMagics)
    configurables = getattr(shell, "configurables", None)
    if configurables is not None and session.config not in configurables:
        configurables.append(session.config)  # so `%config Phoenix.…` reaches it
    from phoenix_nb.sandbox import detect_sandbox_soon  # probed once per process

    detect_sandbox_soon()
    global _SANDBOX_SAID
    _SANDBOX_SAID = False
    _report_store(session.config.home)
    from phoenix_nb.notebook.busy import keep_busy_while_executing

    keep_busy_while_executing(getattr(shell, "kernel", None))
    _register_panel(shell)
    WARM_UP.add(PROVIDER_MODULES.get(str(session.config.provider).lower(), ()))
    WARM_UP.start()


def _report_store(home: str) -> None:
    """Say once, as one line, that the store cannot be written (read-only or missing)."""
    from pathlib import Path

    from phoenix_nb.store import default_root, store_problem

    problem = store_problem(Path(home).expanduser() if home else default_root())
    if problem:
        print(problem)


def unload(shell: Any) -> None:
    _unregister_panel(shell)
    configurables = getattr(shell, "configurables", [])
    for configurable in [c for c in configurables if type(c).__name__ == "Phoenix"]:
        configurables.remove(configurable)
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer in cleanup:
            cleanup.remove(transformer)
    reset_session()
