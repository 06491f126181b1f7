"""The kernel tools' face: each name is the package's own and the registry declares its tools.

The registry and the runtime import only these (an import-linter contract holds
that); each name is the real object of the module that defines it.
"""

from __future__ import annotations

import phoenix_nb.tools.kernel as kernel
from phoenix_nb.tools.base import SchemaTool, Tool
from phoenix_nb.tools.registry import tools_for


def test_every_name_of_the_face_is_defined_in_the_package() -> None:
    # The names themselves are pinned with every package's in tests/runtime/test_front_door.py.
    for name in kernel.__all__:
        value = getattr(kernel, name)
        assert value.__module__.startswith("phoenix_nb.tools.kernel."), name


def test_the_registry_declares_every_kernel_tool_of_the_face() -> None:
    tools = [getattr(kernel, name) for name in kernel.__all__ if name.endswith("Tool")]
    declared = {type(t) for t in tools_for(is_sub_agent=False)}
    for cls in tools:
        assert cls in declared, cls.__name__
        assert issubclass(cls, SchemaTool) and isinstance(cls(), Tool)
