"""phoenix_nb: a trustworthy coding agent inside the Jupyter notebook.

`%load_ext phoenix_nb` registers the `%%phoenix` cell and `%phoenix` line
commands; `phoenix_nb.runtime.manager.Phoenix` is the Python API.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(shell: Any) -> None:
    from phoenix_nb.notebook.extension import load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from phoenix_nb.notebook.extension import unload

    unload(shell)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "phoenix-nb"}]
