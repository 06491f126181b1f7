"""End-to-end turns through the runtime (REQ-BED-002…007, 012, 015…016, 019…023).

Real SDK over loopback to the fake Messages API, real tools, real sandbox,
real store. Each test scripts the model and checks what the user and the
model see afterwards, and that the history stays valid for the API.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from phoenix_nb.core.states import ContextExhausted, Error, Idle
from phoenix_nb.core.transition import BUSY_MESSAGE, EXHAUSTED_MESSAGE
from phoenix_nb.core.values import ErrorKind, Mode, Usage
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.manager import PhoenixError
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text, tool_use

from .harness import (
    assert_valid_history,
    kinds,
    phoenix_for,
    process_alive,
    project_dir,
    tool_results,
)

pytestmark = pytest.mark.timeout(60)


async def collect(conv, text_: str) -> list[up.Update]:
    return [u async for u in await conv.send(text_)]


async def test_three_tools_run_serially_in_request_order(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-004: one at a time, in the model's order, all results sent back together."""
    proj = project_dir(tmp_path)
    log = proj / "order.log"
    calls = [
        tool_use(
            "bash",
            {"command": f"echo start {i} >> order.log; sleep 0.2; echo end {i} >> order.log"},
        )
        for i in range(3)
    ]
    fake_anthropic.script(
        Turn([text("Three steps."), *calls], stop_reason="tool_use"), Turn([text("All done.")])
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj, mode="unrestricted")
        await conv.run("do three things")
        assert isinstance(conv.state.phase, Idle)
        assert log.read_text().split("\n")[:-1] == [
            f"{edge} {i}" for i in range(3) for edge in ("start", "end")
        ]
        second = fake_anthropic.requests[1].body["messages"][-1]["content"]
        ids = [b["tool_use_id"] for b in second if b["type"] == "tool_result"]
        first_ids = [
            b["id"]
            for b in fake_anthropic.requests[1].body["messages"][-2]["content"]
            if b["type"] == "tool_use"
        ]
        assert ids == first_ids and len(ids) == 3
        assert_valid_history(conv)


