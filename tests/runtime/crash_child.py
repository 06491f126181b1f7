"""A process that works on conversations until it is killed (for test_crash_restore).

Run as ``python crash_child.py STORE PROJECT SEED ACKFILE`` or call `main` in a
forked process. It starts its own fake Messages API (a thread of this process,
so SIGKILL takes the server down with it), opens a `Phoenix` on the shared
store (which restores what the previous victim left) and loops through
scripted scenarios chosen by SEED: text turns, three tools (Restricted bash,
think, keyword_search), an upgrade request approved after a pause then a
patch, faults retried, an exhausted run of faults (Error), cancels while
streaming and while a tool runs, and now and then a context exhaustion
continued in a new conversation.

Every persisted message is acknowledged in ACKFILE as
``ack <conversation id> <sequence id> <message id>``: the runtime publishes
MESSAGE only after the store's append returned, i.e. after fsync, so each ack
is a promise the parent holds the store to after the kill. ``state <name>``
lines tell the parent in which phase the kill landed. Lines are written with
one `os.write` each, so a kill never leaves half a line of a finished write.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import random
import sys
import uuid
from pathlib import Path
from typing import Any

from phoenix_nb.core.states import ContextExhausted
from phoenix_nb.core.values import Usage
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.conversation import is_rest
from phoenix_nb.runtime.manager import Conversation, Phoenix, PhoenixError
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.testing import FakeAnthropic, Fault, Turn, text, tool_use

# Imported lazily by the first request and the first sandboxed tool: a forkserver
# that preloads this module then spares every victim their cost.
for _lazy in (
    "anthropic",
    "anyio",
    "h11",
    "httpcore2",
    "truststore",
    "landlockpy",
    "pyseccomp",
    "ctypes",
):
    with contextlib.suppress(ImportError):
        importlib.import_module(_lazy)

MODEL = "claude-sonnet-5-5"
# Backoff of 1 s, 2 s … becomes 50 ms, 100 ms: long enough for kills to land in the timer.
RETRY_SCALE = 0.05


class Acks:
    """Appends one line per write to the ack file; the parent reads it after the kill."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text_: str) -> None:
        os.write(self._fd, (text_ + "\n").encode())

    def watch(self, conv: Conversation) -> None:
        def on_update(update: up.Update) -> None:
            if update.kind == up.MESSAGE:
                saved = update.data.message
                self.line(f"ack {saved.conversation_id} {saved.sequence_id} {saved.id}")
            elif update.kind == up.STATE:
                self.line(f"state {update.data.state.name}")

        conv.runtime.hub.add_callback(on_update)


def _call(name: str, input_: dict[str, Any]) -> Any:
    """A tool call with an id unique across victims (the fake's counter restarts in each fork)."""
    return tool_use(name, input_, id=f"toolu_{uuid.uuid4().hex}")


def _slow_text(words: int) -> Any:
    return text("word " * words, chunk=6, delay=0.004)


async def _until(conv: Conversation, kinds: set[str], timeout: float = 120.0) -> None:
    """Wait for the event; the bound is for a real hang only (a victim that timed out here
    died on its own under load, which the test reports as a failure)."""
    sub = conv.subscribe()
    try:
        async with asyncio.timeout(timeout):
            async for update in sub:
                if update.kind in kinds or is_rest(conv.state):
                    return
    finally:
        sub.close()


