"""Sub-agents end to end (REQ-BED-008, 009, 018, 024; issue "Sub-agents: parallel,
isolated, always finishing").

Parent and children talk to the same fake Messages API through the real SDK;
rules tell them apart by system prompt and by the child's task (its first user
message). Children run real bash in the real Landlock sandbox; the process
table is read directly to prove that nothing a child started outlives it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.messages import to_api_messages, validate_chain
from phoenix_nb.core.models import model_info
from phoenix_nb.core.states import Idle
from phoenix_nb.core.values import Mode, Usage
from phoenix_nb.runtime.manager import Conversation, Phoenix
from phoenix_nb.runtime.prompts import PARENT_PROMPT
from phoenix_nb.runtime.settings import SubAgentLimits
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Fault, Turn, text, tool_use

from .harness import MODEL, assert_valid_history, phoenix_for, process_alive, project_dir

pytestmark = pytest.mark.timeout(60)

Reply = Turn | Fault
PARENT_MARK = PARENT_PROMPT.split("\n")[0][:40]


# --- scripting helpers ---------------------------------------------------------------


def first_user_text(req: FakeRequest) -> str:
    messages = req.body.get("messages", []) if isinstance(req.body, dict) else []
    if not messages:
        return ""
    content = messages[0].get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def is_parent(req: FakeRequest) -> bool:
    return str(req.body.get("system", "")).startswith(PARENT_MARK)


def is_child(task: str) -> Callable[[FakeRequest], bool]:
    return lambda req: not is_parent(req) and first_user_text(req) == task


def turn_number(req: FakeRequest) -> int:
    """How many assistant messages this conversation has had before this request."""
    return sum(1 for m in req.body.get("messages", []) if m.get("role") == "assistant")


def scripted(*replies: Reply) -> Callable[[FakeRequest], Reply]:
    """A child's replies by turn: the n-th request of that child gets replies[n]."""
    return lambda req: replies[min(turn_number(req), len(replies) - 1)]


def submit(result: str, success: bool = True) -> Turn:
    return Turn([tool_use("submit_result", {"result": result, "success": success})])


def spawn(tasks: list[str], **extra: Any) -> Turn:
    return Turn([tool_use("spawn_agents", {"tasks": [{"task": t} for t in tasks], **extra})])


def script_parent(
    fake: FakeAnthropic, tasks: list[str], final: str = "All sub-agents reported."
) -> None:
    fake.add_rule(is_parent, scripted(spawn(tasks), Turn([text(final)])))


def spawn_result(fake: FakeAnthropic) -> dict[str, Any]:
    """The tool result the parent's model received for its spawn_agents call."""
    for req in fake.requests:
        if is_parent(req) and req.tool_results:
            return req.tool_results[0]
    raise AssertionError("the parent never got a spawn_agents result")


def spawn_results(fake: FakeAnthropic) -> list[dict[str, Any]]:
    """Every spawn_agents result the parent's model received, oldest first."""
    return [req.tool_results[0] for req in fake.requests if is_parent(req) and req.tool_results]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content)
    return str(content)


def sections(result: str) -> list[tuple[str, str, str]]:
    """(task, status, body) per task, in the order the parent's result lists them."""
    found = re.findall(r"## Task \d+: (.*?)\nStatus: (\w+)\n(.*?)(?=\n\n## Task|\Z)", result, re.S)
    return [(t, s, b) for t, s, b in found]


def child_requests(fake: FakeAnthropic, task: str) -> list[FakeRequest]:
    return [r for r in fake.requests if is_child(task)(r)]


def child_tool_outputs(fake: FakeAnthropic, task: str) -> list[str]:
    return [result_text(b) for r in child_requests(fake, task) for b in r.tool_results]


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains `marker` (the process table, not our bookkeeping)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and process_alive(int(entry)):
            pids.append(int(entry))
    return pids


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


def assert_valid_stored_history(phoenix: Phoenix, conversation_id: str) -> None:
    history = phoenix.store.messages(conversation_id)
    assert validate_chain(history) == [], validate_chain(history)
    roles = [m["role"] for m in to_api_messages(history)]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


def subagent_tasks() -> list[asyncio.Task[Any]]:
    return [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("phoenix-subagent-") and not t.done()
    ]


def conversation_loops() -> list[str]:
    """Slugs of the conversations whose runtime is open: each runs its loop as a task
    named phoenix-conversation-<slug> until it is closed."""
    prefix = "phoenix-conversation-"
    return [
        t.get_name().removeprefix(prefix)
        for t in asyncio.all_tasks()
        if t.get_name().startswith(prefix) and not t.done()
    ]


