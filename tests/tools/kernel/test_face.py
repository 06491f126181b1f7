"""The kernel tools' face: its names are pinned, so adding or dropping one is deliberate.

The registry and the runtime import only these (an import-linter contract holds
that); each name is the real object of the module that defines it.
"""

from __future__ import annotations

import phoenix_nb.tools.kernel as kernel
from phoenix_nb.tools.base import SchemaTool, Tool
from phoenix_nb.tools.registry import tools_for


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert kernel.__all__ == [
        "EditCellTool",
        "InsertCellTool",
        "InspectVariablesTool",
        "KernelHistoryTool",
        "ProposeCellTool",
        "RunPythonTool",
        "outcome_note",
    ]
    for name in kernel.__all__:
        value = getattr(kernel, name)
        assert value.__module__.startswith("phoenix_nb.tools.kernel."), name


def test_the_registry_declares_every_kernel_tool_of_the_face() -> None:
    tools = [getattr(kernel, name) for name in kernel.__all__ if name.endswith("Tool")]
    declared = {type(t) for t in tools_for(is_sub_agent=False)}
    for cls in tools:
        assert cls in declared, cls.__name__
        assert issubclass(cls, SchemaTool) and isinstance(cls(), Tool)
