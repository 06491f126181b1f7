"""Registration with IPython: the magics, the input transformers and `c.Phoenix.*`.

`%load_ext phoenix_nb` must be quick (≤ 0.3 s): it runs when a notebook
starts, before anyone has asked phoenix anything. So it loads only what
registration needs — the cell transformer, a stand-in for the `%phoenix`
magic and the `Phoenix` configurable that `%config Phoenix.…` talks to — and
the rest (the magics proper, the runtime, the SDK) is imported on a background
thread right away, so it is usually ready by the first `%%phoenix` cell. If it
is not, the first use imports what it needs (the import lock makes the two wait
for each other, never import twice) — and only that: commands that read the store
(`%phoenix status`, `list`, `history`) never need the SDK, and the first model
request awaits what is left of its import on a worker thread (llm/provider.py).
Sandbox detection (which starts the launcher, ~0.2 s) runs on a thread too; what
it found, when that is a warning (unavailable, or partial with what is lost), is
said once at the top of the first cell that uses phoenix (`%%phoenix` or
`%phoenix …`), which waits for it if it is not done yet.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class

from phoenix_nb.notebook.session import get_session, reset_session
from phoenix_nb.notebook.transformer import transform_phoenix_cell

# Imported off the main thread after `%load_ext`: everything a first turn needs.
WARM_MODULES = (
    "phoenix_nb.notebook.magics",
    "phoenix_nb.runtime.manager",
    "phoenix_nb.tools.registry",
    "phoenix_nb.llm.provider",
    "anthropic",
)


def _magics() -> Any:
    return importlib.import_module("phoenix_nb.notebook.magics")


def transform_phoenix_lines(lines: list[str]) -> list[str]:
    """`%phoenix …` lines become awaited calls (notebook/magics.py); other cells pass."""
    if not any(line.startswith("%phoenix") for line in lines):
        return lines
    result: list[str] = _magics().transform_phoenix_lines(lines)
    return result


_TRANSFORMERS = (transform_phoenix_cell, transform_phoenix_lines)


@magics_class
class LazyPhoenixMagics(Magics):
    """`%phoenix`, served by notebook/magics.py's PhoenixMagics once it is imported."""

    _real: Any = None

    @line_magic("phoenix")  # type: ignore[arg-type]  # IPython types the method as Never
    def phoenix(self, line: str) -> None:
        """%phoenix help|status|list|new|use|approve|deny|restrict|cancel|continue|history|…"""
        if self._real is None:
            self._real = _magics().PhoenixMagics(self.shell)
        self._real.phoenix(line)


def _warm() -> None:
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # warming is best effort: the first use reports the error
            return
    # What the imports made lives as long as the kernel: kept out of full collections,
    # or the one they leave due stalls the loop in whatever command allocates next.
    from phoenix_nb.runtime import long_lived

    long_lived.keep()


def load(shell: Any) -> None:
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer not in cleanup:
            cleanup.append(transformer)
    shell.register_magics(LazyPhoenixMagics)
    session = get_session(shell)
    configurables = getattr(shell, "configurables", None)
    if configurables is not None and session.config not in configurables:
        configurables.append(session.config)  # so `%config Phoenix.…` reaches it
    from phoenix_nb.sandbox import detect_sandbox_soon  # probed once per process

    detect_sandbox_soon()
    if _announce_sandbox not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _announce_sandbox)
    _report_store(session.config.home)
    from phoenix_nb.notebook.busy import keep_busy_while_executing

    keep_busy_while_executing(getattr(shell, "kernel", None))
    threading.Thread(target=_warm, name="phoenix-warm-imports", daemon=True).start()


def _uses_phoenix(cell: str) -> bool:
    return any(line.lstrip().startswith(("%phoenix", "%%phoenix")) for line in cell.splitlines())


def _announce_sandbox(info: Any) -> None:
    """Before the first cell that uses phoenix: a warning if the sandbox is missing or
    partial (never a silent downgrade, sandbox/); said once, then unregistered."""
    if not _uses_phoenix(getattr(info, "raw_cell", None) or ""):
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and _announce_sandbox in shell.events.callbacks["pre_run_cell"]:
        shell.events.unregister("pre_run_cell", _announce_sandbox)
    from phoenix_nb.sandbox import detect_sandbox

    sandbox = detect_sandbox()  # waits for the detection `%load_ext` started
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


def _report_store(home: str) -> None:
    """Say once, as one line, that the store cannot be written (read-only or missing)."""
    from pathlib import Path

    from phoenix_nb.store import default_root, store_problem

    problem = store_problem(Path(home).expanduser() if home else default_root())
    if problem:
        print(problem)


def unload(shell: Any) -> None:
    if _announce_sandbox in shell.events.callbacks["pre_run_cell"]:
        shell.events.unregister("pre_run_cell", _announce_sandbox)
    configurables = getattr(shell, "configurables", [])
    for configurable in [c for c in configurables if type(c).__name__ == "Phoenix"]:
        configurables.remove(configurable)
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer in cleanup:
            cleanup.remove(transformer)
    reset_session()