def assert_nothing_left(phoenix: Phoenix, parent: Conversation) -> None:
    assert phoenix.spawner.live_children() == []
    assert [slug for slug in conversation_loops() if slug != parent.slug] == []
    assert subagent_tasks() == []


needs_sandbox = pytest.mark.skipif(
    not detect_sandbox().available, reason="children are Restricted only where Landlock exists"
)


# --- tests ---------------------------------------------------------------------------------


async def test_three_children_run_in_parallel_and_report_in_request_order(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-008: the children run at the same time; one result, in request order.

    Each child's command waits for a file the test creates only once all three
    children have asked the model for their first turn. Run one after another,
    the first child's command would hold the others back, so "all three asked"
    never happens: the overlap is shown by order, not by a clock, and holds on a
    loaded machine."""
    tasks = ["count files", "read app.py", "list tests"]
    project = project_dir(tmp_path)
    go = project / "go"
    script_parent(fake_anthropic, tasks)
    for task in tasks:
        wait = f"for i in $(seq 1200); do [ -e {go} ] && break; sleep 0.05; done"
        fake_anthropic.add_rule(
            is_child(task),
            scripted(
                Turn([tool_use("bash", {"command": f"{wait}; [ -e {go} ] && echo done-{task}"})]),
                submit(f"finding for {task}"),
            ),
        )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project)
        run = asyncio.ensure_future(parent.run("investigate three things"))
        deadline = time.monotonic() + 60
        while not all(child_requests(fake_anthropic, t) for t in tasks):
            assert time.monotonic() < deadline, "the children did not all start together"
            assert not run.done(), run
            await asyncio.sleep(0.01)  # polling the fake's log, not a stand-in for an event
        go.write_text("")
        await run
        assert isinstance(parent.state.phase, Idle)
        assert parent.history()[-1]["content"]["blocks"][0]["text"] == "All sub-agents reported."
        found = sections(result_text(spawn_result(fake_anthropic)))
        assert [(t, s) for t, s, _ in found] == [(t, "success") for t in tasks]
        assert [b.strip() for _, _, b in found] == [f"finding for {t}" for t in tasks]
        for task in tasks:
            outs = child_tool_outputs(fake_anthropic, task)
            assert any(f"done-{task}" in out for out in outs), outs
        assert_valid_history(parent)
        assert_nothing_left(phoenix, parent)


async def test_failure_timeout_and_exhaustion_all_reach_the_parent(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-008/024: every way a child can end comes back as information, in request
    order, and the parent carries on with it."""
    marker = f"sleep 30.{uuid.uuid4().int % 10**6}"
    window = model_info(MODEL).context_window
    tasks = ["auth breaks", "overloaded", "hangs in bash", "huge context", "fine"]
    script_parent(fake_anthropic, tasks, final="I will retry the failed ones.")
    fake_anthropic.add_rule(is_child("auth breaks"), Fault.status(401))
    fake_anthropic.add_rule(is_child("overloaded"), Fault.status(529))
    fake_anthropic.add_rule(
        is_child("hangs in bash"), Turn([tool_use("bash", {"command": marker})])
    )
    fake_anthropic.add_rule(
        is_child("huge context"),
        Turn(
            [tool_use("bash", {"command": "echo never"})],
            usage=Usage(input_tokens=int(window * 0.95), output_tokens=10),
        ),
    )
    fake_anthropic.add_rule(is_child("fine"), submit("all good"))
    async with phoenix_for(
        fake_anthropic, tmp_path, sub_agents=SubAgentLimits(timeout=8.0)
    ) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        started = time.monotonic()
        await parent.run("five tasks")
        elapsed = time.monotonic() - started
        print(f"\nmixed outcomes settled in {elapsed:.2f} s (timeout 8 s)")
        assert isinstance(parent.state.phase, Idle)
        assert parent.history()[-1]["content"]["blocks"][0]["text"].startswith("I will retry")
        block = spawn_result(fake_anthropic)
        found = sections(result_text(block))
        assert [t for t, _, _ in found] == tasks
        status = {t: (s, b) for t, s, b in found}
        assert status["auth breaks"][0] == "failure"
        assert "ANTHROPIC_API_KEY" in status["auth breaks"][1]
        assert status["overloaded"][0] == "failure" and "3 attempts" in status["overloaded"][1]
        assert len(child_requests(fake_anthropic, "overloaded")) == 3  # retried, then failed
        assert status["hangs in bash"][0] == "timeout" and "8 s" in status["hangs in bash"][1]
        assert status["huge context"][0] == "failure"
        assert "Context window exhausted" in status["huge context"][1]
        assert status["fine"] == ("success", "all good")
        assert block["is_error"] is False  # one success: the call as a whole did something
        # The timed-out child's bash was killed, and no child is left behind.
        assert await wait_until(lambda: processes_with(marker) == [], timeout=30)
        assert_nothing_left(phoenix, parent)
        for child in phoenix.store.children(parent.id):
            assert_valid_stored_history(phoenix, child["id"])
            assert child["state"] in ("completed", "failed"), child["state"]
        assert_valid_history(parent)


@needs_sandbox
async def test_children_are_restricted_even_under_an_unrestricted_parent(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-018: the kernel denies a child's write; the file is untouched."""
    proj = project_dir(tmp_path)
    before = (proj / "app.py").read_text()
    task = "try to write"
    script_parent(fake_anthropic, [task])
    fake_anthropic.add_rule(
        is_child(task),
        scripted(
            Turn([tool_use("bash", {"command": "echo x > app.py && echo WROTE"})]),
            submit("could not write", success=False),
        ),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=proj, mode="unrestricted")
        await parent.run("delegate a write")
        (child,) = phoenix.store.children(parent.id)
        assert child["mode"] == Mode.RESTRICTED.value
        (output,) = child_tool_outputs(fake_anthropic, task)
        assert "WROTE" not in output
        assert "Read-only file system" in output or "Permission denied" in output, output
        assert (proj / "app.py").read_text() == before
        (found,) = sections(result_text(spawn_result(fake_anthropic)))
        assert found[1] == "failure" and "could not write" in found[2]
        assert parent.mode is Mode.UNRESTRICTED


async def test_child_asking_for_spawn_or_upgrade_gets_a_clear_error(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Children have no spawn_agents and no request_mode_upgrade; asking is answered
    with an error the child can act on, and the child still finishes."""
    task = "nest and escalate"
    script_parent(fake_anthropic, [task])
    fake_anthropic.add_rule(
        is_child(task),
        scripted(
            Turn(
                [
                    tool_use("spawn_agents", {"tasks": [{"task": "grandchild"}]}),
                    tool_use("request_mode_upgrade", {"reason": "write"}),
                ]
            ),
            submit("did it alone"),
        ),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.run("delegate")
        first = child_requests(fake_anthropic, task)[0]
        offered = {t["name"] for t in first.body["tools"]}
        assert "submit_result" in offered and "bash" in offered
        assert not offered & {"spawn_agents", "request_mode_upgrade"}
        (child,) = phoenix.store.children(parent.id)
        answers = [
            m["content"] for m in phoenix.store.messages(child["id"]) if m["message_type"] == "tool"
        ][:2]
        assert [a["is_error"] for a in answers] == [True, True]
        assert "spawn_agents is not available to sub-agents" in answers[0]["content"]
        assert "request_mode_upgrade is not available to sub-agents" in answers[1]["content"]
        # The model sees the refusals too (as text: the API refuses a history whose
        # tool_use names a tool the request does not offer).
        seen = child_requests(fake_anthropic, task)[1].last_user_text
        assert "spawn_agents is not available to sub-agents" in seen
        assert "request_mode_upgrade is not available to sub-agents" in seen
        assert_valid_stored_history(phoenix, child["id"])
        assert not any(first_user_text(r) == "grandchild" for r in fake_anthropic.requests)
        (found,) = sections(result_text(spawn_result(fake_anthropic)))
        assert found[1:] == ("success", "did it alone"), found
        assert phoenix.store.get_conversation(parent.id)["state"] == "idle"


async def test_child_ending_without_submit_is_reminded_once_then_failed(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A child that ends its turn without submit_result is reminded once; a second
    plain ending fails it, and one that obeys the reminder succeeds."""
    tasks = ["forgets twice", "forgets once"]
    script_parent(fake_anthropic, tasks)
    fake_anthropic.add_rule(is_child("forgets twice"), Turn([text("I think it is fine.")]))
    fake_anthropic.add_rule(
        is_child("forgets once"), scripted(Turn([text("Done, I think.")]), submit("obeyed"))
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.run("two tasks")
        for task in tasks:
            reqs = child_requests(fake_anthropic, task)
            assert len(reqs) == 2, f"{task}: reminded exactly once"
            assert "submit_result" in reqs[1].last_user_text
        found = sections(result_text(spawn_result(fake_anthropic)))
        assert found[0][1] == "failure" and "without calling submit_result" in found[0][2]
        assert found[1][1:] == ("success", "obeyed")
        for child in phoenix.store.children(parent.id):
            assert_valid_stored_history(phoenix, child["id"])


async def test_cancelling_the_parent_leaves_no_child_task_or_process(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Cancel mid-flight: every child stops, its processes die (process table), the
    parent records synthetic results, every history stays valid."""
    tag = uuid.uuid4().int % 10**6
    tasks = [f"long {i}" for i in range(3)]
    markers = {t: f"sleep 60.{tag}{i}" for i, t in enumerate(tasks)}
    script_parent(fake_anthropic, tasks)
    for task in tasks:
        fake_anthropic.add_rule(
            is_child(task),
            scripted(Turn([tool_use("bash", {"command": markers[task]})]), submit("never")),
        )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.post_message("start long work")
        assert await wait_until(lambda: all(processes_with(m) for m in markers.values()))
        pids = [p for m in markers.values() for p in processes_with(m)]
        assert len(subagent_tasks()) == 3
        runtimes = phoenix.spawner.live_children()
        assert len(runtimes) == 3
        await parent.cancel()
        # Nothing is left the moment cancel returns: no polling for the tasks.
        assert_nothing_left(phoenix, parent)
        assert all(r.closed and r.live_tasks() == [] for r in runtimes)
        assert await wait_until(lambda: not any(process_alive(p) for p in pids), timeout=30)
        assert all(processes_with(m) == [] for m in markers.values())
        assert isinstance(parent.state.phase, Idle)
        (result,) = [m["content"] for m in parent.history() if m["message_type"] == "tool"]
        assert result["is_error"] and result["content"].count("Status: cancelled") == 3
        assert_valid_history(parent)
        children = phoenix.store.children(parent.id)
        assert len(children) == 3
        for child in children:
            assert_valid_stored_history(phoenix, child["id"])
            assert child["state"] == "failed", child["state"]
        # The parent goes on after the cancel.
        fake_anthropic.clear()
        fake_anthropic.script(Turn([text("Cancelled, as you asked.")]))
        await parent.run("ok?")
        assert parent.history()[-1]["content"]["blocks"][0]["text"] == "Cancelled, as you asked."


async def test_children_are_hidden_from_the_list_and_linked_to_their_parent(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-009: stored with the parent id, not user-initiated, out of the user's
    list, and reachable from the parent's record."""
    tasks = ["alpha", "beta"]
    script_parent(fake_anthropic, tasks)
    for task in tasks:
        fake_anthropic.add_rule(is_child(task), submit(f"{task} ok"))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.run("two")
        assert [c["id"] for c in phoenix.list()] == [parent.id]
        children = phoenix.store.children(parent.id)
        assert len(children) == 2
        assert all(
            c["parent_conversation_id"] == parent.id and not c["user_initiated"] for c in children
        )
        steps = [s for c in parent.payload()["cycles"] for s in c["steps"]]
        (agents_step,) = [s for s in steps if s["kind"] == "sub_agents"]
        linked = [a["conversation_id"] for a in agents_step["agents"]]
        assert sorted(linked) == sorted(c["id"] for c in children)
        by_id = {c["id"]: c for c in children}
        for agent, task in zip(agents_step["agents"], tasks, strict=True):
            assert agent["task"] == task and agent["outcome"] == "success"
            first = phoenix.store.messages(agent["conversation_id"])[0]
            assert first["content"]["text"] == task
            assert by_id[agent["conversation_id"]]["cwd"] == parent.cwd


async def test_concurrency_is_bounded(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """With max_parallel_sub_agents=2, four sleeping children never run three at once."""
    tasks = [f"sleeper {i}" for i in range(4)]
    script_parent(fake_anthropic, tasks)
    command = "date +%s.%N; sleep 0.5; date +%s.%N"
    for task in tasks:
        fake_anthropic.add_rule(
            is_child(task), scripted(Turn([tool_use("bash", {"command": command})]), submit("z"))
        )
    async with phoenix_for(
        fake_anthropic, tmp_path, sub_agents=SubAgentLimits(max_parallel=2)
    ) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.run("four")
        spans = []
        for task in tasks:
            (output,) = child_tool_outputs(fake_anthropic, task)
            start, end = (float(x) for x in re.findall(r"\d{9,}\.\d+", output)[:2])
            spans.append((start, end))
        edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        running = peak = 0
        for _, delta in edges:
            running += delta
            peak = max(peak, running)
        print(f"\npeak concurrency {peak} of 4 children (limit 2)")
        assert peak == 2
        found = sections(result_text(spawn_result(fake_anthropic)))
        assert [s for _, s, _ in found] == ["success"] * 4


async def test_child_with_a_missing_directory_fails_without_stopping_the_others(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Bad input gets a clear error and loses nothing: the sibling still reports."""
    fake_anthropic.add_rule(
        is_parent,
        scripted(
            Turn(
                [
                    tool_use(
                        "spawn_agents",
                        {"tasks": [{"task": "elsewhere", "cwd": "no/such/dir"}, {"task": "here"}]},
                    )
                ]
            ),
            Turn([text("One could not start.")]),
        ),
    )
    fake_anthropic.add_rule(is_child("here"), submit("here ok"))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.run("go")
        found = sections(result_text(spawn_result(fake_anthropic)))
        assert found[0][:2] == ("elsewhere", "failure")
        assert "no/such/dir" in found[0][2] and "does not exist" in found[0][2]
        assert found[1] == ("here", "success", "here ok")
        assert not child_requests(fake_anthropic, "elsewhere")
        assert len(phoenix.store.children(parent.id)) == 1
        assert isinstance(parent.state.phase, Idle)
        assert_valid_history(parent)


async def test_per_call_timeout_is_honoured_within_the_bound(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A spawn_agents call may set its own timeout; it is clamped to
    sub_agent_timeout_max, and nonsense falls back to the default.

    Stopping a child includes its first sandboxed command's start and a grace
    for its open calls, seconds on a loaded machine; so the short call is shown
    to be honoured against a default of 60 s, not against a tight clock."""
    tag = uuid.uuid4().int % 10**6
    limits = {
        "short": (0.5, SubAgentLimits(timeout=60.0, timeout_max=60.0)),
        "greedy": (10_000, SubAgentLimits(timeout=1.0, timeout_max=1.5)),
        "nonsense": ("soon", SubAgentLimits(timeout=1.0, timeout_max=1.5)),
    }
    replies = iter(
        [
            Turn([tool_use("spawn_agents", {"tasks": [{"task": task}], "timeout": limit})])
            for task, (limit, _) in limits.items()
        ]
    )
    fake_anthropic.add_rule(
        is_parent, lambda req: Turn([text("noted")]) if req.tool_results else next(replies)
    )
    for i, task in enumerate(limits):
        fake_anthropic.add_rule(
            is_child(task), Turn([tool_use("bash", {"command": f"sleep 90.{tag}{i}"})])
        )
    took: dict[str, float] = {}
    said: dict[str, str] = {}
    for task, (_, sub_agents) in limits.items():
        async with phoenix_for(fake_anthropic, tmp_path, sub_agents=sub_agents) as phoenix:
            parent = phoenix.create(cwd=project_dir(tmp_path))
            started = time.monotonic()
            await parent.run(f"spawn {task}")
            took[task] = time.monotonic() - started
            (found,) = sections(result_text(spawn_results(fake_anthropic)[-1]))
            assert found[1] == "timeout", found
            said[task] = found[2]
            assert_nothing_left(phoenix, parent)
    print(f"\nper-call timeouts took {took} (asked 0.5 of 60; 10000 -> max 1.5; default 1)")
    assert "within 0.5 s" in said["short"] and took["short"] < 60.0
    assert "within 1.5 s" in said["greedy"]  # clamped to the bound
    assert "within 1 s" in said["nonsense"]  # the default
    assert all(processes_with(f"sleep 90.{tag}{i}") == [] for i in range(3))


async def test_closing_phoenix_mid_flight_stops_every_child(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Shutting the manager down (kernel exit) leaves no child task or process."""
    marker = f"sleep 40.{uuid.uuid4().int % 10**6}"
    script_parent(fake_anthropic, ["a", "b"])
    for task in ("a", "b"):
        fake_anthropic.add_rule(is_child(task), Turn([tool_use("bash", {"command": marker})]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        parent = phoenix.create(cwd=project_dir(tmp_path))
        await parent.post_message("go")
        assert await wait_until(lambda: len(processes_with(marker)) == 2)
        runtimes = phoenix.spawner.live_children()
        pids = processes_with(marker)
    assert subagent_tasks() == []
    assert all(r.closed for r in runtimes) and len(runtimes) == 2
    assert await wait_until(lambda: not any(process_alive(p) for p in pids), timeout=30)
