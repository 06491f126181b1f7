"""Producer and consumers of updates, notices and tool displays agree on one type each.

The runtime publishes `Update`s whose data is a frozen dataclass per kind
(runtime/updates.py, core/notices.py); tools return a typed `ToolResult.display`
(core/displays.py's `ToolDisplay`) and the checkpoint recorder a typed
`ToolResult.changes` (core/changes.py), stored as JSON only by the core's
`tool_message`, and the renderers read them back through `view.bash_display` /
`view.patch_display` and the displays' `read` classmethods. These tests hold the
two sides together three ways:

- real turns (the official SDK over loopback to the fake Messages API, the real
  runtime and tools, the kernel tools on a `DictKernel`) publish, for every kind,
  exactly that kind's payload type;
- the displays the real tools stored read back through the renderers' readers
  without losing or renaming a field (a key the producer renamed would come
  back empty and fail here);
- mypy, run over a consumer that misspells a field, reports it: a renamed field
  is a type error, not an update rendered empty.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api

from phoenix_nb.core.changes import FileChange, ToolChanges, changes_of
from phoenix_nb.core.codec import from_json, to_json
from phoenix_nb.core.displays import (
    AgentReport,
    BashDisplay,
    ErrorDisplay,
    HistoryDisplay,
    InspectDisplay,
    PatchDisplay,
    ProposalDisplay,
    RunPythonDisplay,
    SearchDisplay,
    SearchTerm,
    SubAgentsDisplay,
    ThinkDisplay,
    ToolErrorKind,
    read_stored,
    stored_display,
)
from phoenix_nb.core.notices import Notice, NoticeData
from phoenix_nb.core.states import ConvState, ToolExecuting
from phoenix_nb.core.values import Mode, ToolResult, ToolUseBlock, Usage
from phoenix_nb.notebook._render import view as v
from phoenix_nb.runtime import updates as up
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from phoenix_nb.tools.kernel_port import DictKernel
from tests.notebook.test_render_pipeline import FIXTURES, _calls
from tests.runtime.harness import assert_valid_history, phoenix_for, project_dir

# The key the checkpoint recorder adds next to a typed display (`ToolResult.changes`);
# everything else a tool stores must be a typed field.
ADDED_ELSEWHERE = {"changes"}

# Each tool's display type, and how a renderer reads the stored JSON back.
KINDS: dict[str, type[Any]] = {
    "bash": BashDisplay,
    "patch": PatchDisplay,
    "think": ThinkDisplay,
    "keyword_search": SearchDisplay,
    "inspect_variables": InspectDisplay,
    "kernel_history": HistoryDisplay,
    "run_python": RunPythonDisplay,
    "propose_cell": ProposalDisplay,
}
READERS: dict[str, Any] = {
    "bash": v.bash_display,
    "patch": v.patch_display,
    "think": lambda d: ThinkDisplay(d["thoughts"]),
    "inspect_variables": InspectDisplay.read,
    "kernel_history": HistoryDisplay.read,
    "run_python": RunPythonDisplay.read,
    "propose_cell": ProposalDisplay.read,
}


async def _run(tmp_path: Path) -> tuple[list[up.Update], list[dict[str, Any]]]:
    project = project_dir(tmp_path)
    (project / "lib.py").write_text("def needlefunction():\n    return 1\n")
    with FakeAnthropic() as fake:
        kernel = DictKernel(namespace={"sales": [3, 1, 2]})
        async with phoenix_for(fake, tmp_path, kernel=kernel) as phoenix:
            conv = phoenix.create(cwd=project)
            sub = conv.subscribe()
            fake.script(
                Turn(
                    [
                        text("Looking."),
                        tool_use("bash", {"command": "echo typed && exit 2"}),
                        tool_use("think", {"thoughts": "plan it"}),
                        tool_use(
                            "keyword_search", {"query": "q", "search_terms": ["needlefunction"]}
                        ),
                        tool_use("inspect_variables", {"names": ["sales"]}),
                        tool_use("kernel_history", {"last": 3}),
                        tool_use("run_python", {"code": "print(sum(sales))"}),
                        tool_use(
                            "propose_cell", {"code": "sales.sort()", "explanation": "Sort them."}
                        ),
                        tool_use("bash", {"command": 7}),  # invalid input
                    ]
                ),
                Turn([tool_use("request_mode_upgrade", {"reason": "write notes"})]),
            )
            state = await conv.run("go")
            assert state.name == "awaiting_mode_approval", state
            fake.script(
                Turn(
                    [
                        tool_use(
                            "patch",
                            {
                                "path": "notes.txt",
                                "patches": [{"operation": "overwrite", "newText": "typed\n"}],
                            },
                        )
                    ]
                ),
                Turn([text("Done.")]),
            )
            await conv.approve()
            state = await conv.wait()
            assert state.name == "idle", state
            assert_valid_history(conv)
            updates = sub.pending()
            sub.close()
            return updates, conv.history()


async def test_real_turns_publish_each_kinds_own_payload_and_tools_store_typed_displays(
    tmp_path: Path,
) -> None:
    updates, history = await _run(tmp_path)
    seen: set[object] = set()
    for update in updates:
        seen.add(update.kind)
        if isinstance(update.kind, up.UpdateKind):
            assert type(update.data).KIND is update.kind, update  # type: ignore[union-attr]
        else:
            assert isinstance(update.kind, Notice)
            assert update.data is None or isinstance(update.data, NoticeData), update
    assert {
        up.STATE,
        up.TEXT_DELTA,
        up.TOOL_INPUT,
        up.TOOL_STARTED,
        up.MESSAGE,
        up.USAGE,
        up.APPROVAL,
        up.REST,
        Notice.UPGRADE_REQUESTED,
        Notice.MODE_CHANGED,
    } <= seen
    approval = next(u.data for u in updates if isinstance(u.data, up.ApprovalNeeded))
    assert approval.reason == "write notes"

    names = {
        b["id"]: b["name"]
        for m in history
        if m["message_type"] == "agent"
        for b in m["content"]["blocks"]
        if b.get("type") == "ToolUseBlock"
    }
    checked = set()
    for message in history:
        if message["message_type"] != "tool":
            continue
        name = names[message["content"]["tool_use_id"]]
        display = message["display_data"]
        if display is None:
            continue
        refusal = ErrorDisplay.read(display)
        if refusal is not None:
            assert refusal.to_json() == display, display
            checked.add(f"{name}: {refusal.error}")
            continue
        typed = set(KINDS[name].__dataclass_fields__)
        assert set(display) - typed <= ADDED_ELSEWHERE, (name, display)
        if "changes" in display:
            found = changes_of(display)
            assert found is not None and found.to_json() == display["changes"], display
            checked.add(f"{name}: changes")
        if name == "keyword_search":
            assert v.search_files(display) == display["files"] == ["lib.py"]
            assert display["ranked_by_helper"] in (True, False)
            checked.add(name)
            continue
        read = READERS[name](display)
        assert isinstance(read, KINDS[name]), (name, read)
        assert read.to_json() == {k: display[k] for k in typed if k in display}, (name, display)
        checked.add(name)
    assert checked == {
        *KINDS,
        "bash: invalid_input",
        "patch: changes",
    }
    bash = next(
        v.bash_display(m["display_data"])
        for m in history
        if m["message_type"] == "tool" and names[m["content"]["tool_use_id"]] == "bash"
    )
    assert bash == BashDisplay("echo typed && exit 2", 2)


def test_display_readers_invert_the_producers_json() -> None:
    """Every field survives to_json → reader, so a key renamed on one side only fails."""
    for shown in (
        BashDisplay("ls", 0),
        BashDisplay("sleep 9", None, timed_out=True, output_truncated=True, background=True),
    ):
        assert v.bash_display(shown.to_json()) == shown
    assert v.patch_display(PatchDisplay("a.py", "-a\n+b\n").to_json()) == PatchDisplay(
        "a.py", "-a\n+b\n"
    )
    agents = SubAgentsDisplay(
        (
            AgentReport("a1", "count files", "success", "2 files", "c-7"),
            AgentReport("a2", "lint", "cancelled", "Cancelled.", ""),
        )
    )
    assert SubAgentsDisplay.read(agents.to_json()) == agents
    assert SubAgentsDisplay.read(json.loads(json.dumps(agents.to_json()))) == agents
    search = SearchDisplay("/p", "q", (SearchTerm("t", 1, 2, ""),), ("a.py", "b.py"), False)
    assert v.search_files(search.to_json()) == ["a.py", "b.py"]
    assert "ranked_by_helper" not in search.to_json()
    background = BashDisplay("serve", None, background=True, pgid=41, log="/run/bg/output.log")
    assert background.to_json()["pgid"] == 41 and background.to_json()["log"].endswith(".log")
    assert "pgid" not in BashDisplay("ls", 0).to_json()  # stored shape unchanged
    for shown in (
        InspectDisplay(("df", "arr"), 1),
        HistoryDisplay(20),
        RunPythonDisplay(timed_out=False, signal=None, exit_code=0, images=2, elapsed=0.25),
        RunPythonDisplay(timed_out=True, signal=9, exit_code=None, images=0, elapsed=30.0),
        ProposalDisplay("df = df.dropna()", "Drop the rows without a price."),
    ):
        stored = json.loads(json.dumps(shown.to_json()))
        assert type(shown).read(stored) == shown, shown  # type: ignore[attr-defined]
    for refusal in (
        ErrorDisplay(ToolErrorKind.INVALID_INPUT, "command must be a string"),
        ErrorDisplay(ToolErrorKind.NO_KERNEL),
    ):
        assert ErrorDisplay.read(json.loads(json.dumps(refusal.to_json()))) == refusal
    assert ErrorDisplay.read({"error": "something newer"}) is None
    assert ErrorDisplay.read(BashDisplay("ls", 0).to_json()) is None


def test_changes_are_stored_next_to_the_display_and_survive_the_codec() -> None:
    """The recorder's typed changes reach the stored JSON under `changes` (where the
    renderers and the labextension read them) and survive a persisted state."""
    changes = ToolChanges(3, 4, (FileChange("a.py", "modified", "0644", "0644", "-a\n+b\n"),))
    stored = stored_display(BashDisplay("edit", 0), changes)
    assert stored is not None
    assert {k: x for k, x in stored.items() if k != "changes"} == BashDisplay("edit", 0).to_json()
    assert changes_of(json.loads(json.dumps(stored))) == changes
    assert stored_display(None, changes) == {"changes": changes.to_json()}
    assert stored_display(None) is None
    for display in (
        BashDisplay("ls", 0),
        SubAgentsDisplay(()),
        ErrorDisplay(ToolErrorKind.NO_KERNEL),
    ):
        result = ToolResult("t1", "out", display=display, changes=changes)
        assert from_json(json.loads(json.dumps(to_json(result)))) == result


ALL_KINDS = (
    BashDisplay("ls", 0),
    BashDisplay("serve", None, background=True, pgid=41, log="/run/bg/output.log"),
    PatchDisplay("a.py", "-a\n+b\n"),
    ThinkDisplay("first A"),
    SubAgentsDisplay((AgentReport("a1", "count", "success", "2", "c-7"),)),
    SearchDisplay("/p", "q", (SearchTerm("t", 1, 2, ""),), ("a.py",), True, True),
    InspectDisplay(("df",), 1),
    HistoryDisplay(20),
    RunPythonDisplay(timed_out=False, signal=None, exit_code=1, images=0, elapsed=0.5),
    ProposalDisplay("x = 1", "Set x."),
    ErrorDisplay(ToolErrorKind.KERNEL_ACCESS_OFF),
)


@pytest.mark.parametrize("display", ALL_KINDS, ids=lambda d: type(d).__name__)
def test_a_stored_display_reads_back_by_its_keys_alone(display: Any) -> None:
    """Where the tool is not known (a state persisted before displays were typed), the
    stored JSON still reads back as the display that made it, changes apart."""
    changes = ToolChanges(1, 2, (FileChange("a.py", "added"),))
    stored = json.loads(json.dumps(stored_display(display, changes)))
    assert read_stored(stored) == (display, changes)
    assert read_stored(display.to_json()) == (display, None)


def test_a_state_persisted_with_untyped_displays_still_restores() -> None:
    """A finished result's display in state_data written before the types existed."""
    call = ToolUseBlock("t2", "bash", {"command": "ls"})
    changes = ToolChanges(3, 4)
    done = ToolResult("t1", "patched", display=PatchDisplay("a.py", "-a\n+a2\n"), changes=changes)
    state = ConvState(ToolExecuting(call, (call,), (done,)), Mode.UNRESTRICTED, Usage(1))
    encoded = to_json(state)
    [old] = encoded["phase"]["completed"]
    old["display"] = stored_display(done.display, done.changes)  # as the old version wrote it
    del old["changes"]
    assert from_json(json.loads(json.dumps(encoded))) == state


