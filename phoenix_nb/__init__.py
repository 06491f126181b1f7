"""phoenix_nb: a trustworthy coding agent inside the Jupyter notebook.

`%load_ext phoenix_nb` registers the `%%phoenix` cell and `%phoenix` line
commands. The Python API is the front door below:

    from phoenix_nb import Phoenix, Settings
    phoenix = Phoenix(Settings(model="claude-sonnet-5-5"))
    conv = phoenix.open("fix-tests", cwd="~/project")
    state = await conv.run("Why does test_x fail?")

Its names are imported on first use, so `import phoenix_nb` (and `%load_ext`)
does not pay for the runtime before anyone asks for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phoenix_nb.errors import PhoenixError
    from phoenix_nb.runtime.manager import Conversation, Phoenix
    from phoenix_nb.runtime.settings import Settings

__version__ = "0.1.0"

__all__ = ["Conversation", "Phoenix", "PhoenixError", "Settings", "__version__"]

_FRONT_DOOR = {
    "Conversation": "phoenix_nb.runtime.manager",
    "Phoenix": "phoenix_nb.runtime.manager",
    "PhoenixError": "phoenix_nb.errors",
    "Settings": "phoenix_nb.runtime.settings",
}


def __getattr__(name: str) -> Any:
    if name in _FRONT_DOOR:
        return getattr(importlib.import_module(_FRONT_DOOR[name]), name)
    raise AttributeError(f"module 'phoenix_nb' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_FRONT_DOOR])


def load_ipython_extension(shell: Any) -> None:
    from phoenix_nb.notebook.extension import load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from phoenix_nb.notebook.extension import unload

    unload(shell)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "phoenix-nb"}]