async def test_failing_tools_report_their_errors_to_the_model(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-004: a failing tool's error goes back to the model, which carries on."""
    proj = project_dir(tmp_path)
    fake_anthropic.script(
        Turn(
            [
                tool_use("bash", {"command": "echo oops >&2; exit 3"}),
                tool_use(
                    "patch",
                    {"path": "app.py", "patches": [{"operation": "overwrite", "newText": "x"}]},
                ),
                tool_use("bash", {"command": 42}),
            ],
            stop_reason="tool_use",
        ),
        Turn([text("I see the errors.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj)
        assert conv.mode is Mode.RESTRICTED
        await conv.run("try things")
        results = fake_anthropic.requests[1].body["messages"][-1]["content"]
        texts = [str(r["content"]) for r in results]
        assert "oops" in texts[0] and "exit code 3" in texts[0]
        assert results[1]["is_error"] and "Patch tool is disabled in Restricted mode" in texts[1]
        assert results[2]["is_error"] and "command" in texts[2]
        assert (proj / "app.py").read_text().startswith("def add")
        assert isinstance(conv.state.phase, Idle)
        assert_valid_history(conv)


async def test_cancel_while_streaming_aborts_and_persists_nothing_partial(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-005: abort the HTTP request, back to Idle, no partial response stored."""
    # ~60 s of streaming: a cancel that waited for the stream would show against the bound.
    fake_anthropic.script(Turn([text("word " * 3000, chunk=5, delay=0.02)]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        sub = conv.subscribe()
        await conv.post_message("write a lot")
        async for update in sub:
            if update.kind == up.TEXT_DELTA:
                break
        started = time.monotonic()
        await conv.cancel()
        elapsed = time.monotonic() - started
        assert isinstance(conv.state.phase, Idle)
        # A bound only a cancel that waits for the stream reaches (100 ms is bench_cancel's).
        assert elapsed < 20
        assert kinds(conv) == ["user"]
        assert await fake_anthropic.wait_for_async(
            lambda f: any(e.kind == "disconnected" for e in f.events), timeout=5
        )
        assert_valid_history(conv)


async def test_cancel_during_tools_kills_the_process_and_answers_every_call(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-005: cancelled for the running tool, skipped for the rest, process gone."""
    proj = project_dir(tmp_path)
    pid_file = proj / "pid"
    fake_anthropic.script(
        Turn(
            [
                tool_use("bash", {"command": "echo done-first"}),
                tool_use("bash", {"command": f"sh -c 'echo $$ > {pid_file}; exec sleep 60'"}),
                tool_use("bash", {"command": "echo never"}),
            ],
            stop_reason="tool_use",
        ),
        Turn([text("after cancel")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj, mode="unrestricted")
        await conv.post_message("run")
        for _ in range(500):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await asyncio.sleep(0.01)
        pid = int(pid_file.read_text())
        assert process_alive(pid)
        started = time.monotonic()
        await conv.cancel()
        assert isinstance(conv.state.phase, Idle)
        while process_alive(pid) and time.monotonic() - started < 30:
            await asyncio.sleep(0.005)
        assert not process_alive(pid), "the tool's process survived cancel"
        results = tool_results(conv)
        assert [r["is_error"] for r in results] == [False, True, True]
        assert "done-first" in results[0]["content"]
        assert "Cancelled" in results[1]["content"] and "Skipped" in results[2]["content"]
        assert conv.runtime.live_tasks() == []
        assert_valid_history(conv)
        # The conversation goes on after a cancel (REQ-BED-005: history preserved).
        await conv.run("and now?")
        assert conv.history()[-1]["content"]["blocks"][0]["text"] == "after cancel"
        assert_valid_history(conv)


async def test_busy_conversation_rejects_messages_with_how_to_cancel(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-002: rejected while working, with the way out."""
    fake_anthropic.script(Turn([tool_use("bash", {"command": "sleep 5"})], stop_reason="tool_use"))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        sub = conv.subscribe()
        await conv.post_message("first")
        async for update in sub:
            if update.kind == up.TOOL_STARTED:
                break
        with pytest.raises(PhoenixError) as info:
            await conv.post_message("second")
        assert str(info.value) == BUSY_MESSAGE
        assert [
            m["content"].get("text") for m in conv.history() if m["message_type"] == "user"
        ] == ["first"]
        await conv.cancel()
        assert_valid_history(conv)


FAULTS = [
    pytest.param(Fault.status(429), ErrorKind.RATE_LIMIT, id="429"),
    pytest.param(Fault.status(529), ErrorKind.SERVER_ERROR, id="529"),
    pytest.param(Fault.status(500), ErrorKind.SERVER_ERROR, id="500"),
    pytest.param(Fault.status(503), ErrorKind.SERVER_ERROR, id="503"),
    pytest.param(Fault.in_stream_error("overloaded_error"), ErrorKind.SERVER_ERROR, id="in-stream"),
    pytest.param(Fault.drop_after(3), ErrorKind.NETWORK, id="drop"),
    pytest.param(Fault.eof_without_stop(), ErrorKind.NETWORK, id="eof"),
    pytest.param(Fault.malformed_json(), None, id="malformed"),
    pytest.param(Fault.stall(5), ErrorKind.NETWORK, id="stall"),
]


@pytest.mark.parametrize(("fault", "kind"), FAULTS)
async def test_retryable_faults_are_retried_three_times_then_error(
    fake_anthropic: FakeAnthropic, tmp_path: Path, fault: Fault, kind: ErrorKind | None
) -> None:
    """REQ-BED-006: retried with backoff, then Error with kind and an actionable message."""
    fake_anthropic.script(fault, fault, fault)
    async with phoenix_for(fake_anthropic, tmp_path, stall_timeout=2.0) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        updates = await collect(conv, "hello")
        phase = conv.state.phase
        assert isinstance(phase, Error), phase
        if kind is not None:
            assert phase.kind is kind
        assert "3 attempts" in phase.message and "Send a message to try again" in phase.message
        retries = [u.data for u in updates if u.kind == "retry"]
        assert [r.attempt for r in retries] == [2, 3]
        assert [r.delay for r in retries] == [1.0, 2.0]  # exponential backoff
        assert len(fake_anthropic.requests) == 3
        assert kinds(conv)[-1] == "error"
        # REQ-BED-006: a user message from Error resumes the conversation.
        fake_anthropic.script(Turn([text("Back again.")]))
        await conv.run("try again")
        assert isinstance(conv.state.phase, Idle)
        assert conv.history()[-1]["content"]["blocks"][0]["text"] == "Back again."
        assert_valid_history(conv)


async def test_retry_after_from_the_server_overrides_backoff_and_recovers(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(Fault.status(429, retry_after=7), Turn([text("Made it.")]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        updates = await collect(conv, "hello")
        retries = [u.data for u in updates if u.kind == "retry"]
        assert retries and retries[0].delay == 7.0 and retries[0].kind == "rate_limit"
        assert isinstance(conv.state.phase, Idle)
        assert conv.history()[-1]["content"]["blocks"][0]["text"] == "Made it."


async def test_auth_failure_is_not_retried(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """REQ-BED-006: non-retryable errors fail at once with a specific message."""
    fake_anthropic.script(Fault.status(401))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("hello")
        phase = conv.state.phase
        assert isinstance(phase, Error) and phase.kind is ErrorKind.AUTH
        assert "ANTHROPIC_API_KEY" in phase.message
        assert len(fake_anthropic.requests) == 1
        assert "test-key" not in str(conv.history())


async def test_deny_keeps_restricted_and_tells_the_agent(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-015: the denial reaches the agent as the tool result; the agent goes on."""
    fake_anthropic.script(
        Turn([tool_use("request_mode_upgrade", {"reason": "fix app.py"})], stop_reason="tool_use"),
        Turn([text("Understood, staying read-only.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        updates = await collect(conv, "fix it")
        assert any(u.kind == up.APPROVAL and u.data.reason == "fix app.py" for u in updates)
        assert conv.state.name == "awaiting_mode_approval"
        await conv.deny()
        await conv.wait()
        assert conv.mode is Mode.RESTRICTED and isinstance(conv.state.phase, Idle)
        denial = fake_anthropic.requests[1].body["messages"][-1]["content"][0]
        assert denial["type"] == "tool_result" and "Denied" in str(denial["content"])
        assert_valid_history(conv)


async def test_approve_unlocks_writes_and_injects_a_mode_message(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-015/017: approval switches mode, the agent is told, patch then works."""
    proj = project_dir(tmp_path)
    fake_anthropic.script(
        Turn([tool_use("request_mode_upgrade", {"reason": "fix add"})], stop_reason="tool_use"),
        Turn(
            [
                tool_use(
                    "patch",
                    {
                        "path": "app.py",
                        "patches": [
                            {"operation": "replace", "oldText": "a - b", "newText": "a + b"}
                        ],
                    },
                )
            ],
            stop_reason="tool_use",
        ),
        Turn([text("Fixed.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj)
        await conv.run("fix it")
        await conv.approve()
        await conv.wait()
        assert conv.mode is Mode.UNRESTRICTED
        assert "a + b" in (proj / "app.py").read_text()
        after_approval = fake_anthropic.requests[1].body["messages"][-1]["content"]
        assert any("Unrestricted" in str(b.get("text", "")) for b in after_approval)
        assert phoenix.store.get_conversation(conv.id)["mode"] == "unrestricted"  # REQ-BED-016
        # REQ-BED-016: downgrade is immediate and persisted.
        await conv.restrict()
        assert conv.mode is Mode.RESTRICTED
        assert phoenix.store.get_conversation(conv.id)["mode"] == "restricted"
        assert_valid_history(conv)


async def test_cancel_while_awaiting_approval(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(
        Turn(
            [
                tool_use("request_mode_upgrade", {"reason": "x"}),
                tool_use("think", {"thoughts": "t"}),
            ],
            stop_reason="tool_use",
        )
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("go")
        await conv.cancel()
        assert isinstance(conv.state.phase, Idle) and conv.mode is Mode.RESTRICTED
        assert len(tool_results(conv)) == 2
        assert_valid_history(conv)


def _usage(fraction: float) -> Usage:
    return Usage(input_tokens=int(200_000 * fraction), output_tokens=10)


async def test_context_threshold_rejects_tools_and_summarises(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-019/020/021: at 90% the tools are not run; a tool-less summary ends it."""
    proj = project_dir(tmp_path)
    marker = proj / "ran"
    fake_anthropic.script(
        Turn(
            [text("Next step."), tool_use("bash", {"command": f"touch {marker}"})],
            stop_reason="tool_use",
            usage=_usage(0.92),
        ),
        Turn([text("Summary: we were fixing add().")]),
        Turn([text("Continuing from the summary.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj, mode="unrestricted")
        await conv.run("work")
        phase = conv.state.phase
        assert isinstance(phase, ContextExhausted)
        assert phase.summary == "Summary: we were fixing add()."
        assert not marker.exists()
        summary_request = fake_anthropic.requests[1].body
        assert "tools" not in summary_request
        assert "bash" in str(summary_request["messages"][-1])
        assert "not executed" in str(tool_results(conv)[0]["content"]).lower()
        with pytest.raises(PhoenixError) as info:
            await conv.post_message("more")
        assert str(info.value) == EXHAUSTED_MESSAGE
        assert_valid_history(conv)
        # REQ-BED-021: a new conversation seeded with the summary and linked to it.
        new = await conv.continue_in_new()
        assert new.record["seeded_from"] == conv.id
        await new.run("carry on")
        first = fake_anthropic.requests[2].body["messages"][0]
        assert "we were fixing add()" in str(first["content"])


async def test_summary_failure_falls_back(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """REQ-BED-020: a failed summary still ends in ContextExhausted with a fallback."""
    fake_anthropic.script(Turn([text("big")], usage=_usage(0.95)), Fault.status(400))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("work")
        phase = conv.state.phase
        assert isinstance(phase, ContextExhausted)
        assert "could not be generated" in phase.summary
        assert_valid_history(conv)


async def test_warning_at_80_percent_and_manual_continuation(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-023: a warning from 80%; the user can trigger continuation by hand."""
    fake_anthropic.script(Turn([text("fine")], usage=_usage(0.83)), Turn([text("Manual summary.")]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        updates = await collect(conv, "work")
        assert isinstance(conv.state.phase, Idle)
        usage = [u.data for u in updates if u.kind == up.USAGE][-1]
        assert usage.warning and not usage.limit_reached
        assert conv.state.context_warning
        assert conv.payload()["context"]["warning"] is True
        await conv.trigger_continuation()
        state = await conv.wait()
        assert (
            isinstance(state.phase, ContextExhausted) and state.phase.summary == "Manual summary."
        )
        assert "tools" not in fake_anthropic.requests[1].body


async def test_cancel_while_awaiting_continuation(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(
        Turn([text("x")], usage=_usage(0.95)), Turn([text("slow " * 200, chunk=5, delay=0.02)])
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        sub = conv.subscribe()
        await conv.post_message("work")
        async for update in sub:
            if update.kind == up.TEXT_DELTA and conv.state.name == "awaiting_continuation":
                break
        await conv.cancel()
        phase = conv.state.phase
        assert isinstance(phase, ContextExhausted) and "cancelled" in phase.summary.lower()
        assert conv.runtime.live_tasks() == []
        assert_valid_history(conv)


async def test_restart_restores_to_idle_and_answers_pending_upgrade(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """REQ-BED-007: after a restart, Idle with full history; a pending upgrade is not approved."""
    fake_anthropic.script(
        Turn([tool_use("request_mode_upgrade", {"reason": "x"})], stop_reason="tool_use")
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path), slug="keep-me")
        await conv.run("go")
        assert conv.state.name == "awaiting_mode_approval"
        before = len(conv.history())
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        assert phoenix.restored == ["keep-me"]
        conv = phoenix.get("keep-me")
        assert isinstance(conv.state.phase, Idle) and conv.mode is Mode.RESTRICTED
        assert len(conv.history()) == before + 1
        assert "Not approved" in tool_results(conv)[-1]["content"]
        assert_valid_history(conv)


async def test_two_kernels_on_one_store_take_turns_and_share_history(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Two managers (two kernels) on one store: a conversation working in one is
    refused in the other with a clear message; afterwards the other sees the whole
    history and continues it, with nothing lost or duplicated."""
    fake_anthropic.script(
        Turn([tool_use("bash", {"command": "sleep 1; echo slow"})], stop_reason="tool_use"),
        Turn([text("first kernel done")]),
        Turn([text("second kernel done")]),
    )
    async with (
        phoenix_for(fake_anthropic, tmp_path) as first,
        phoenix_for(fake_anthropic, tmp_path) as second,
    ):
        conv = first.create(cwd=project_dir(tmp_path), slug="shared")
        sub = conv.subscribe()
        await conv.post_message("from kernel one")
        async for update in sub:
            if update.kind == up.TOOL_STARTED:
                break
        other = second.get("shared")
        with pytest.raises(PhoenixError) as info:
            await other.post_message("from kernel two")
        assert "working in another kernel" in str(info.value)
        await conv.wait()
        await other.run("from kernel two")
        texts = [m["content"].get("text") for m in other.history() if m["message_type"] == "user"]
        assert texts == ["from kernel one", "from kernel two"]
        stored = second.store.messages(other.id)
        assert [m["sequence_id"] for m in stored] == list(range(1, len(stored) + 1))
        assert [m["id"] for m in stored] == [m["id"] for m in other.history()]
        assert_valid_history(other)


async def test_start_up_restore_leaves_a_conversation_working_in_a_live_kernel_alone(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A second kernel starting on the store must not 'restore' (cancel) live work."""
    fake_anthropic.script(
        Turn([tool_use("bash", {"command": "sleep 1; echo still-here"})], stop_reason="tool_use"),
        Turn([text("finished")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as first:
        conv = first.create(cwd=project_dir(tmp_path), slug="live-work")
        sub = conv.subscribe()
        await conv.post_message("work")
        async for update in sub:
            if update.kind == up.TOOL_STARTED:
                break
        async with phoenix_for(fake_anthropic, tmp_path) as second:
            assert second.restored == []
            assert second.store.get_conversation("live-work")["state"] == "tool_executing"
        await conv.wait()
        assert isinstance(conv.state.phase, Idle)
        assert "still-here" in tool_results(conv)[0]["content"]
        assert conv.history()[-1]["content"]["blocks"][0]["text"] == "finished"
        assert_valid_history(conv)