async def scenario(
    name: str, conv: Conversation, fake: FakeAnthropic, rng: random.Random
) -> Conversation:
    """Run one scripted exchange; returns the conversation to go on with."""
    fake.clear()
    if name == "text":
        fake.script(Turn([_slow_text(60)]))
        await conv.run("say something")
    elif name == "tools":
        fake.script(
            Turn(
                [
                    text("Looking around."),
                    _call("bash", {"command": "echo hello; sleep 0.05; ls"}),
                    _call("think", {"thoughts": "the add function subtracts"}),
                    _call("keyword_search", {"query": "add", "search_terms": ["add"]}),
                ]
            ),
            Turn([_slow_text(20)]),
        )
        await conv.run("look at the project")
    elif name == "upgrade":
        fake.script(
            Turn([_call("request_mode_upgrade", {"reason": "write notes"})]),
            Turn(
                [
                    _call(
                        "patch",
                        {
                            "path": "notes.txt",
                            "patches": [
                                {"operation": "overwrite", "newText": f"n{rng.random()}\n"}
                            ],
                        },
                    )
                ]
            ),
            Turn([text("Written.")]),
        )
        await conv.run("write notes")
        if conv.state.name == "awaiting_mode_approval":
            await asyncio.sleep(rng.uniform(0.0, 0.1))  # the human thinks: kills land here
            await conv.approve()
            await conv.wait()
        await conv.restrict()
    elif name == "retry":
        fake.script(Fault.status(500), Fault.status(429, retry_after=1), Turn([text("ok")]))
        await conv.run("retry please")
    elif name == "error":
        fake.script(Fault.status(529), Fault.drop_after(3), Fault.eof_without_stop())
        await conv.run("this will fail")
    elif name in ("cancel_stream", "cancel_tool"):
        if name == "cancel_stream":
            fake.script(Turn([_slow_text(400)]))
            waits = {up.TEXT_DELTA}
        else:
            fake.script(Turn([_call("bash", {"command": "sleep 3"})]), Turn([text("x")]))
            waits = {up.TOOL_STARTED}
        await conv.post_message("long work")
        await _until(conv, waits)
        await asyncio.sleep(rng.uniform(0.0, 0.05))
        await conv.cancel()
    elif name == "exhaust":
        fake.script(
            Turn([text("big")], usage=Usage(input_tokens=195_000, output_tokens=10)),
            Turn([text("Summary: notes were being written.")]),
        )
        await conv.run("fill the context")
        if isinstance(conv.state.phase, ContextExhausted):
            return await conv.continue_in_new()
    return conv


SCENARIOS = [
    ("text", 3),
    ("tools", 3),
    ("upgrade", 2),
    ("retry", 2),
    ("error", 1),
    ("cancel_stream", 1),
    ("cancel_tool", 1),
    ("exhaust", 0.3),
]


def _pick_conversation(phoenix: Phoenix, project: Path) -> Conversation:
    for record in phoenix.list():
        conv = phoenix.get(record["id"])
        if is_rest(conv.state) and not conv.state.terminal:
            return conv
    return phoenix.create(cwd=project)


async def run(store: Path, project: Path, seed: int, ack_path: Path, port: int = 0) -> None:
    rng = random.Random(seed)
    acks = Acks(ack_path)
    names = [n for n, _ in SCENARIOS]
    weights = [w for _, w in SCENARIOS]
    # The lane's victims share one port: the conversations they continue keep the
    # server (base URL) they were started on.
    with FakeAnthropic(port=port) as fake:
        phoenix = Phoenix(
            Settings(
                home=store,
                model=MODEL,
                base_url=fake.base_url,
                api_key="test-key",
                retry_delay_scale=RETRY_SCALE,
            )
        )
        conv = _pick_conversation(phoenix, project)
        acks.watch(conv)
        acks.line(f"ready {conv.id}")
        while True:
            name = rng.choices(names, weights)[0]
            try:
                nxt = await scenario(name, conv, fake, rng)
            except PhoenixError as exc:  # e.g. restrict while busy: fine, go on
                acks.line(f"note {exc}")
                await conv.wait()
                nxt = conv
            if nxt is not conv:
                acks.watch(nxt)
                acks.line(f"switch {nxt.id}")
                conv = nxt


def main(store: str, project: str, seed: int, ack_path: str, port: int = 0) -> None:
    """Entry point of a victim process; never returns normally (it is killed)."""
    asyncio.run(run(Path(store), Path(project), seed, Path(ack_path), port))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
