"""Random interleavings through the whole runtime (REQ-BED-002, 005, 006, 007, 015, 016, 020).

A hypothesis state machine drives one conversation of a real `Phoenix` (real
SDK over loopback to the fake Messages API, real tools, real Landlock, real
store) with user messages of every kind (text, bash echo, think, a failing
bash, a patch in whichever mode the conversation is in, an upgrade request,
LLM faults scripted per request), cancels and restarts landing mid-work,
approvals, denials, restricts, continuations, and restarts (close the
`Phoenix`, open a new one on the same store: restore). After every step it
waits (bounded) for the conversation to settle and checks that it is at rest
or paused for approval, that the persisted history is valid for the API and
equals what the runtime holds, that the persisted state is the runtime's,
and that Unrestricted is never reached without an approval.

Hypothesis's stateful testing is synchronous: each example owns an event loop
and every rule runs its coroutine with `run_until_complete`.
``PHOENIX_STATEFUL_EXAMPLES`` sets the number of examples (default 25).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from phoenix_nb.core.messages import repair_chain, to_api_messages, validate_chain
from phoenix_nb.core.states import AwaitingModeApproval, ContextExhausted, from_persisted
from phoenix_nb.core.values import Mode, Usage
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation, Phoenix, PhoenixError
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text, tool_use

pytestmark = pytest.mark.timeout(120)

MODEL = "claude-sonnet-5-5"
EXAMPLES = int(os.environ.get("PHOENIX_STATEFUL_EXAMPLES", "25"))
STEPS = int(os.environ.get("PHOENIX_STATEFUL_STEPS", "12"))
SETTLE_TIMEOUT = 20.0
START_TIMEOUT = 10.0


def _patch(body: str) -> dict[str, Any]:
    return {"path": "notes.txt", "patches": [{"operation": "overwrite", "newText": body}]}


def _replies(kind: str) -> list[Any]:
    """What the fake answers to a user message of this kind (then its default text turn)."""
    done = Turn([text("Done.")])
    match kind:
        case "text":
            return [Turn([text("Hello there.")])]
        case "bash_echo":
            return [Turn([tool_use("bash", {"command": "echo hi"})]), done]
        case "think":
            return [Turn([tool_use("think", {"thoughts": "hmm"})]), done]
        case "bash_fail":
            return [Turn([tool_use("bash", {"command": "echo no >&2; exit 4"})]), done]
        case "patch":
            return [Turn([tool_use("patch", _patch("patched\n"))]), done]
        case "upgrade":
            return [
                Turn(
                    [
                        tool_use("think", {"thoughts": "I need to write"}),
                        tool_use("request_mode_upgrade", {"reason": "write notes"}),
                        tool_use("bash", {"command": "echo after"}),
                    ]
                ),
                Turn([tool_use("patch", _patch("after upgrade\n"))]),
                done,
            ]
        case "fault_retried":
            return [Fault.status(500), Fault.drop_after(3), done]
        case "fault_exhausted":
            return [Fault.status(529), Fault.eof_without_stop(), Fault.status(503)]
        case "fault_fatal":
            return [Fault.status(401)]
        case "fault_retry_after":
            return [Fault.status(429, retry_after=2), done]
        case "big_context":
            return [
                Turn([text("big")], usage=Usage(input_tokens=195_000, output_tokens=10)),
                Turn([text("Summary of the work.")]),
            ]
    raise AssertionError(kind)


MESSAGE_KINDS = [
    "text",
    "bash_echo",
    "think",
    "bash_fail",
    "patch",
    "upgrade",
    "fault_retried",
    "fault_exhausted",
    "fault_fatal",
    "fault_retry_after",
    "big_context",
]

# Work that takes long enough for a cancel or a restart to land in the middle of it:
# the replies (built fresh, so tool_use ids never repeat) and the update that shows it began.
SLOW_WORK = ("streaming", "tool", "retry_timer")


def _slow_work(work: str) -> tuple[list[Any], str]:
    match work:
        case "streaming":
            return [Turn([text("word " * 300, chunk=5, delay=0.005)])], up.TEXT_DELTA
        case "tool":
            return [Turn([tool_use("bash", {"command": "sleep 5"})])], up.TOOL_STARTED
        case "retry_timer":
            return [Fault.status(500, retry_after=50)], up.RETRY
    raise AssertionError(work)


class RuntimeMachine(RuleBasedStateMachine):
    """One conversation, driven at random; the store is the source of truth."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="phoenix-stateful-"))
        self.project = self.tmp / "project"
        self.project.mkdir()
        (self.project / "app.py").write_text("def add(a, b):\n    return a - b\n")
        self.fake = FakeAnthropic().start()
        self.phoenix = self._open()
        self.conv: Conversation = self.phoenix.create(cwd=self.project)
        self.may_be_unrestricted = False  # an approval was given and not taken back

    # ---- plumbing ------------------------------------------------------------------
    def _open(self) -> Phoenix:
        return Phoenix(
            Settings(
                home=self.tmp / "store",
                model=MODEL,
                base_url=self.fake.base_url,
                api_key="test-key",
                retry_delay_scale=0.01,
            )
        )

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = SETTLE_TIMEOUT) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def teardown(self) -> None:
        try:
            self.run(self.phoenix.aclose())
        finally:
            self.loop.close()
            self.fake.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _accepts_messages(self) -> bool:
        state = self.conv.state
        return is_rest(state) and not state.terminal

    async def _post_and_wait_for(self, replies: list[Any], signal: str) -> None:
        self.fake.clear()
        self.fake.script(*replies)
        sub = self.conv.subscribe()
        try:
            await self.conv.post_message("slow work")
            async with asyncio.timeout(START_TIMEOUT):
                async for update in sub:
                    if update.kind == signal:
                        return
        finally:
            sub.close()

    def _restart(self) -> None:
        was_paused = is_paused(self.conv.state)
        self.run(self.phoenix.aclose())
        self.phoenix = self._open()
        self.conv = self.phoenix.get(self.conv.id)
        if was_paused:
            # REQ-BED-007: a pending upgrade request is answered as not approved.
            assert self.conv.mode is Mode.RESTRICTED

    # ---- rules -----------------------------------------------------------------------
    @rule(kind=st.sampled_from(MESSAGE_KINDS))
    def user_message(self, kind: str) -> None:
        accepts = self._accepts_messages()
        self.fake.clear()
        self.fake.script(*_replies(kind))
        try:
            self.run(self.conv.post_message(f"please do {kind}"))
        except PhoenixError:
            assert not accepts, "a conversation at rest rejected a message"
            return
        assert accepts, f"a message was accepted in {self.conv.state.name}"

    @rule(work=st.sampled_from(SLOW_WORK), how=st.sampled_from(["cancel", "restart"]))
    @precondition(lambda self: self._accepts_messages())
    def interrupt_work(self, work: str, how: str) -> None:
        """REQ-BED-005/007: a cancel or a restart while a request, tool or timer runs."""
        replies, signal = _slow_work(work)
        self.run(self._post_and_wait_for(replies, signal))
        assert self.conv.state.busy
        if how == "cancel":
            self.run(self.conv.cancel())
            assert is_rest(self.conv.state), self.conv.state
            assert self.conv.runtime.live_tasks() == []
        else:
            self._restart()
            assert is_rest(self.conv.state), self.conv.state

    @rule()
    def cancel(self) -> None:
        try:
            self.run(self.conv.cancel())
        except PhoenixError:
            return

    @rule()
    @precondition(lambda self: is_paused(self.conv.state))
    def approve(self) -> None:
        self.run(self.conv.approve())
        self.may_be_unrestricted = True

    @rule()
    @precondition(lambda self: is_paused(self.conv.state))
    def deny(self) -> None:
        mode = self.conv.mode
        self.run(self.conv.deny())
        assert self.conv.mode is mode

    @rule()
    def restrict(self) -> None:
        """REQ-BED-016: back to Restricted at once, whenever the user asks.

        An ended conversation (context exhausted: read-only, seed 001 and
        REQ-BED-021) ignores it and keeps its mode: it can never act again. Found
        by tests/explore.sh (approve, exhaust, restrict); pinned by the deterministic
        core test test_req_bed_021_restrict_leaves_an_exhausted_conversation_as_it_is.
        """
        ended = self.conv.state.terminal
        before = self.conv.mode
        try:
            self.run(self.conv.restrict())
        except PhoenixError:
            return
        if ended:
            assert self.conv.mode is before
            return
        assert self.conv.mode is Mode.RESTRICTED
        self.may_be_unrestricted = False

    @rule(fails=st.booleans())
    @precondition(lambda self: self._accepts_messages())
    def continuation(self, fails: bool) -> None:
        """REQ-BED-020/023: a manual continuation ends in ContextExhausted, summary or not."""
        self.fake.clear()
        self.fake.script(Fault.status(400) if fails else Turn([text("The summary.")]))
        self.run(self.conv.trigger_continuation())
        state = self.run(self.conv.wait())
        assert isinstance(state.phase, ContextExhausted), state

    @rule()
    @precondition(lambda self: isinstance(self.conv.state.phase, ContextExhausted))
    def continue_in_new(self) -> None:
        """REQ-BED-021: the new conversation is linked to the old one and starts Restricted."""
        old = self.conv
        self.conv = self.run(old.continue_in_new())
        assert self.conv.record["seeded_from"] == old.id
        assert self.conv.mode is Mode.RESTRICTED
        self.may_be_unrestricted = False

    @rule()
    def restart(self) -> None:
        self._restart()

    # ---- invariants ---------------------------------------------------------------------
    @invariant()
    def settles_with_a_valid_persisted_history(self) -> None:
        try:
            state = self.run(self.conv.wait())
        except TimeoutError:
            raise AssertionError(f"stuck in {self.conv.state.name}") from None
        assert is_rest(state) or is_paused(state), state
        store = self.phoenix.store
        record = store.get_conversation(self.conv.id)
        assert record is not None
        assert from_persisted(record) == state, "the persisted state is not the runtime's"
        history = store.messages(self.conv.id)
        assert history == self.conv.history(), "the runtime's history is not the store's"
        assert [m["sequence_id"] for m in history] == list(range(1, len(history) + 1))
        if is_paused(state):
            # Only the calls of the paused response may wait for answers.
            assert isinstance(state.phase, AwaitingModeApproval)
            pending = [(m.kind, m.content) for m in repair_chain(history)]
            assert state.phase.tool_use_id in [c["tool_use_id"] for _k, c in pending]
            sendable = [*history, *({"message_type": k, "content": c} for k, c in pending)]
        else:
            sendable = history
        assert validate_chain(sendable) == [], validate_chain(sendable)
        roles = [m["role"] for m in to_api_messages(sendable)]
        assert all(a != b for a, b in itertools.pairwise(roles)), roles

    @invariant()
    def unrestricted_only_after_approval(self) -> None:
        """REQ-BED-015: nothing but the human's approval unlocks writes."""
        if self.conv.mode is Mode.UNRESTRICTED:
            assert self.may_be_unrestricted, "Unrestricted without an approval"
        record = self.phoenix.store.get_conversation(self.conv.id)
        assert record is not None and record["mode"] == self.conv.mode.value


RuntimeMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
test_runtime_interleavings = RuntimeMachine.TestCase
