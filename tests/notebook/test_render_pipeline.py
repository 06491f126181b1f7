"""Every renderer shows every tool's input and output, on records the real pipeline made.

Hand-written fixtures let the think tool's renamed field slip through (the tool
stored `thoughts`, everything downstream read `thought`, and a real think call
rendered empty). Here the record comes from real turns: the official SDK over
loopback to the fake Messages API, the real runtime and tools (bash, patch,
keyword_search, think, the four kernel tools on a `DictKernel`, sub-agents, an
approval, a failing command and a continuation), projected by the core and
rendered by all three fallbacks. Each tool's telling input and its output must
appear in each of them, and what the kernel tools' typed displays say (the names
inspected, the cells read, how run_python ended, the proposal's explanation).

The hand-written fixtures the other renderer tests use are held to the same
producer here: every tool call in them names only input fields the tool's own
schema declares.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.notebook.render import render_html, render_markdown, render_plain
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use
from phoenix_nb.tools.kernel_port import DictKernel, HistoryEntry
from phoenix_nb.tools.registry import tools_for
from tests.runtime.harness import assert_valid_history, phoenix_for, project_dir

FIXTURES = [
    Path(__file__).parent / "fixtures" / "record_full.json",
    Path(__file__).parents[1] / "browser" / "fixtures" / "sample_record.json",
]

BASH_IN, BASH_OUT = "echo bash-out-41", "bash-out-41"
THOUGHTS = "weigh-option-b-before-a"
QUERY, NEEDLE = "where-the-needle-lives", "needlefunction"
PATCH_PATH, PATCH_NEW = "notes.txt", "patched-line-77"
FAIL_IN, FAIL_OUT = "echo failing-out-9 && exit 3", "failing-out-9"
REASON = "write-the-notes-file"
SUB_TASK, SUB_RESULT = "count-the-python-files", "sub-agent-found-2-files"
SUMMARY = "summary-of-everything-done"
VARIABLE, VALUE = "sales_q3", [31, 17, 29]
CELL = f"{VARIABLE} = {VALUE}"
RUN_CODE = "print('py-out-' + str(sum(sales_q3)), flush=True)\nimport os; os._exit(5)"
RUN_OUT = "py-out-77"
PROPOSED, EXPLAIN = "sales_q3.sort()", "sort-the-quarter-for-the-chart"


def _is_sub_agent(req: FakeRequest) -> bool:
    return any(t.get("name") == "submit_result" for t in req.body.get("tools") or [])


def _sub_agent_reply(req: FakeRequest) -> Turn:
    if req.tool_results:
        return Turn([tool_use("submit_result", {"result": SUB_RESULT, "success": True})])
    return Turn([tool_use("bash", {"command": "echo sub-work"})])


async def _record(fake: FakeAnthropic, tmp_path: Path) -> dict[str, Any]:
    project = project_dir(tmp_path)
    (project / "lib.py").write_text(f"def {NEEDLE}():\n    return 1\n")
    fake.add_rule(_is_sub_agent, _sub_agent_reply)
    kernel = DictKernel(namespace={VARIABLE: VALUE}, entries=[HistoryEntry(1, CELL)])
    async with phoenix_for(fake, tmp_path, kernel=kernel) as phoenix:
        conv = phoenix.create(cwd=project)
        fake.script(
            Turn(
                [
                    text("Looking around."),
                    tool_use("bash", {"command": BASH_IN}),
                    tool_use("think", {"thoughts": THOUGHTS}),
                    tool_use("keyword_search", {"query": QUERY, "search_terms": [NEEDLE]}),
                    tool_use("inspect_variables", {"names": [VARIABLE]}),
                    tool_use("kernel_history", {"last": 3}),
                    tool_use("run_python", {"code": RUN_CODE}),
                    tool_use("propose_cell", {"code": PROPOSED, "explanation": EXPLAIN}),
                ]
            ),
            Turn([tool_use("bash", {"command": FAIL_IN})]),
            Turn([tool_use("request_mode_upgrade", {"reason": REASON})]),
        )
        state = await conv.run("explore")
        assert state.name == "awaiting_mode_approval", state
        fake.script(
            Turn(
                [
                    tool_use(
                        "patch",
                        {
                            "path": PATCH_PATH,
                            "patches": [{"operation": "overwrite", "newText": PATCH_NEW + "\n"}],
                        },
                    )
                ]
            ),
            Turn([tool_use("spawn_agents", {"tasks": [{"task": SUB_TASK}]})]),
            Turn([text("All done.")]),
        )
        await conv.approve()
        state = await conv.wait()
        assert state.name == "idle", state
        assert (project / PATCH_PATH).read_text() == PATCH_NEW + "\n"
        fake.script(Turn([text(SUMMARY)]))
        await conv.trigger_continuation()
        await conv.wait()
        assert_valid_history(conv)
        return conv.payload()


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import asyncio

    async def make() -> dict[str, Any]:
        with FakeAnthropic() as fake:
            return await _record(fake, tmp_path_factory.mktemp("pipeline"))

    return asyncio.run(make())


# (what, the input shown, the output shown); plain keeps think's text to its
# summary and a patch to its line counts (its diff is in the other two)
EXPECTED = [
    ("bash", BASH_IN, BASH_OUT),
    ("think", THOUGHTS, None),
    ("keyword_search", QUERY, "lib.py"),
    ("failing bash", FAIL_IN, FAIL_OUT),
    ("request_mode_upgrade", REASON, "approved"),
    ("patch", PATCH_PATH, PATCH_NEW),
    ("spawn_agents", SUB_TASK, SUB_RESULT),
    ("continuation", None, SUMMARY),
    ("inspect_variables", VARIABLE, "17"),
    ("kernel_history", None, CELL),
    ("run_python", "sum(sales_q3)", RUN_OUT),
    ("propose_cell", PROPOSED, "Proposed."),
]

# What each kernel tool's typed display says, shown by every renderer.
DISPLAYED = [
    ("inspect_variables", VARIABLE),
    ("kernel_history", "last 3 cells"),
    ("run_python", "exit 5"),
    ("propose_cell", EXPLAIN),
]


@pytest.mark.parametrize("renderer", [render_html, render_markdown, render_plain])
@pytest.mark.parametrize(("what", "shown_in", "shown_out"), EXPECTED)
def test_every_renderer_shows_each_tools_input_and_output(
    record: dict[str, Any], renderer: Any, what: str, shown_in: str | None, shown_out: str | None
) -> None:
    out = renderer(record)
    if renderer is render_plain and what == "patch":
        shown_out = "+1 −0"
    if renderer is render_html:
        out = html.unescape(out)
    if shown_in is not None:
        assert shown_in in out, f"{what}: input {shown_in!r} not shown by {renderer.__name__}"
    if shown_out is not None:
        assert shown_out.lower() in out.lower(), (
            f"{what}: output {shown_out!r} not shown by {renderer.__name__}"
        )


@pytest.mark.parametrize("renderer", [render_html, render_markdown, render_plain])
@pytest.mark.parametrize(("tool", "words"), DISPLAYED)
def test_every_renderer_shows_what_the_kernel_tools_displays_say(
    record: dict[str, Any], renderer: Any, tool: str, words: str
) -> None:
    out = renderer(record)
    if renderer is render_html:
        out = html.unescape(out)
    assert words in out, f"{tool}: {words!r} not shown by {renderer.__name__}"


def _calls(value: Any) -> list[dict[str, Any]]:
    """Every tool call (a mapping with a name and an input) anywhere in a record."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if isinstance(value.get("name"), str) and isinstance(value.get("input"), dict):
            found.append(value)
        for item in value.values():
            found += _calls(item)
    elif isinstance(value, list):
        for item in value:
            found += _calls(item)
    return found


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_hand_written_fixtures_use_the_tools_own_input_fields(path: Path) -> None:
    schemas = {
        t.name: t.input_schema
        for t in [*tools_for(is_sub_agent=False), *tools_for(is_sub_agent=True)]
    }
    calls = _calls(json.loads(path.read_text()))
    assert calls, f"{path.name} holds no tool call"
    for call in calls:
        schema = schemas.get(call["name"])
        if schema is None:
            continue  # a tool from another agent (seed 002's read/ls …): not ours to check
        declared = set(schema.get("properties", {}))
        assert set(call["input"]) <= declared, (path.name, call["name"], set(call["input"]))


def test_summary_fields_are_the_tools_declared_inputs() -> None:
    """Each tool's declared summary field (`Tool.summary_field`) is an input it declares."""
    for tool in [*tools_for(is_sub_agent=False), *tools_for(is_sub_agent=True)]:
        if tool.summary_field:
            assert tool.summary_field in tool.input_schema.get("properties", {}), tool.name