def test_old_records_missing_keys_still_read() -> None:
    """Records stored before a field existed read as its empty value, never raise."""
    assert InspectDisplay.read({"names": ["df"]}) == InspectDisplay(("df",), 0)
    assert HistoryDisplay.read({}) == HistoryDisplay(0)
    assert RunPythonDisplay.read({"exit_code": 1}) == RunPythonDisplay(False, None, 1, 0, 0.0)
    assert ProposalDisplay.read(None) == ProposalDisplay("", "")
    assert InspectDisplay.read({"names": "df", "images": True}) == InspectDisplay((), 0)
    assert v.kernel_status("run_python", {}) == v.kernel_status("kernel_history", None) == ""
    assert v.kernel_status("kernel_history", {"last": "3"}) == ""
    assert v.kernel_status("run_python", {"timed_out": True, "elapsed": 30}) == "timed out · 30.0 s"
    assert v.kernel_code({"name": "propose_cell", "input": {"code": "x = 1"}}) == ("x = 1", "")


def test_a_consumer_reading_a_renamed_field_fails_type_checking(tmp_path: Path) -> None:
    """What the dicts allowed (`data["txt"]` rendering empty) is now a mypy error."""
    snippet = tmp_path / "consumer.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from phoenix_nb.core.changes import ToolChanges
            from phoenix_nb.core.displays import ErrorDisplay, ProposalDisplay, RunPythonDisplay
            from phoenix_nb.core.notices import RetryScheduled
            from phoenix_nb.core.values import ToolResult
            from phoenix_nb.notebook._render import view as v
            from phoenix_nb.runtime import updates as up

            def consume(update: up.Update) -> str:
                data = update.data
                if isinstance(data, up.StreamedText):
                    return data.txt
                if isinstance(data, up.ApprovalNeeded):
                    return data.reasons
                if isinstance(data, RetryScheduled):
                    return str(data.attempts)
                return v.bash_display({}).comand

            up.UpdateHub().publish(up.ToolStarted(id="t", nam="bash", input={}))

            def render_kernel(d: object) -> str:
                code = ProposalDisplay.read(d).proposed_code
                return code + str(RunPythonDisplay.read(d).timedout)

            ToolResult("t", "x", display={"command": "ls", "exit_code": 0})
            ToolResult("t", "x", display=ErrorDisplay("invalid_input"))
            ToolResult("t", "x", changes=ToolChanges(before=1, after=2, file=()))
            """
        )
    )
    out, _err, status = mypy_api.run(
        ["--no-incremental", "--follow-imports=silent", "--no-error-summary", str(snippet)]
    )
    assert status == 1, out
    for wrong in (
        '"txt"',
        '"reasons"',
        '"attempts"',
        '"comand"',
        '"nam"',
        '"proposed_code"',
        '"timedout"',
        '"display" to "ToolResult" has incompatible type "dict[str, object]"',
        'Argument 1 to "ErrorDisplay" has incompatible type "str"',
        '"file"',
    ):
        assert wrong in out, (wrong, out)
    assert out.count("error:") == 10, out


RENDER_TS = Path(__file__).parents[2] / "labextension" / "src" / "render.ts"


def test_the_labextension_reads_only_the_producers_keys() -> None:
    """The labextension reads the same stored JSON in TypeScript: every display, changes
    and file-change key it reads is a field of the producer's types, so renaming a field
    on one side fails here instead of drawing empty in JupyterLab."""
    source = RENDER_TS.read_text(encoding="utf-8")
    display_fields = {f.name for kind in ALL_KINDS for f in fields(kind)} | ADDED_ELSEWHERE
    for obj, known in (
        ("display", display_fields),
        ("changes", {f.name for f in fields(ToolChanges)}),
        ("file", {f.name for f in fields(FileChange)}),
    ):
        read = set(re.findall(rf"\b{obj}\.([a-z_]+)\b", source))
        assert read, f"render.ts reads no {obj} keys: has it moved?"
        assert read <= known, (obj, read - known)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_hand_written_fixtures_displays_are_the_producers_types(path: Path) -> None:
    """The renderer fixtures' tool displays hold only the typed fields (plus the keys
    other modules add), with the types the producer gives them."""
    typed_of = KINDS
    checked = 0
    for call in _calls(json.loads(path.read_text())):
        result = call.get("result")
        display = result.get("display") if isinstance(result, dict) else None
        kind = typed_of.get(call["name"])
        if kind is None or not isinstance(display, dict):
            continue
        typed = {f.name for f in fields(kind)}
        assert set(display) - typed <= ADDED_ELSEWHERE, (call["name"], display)
        # Older fixtures predate some fields (bash's `background`): what they hold must
        # read back unchanged; absent fields read as their defaults.
        read: Any = None
        if kind is BashDisplay:
            read = v.bash_display(display)
        elif kind is PatchDisplay:
            read = v.patch_display(display)
        if read is not None:
            shown = {k: x for k, x in read.to_json().items() if k in display}
            assert shown == {k: display[k] for k in typed if k in display}, display
        checked += 1
    assert checked, f"{path.name} has no typed display to check"
