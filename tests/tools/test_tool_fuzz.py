"""Hypothesis: no tool's `run` raises on junk input; invalid input is an error naming the tool.

Issue item 7 / acceptance "fuzzing of every tool's input never raises out of
the tool". Every tool of both registries is fuzzed through its real `run`.
Inputs that could do real work outside the temp dir are excluded: patch paths
must stay inside it, and bash never gets a string `command` (so nothing runs).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools.base import Tool, ToolContext
from phoenix_nb.tools.registry import tools_for
from phoenix_nb.tools.schema import validate

ALL_TOOLS: dict[str, Tool] = {
    t.name: t for sub in (False, True) for t in tools_for(is_sub_agent=sub)
}

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def shaped_inputs(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Objects with the schema's own keys (some missing, values junk or right-typed), or junk."""
    keys = list(schema.get("properties", {}))
    if not keys:
        return json_values
    field_values = {k: json_values | st.text(max_size=20) for k in keys}
    if "patches" in field_values:
        patch_item = st.fixed_dictionaries(
            {},
            optional={
                "operation": st.sampled_from(
                    ["overwrite", "replace", "append_eof", "prepend_bof", "x"]
                )
                | json_values,
                "oldText": st.text(max_size=10) | json_values,
                "newText": st.text(max_size=10) | json_values,
            },
        )
        field_values["patches"] = st.lists(patch_item, max_size=3) | json_values
    if "search_terms" in field_values:
        field_values["search_terms"] = st.lists(st.text(max_size=8), max_size=4) | json_values
    shaped = st.fixed_dictionaries({}, optional=field_values)
    extra = st.dictionaries(st.text(max_size=6), json_values, max_size=2)
    return shaped | st.builds(lambda a, b: {**b, **a}, shaped, extra) | json_values


def safe(name: str, value: Any) -> bool:
    if not isinstance(value, Mapping):
        return True
    if name == "bash":
        return not isinstance(value.get("command"), str)
    if name == "patch":
        path = value.get("path")
        if isinstance(path, str):
            return "/" not in path and not path.startswith(("~", "..")) and path not in (".", "")
    return True


def run_once(tool: Tool, value: Any, mode: Mode) -> ToolResult:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ToolContext(
            cwd=Path(tmp),
            mode=mode,
            commands=CommandRunner(info=SandboxInfo(available=True, abi=7)),
        )
        return asyncio.run(tool.run(value, ctx, "toolu_fuzz"))


@pytest.mark.parametrize("name", sorted(ALL_TOOLS))
def test_junk_input_never_raises(name: str) -> None:
    tool = ALL_TOOLS[name]

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(value=shaped_inputs(tool.input_schema), mode=st.sampled_from(list(Mode)))
    def check(value: Any, mode: Mode) -> None:
        assume(safe(name, value))
        result = run_once(tool, value, mode)
        assert isinstance(result, ToolResult)
        assert result.tool_use_id == "toolu_fuzz"
        assert isinstance(result.content, str) and result.content
        if name == "patch" and mode == Mode.RESTRICTED:
            assert result.is_error
        elif validate(value, tool.input_schema) is not None:
            assert result.is_error, result.content
            if name not in ("request_mode_upgrade", "spawn_agents", "submit_result"):
                assert result.content.startswith(f"Invalid input for {name}: "), result.content

    check()
