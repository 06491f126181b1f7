"""Registration with IPython: the magics and the input transformers."""

from __future__ import annotations

from typing import Any

from phoenix_nb.notebook.magics import PhoenixMagics, transform_phoenix_lines
from phoenix_nb.notebook.session import get_session, reset_session
from phoenix_nb.notebook.transformer import transform_phoenix_cell

_TRANSFORMERS = (transform_phoenix_cell, transform_phoenix_lines)


def load(shell: Any) -> None:
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer not in cleanup:
            cleanup.append(transformer)
    shell.register_magics(PhoenixMagics)
    session = get_session(shell)
    configurables = getattr(shell, "configurables", None)
    if configurables is not None and session.config not in configurables:
        configurables.append(session.config)  # so `%config Phoenix.…` reaches it
    sandbox = session.phoenix.sandbox
    if not sandbox.available:
        print(
            "phoenix: the kernel sandbox (Landlock) is unavailable here — conversations run "
            f"Unrestricted only. {sandbox.reason}"
        )
    else:
        from phoenix_nb.tools.sandbox import lost_guarantees

        lost = lost_guarantees()
        if lost:
            print("phoenix: Restricted mode is partial on this host; not guaranteed here:")
            for line in lost:
                print(f"  - {line}")


def unload(shell: Any) -> None:
    configurables = getattr(shell, "configurables", [])
    for configurable in [c for c in configurables if type(c).__name__ == "Phoenix"]:
        configurables.remove(configurable)
    cleanup = shell.input_transformers_cleanup
    for transformer in _TRANSFORMERS:
        if transformer in cleanup:
            cleanup.remove(transformer)
    reset_session()
