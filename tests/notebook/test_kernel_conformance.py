"""The conformance table through a real kernel: what a scripted model drives through
`%%phoenix` reaches each provider's server as the agent meant it, and the store holds
the same.

Per wire format — Anthropic's Messages API (a key checked), a compatible local server,
Bedrock, Vertex (each through its real SDK and cloud route) and OpenAI-compatible Chat
Completions — one kernel runs every case, each case its own conversation: a string
result, an empty one, a failed command, an error (`is_error`), non-ASCII and control
characters, about 1 MB of output, parallel calls, a cancel while the answer streams
(a call it already carried is dropped with it), a cancel while a tool runs (its
synthetic results), and a retried 429. The real tools
run in the kernel; what the server received is read back into one neutral form
(`phoenix_nb.testing.received`) and compared field by field — every call sent back
with its name and input, answered exactly once with the tool's output and error flag,
followed by the user's words — and against the conversation's stored messages.
The adapter-level table (every case, histories given) is tests/llm/test_conformance.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.transition import CANCELLED_RESULT, SKIPPED_RESULT
from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.store import Store
from phoenix_nb.testing import Fault, Turn, text, tool_use
from phoenix_nb.testing.received import Answer, Received, chat_received, messages_received
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name
from tests.notebook.wires import Wire, make_wire, models_asked, received_bodies

pytestmark = pytest.mark.timeout(240)

WIRES = ("anthropic", "compat", "bedrock", "vertex", "openai")
WAIT = 60.0


@pytest.fixture(scope="module", params=WIRES)
def wire(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Wire]:
    w = make_wire(request.param, tmp_path_factory.mktemp(f"wire-{request.param}"))
    try:
        yield w
    finally:
        w.fake.stop()


@pytest.fixture(scope="module")
def fake(wire: Wire) -> FakeAnthropic:  # the shared fixtures' name for the module's server
    return wire.fake


@pytest.fixture(scope="module")
def kernel(wire: Wire, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {"PHOENIX_MODEL": wire.model, **wire.env}
    root = tmp_path_factory.mktemp(f"kernel-{wire.name}")
    with loaded_kernel(root, wire.fake.base_url, extra_env=env) as k:
        for key, value in wire.config.items():
            k.ok(f"%config Phoenix.{key} = {value!r}")
        k.ok("%config Phoenix.retry_delay_scale = 0.001")
        yield k


# ---- reading both sides ----------------------------------------------------------------


def _received(wire: Wire, body: Mapping[str, Any]) -> Received:
    got = chat_received(body) if wire.name == "openai" else messages_received(body)
    assert got.problems() == [], "every call answered exactly once"
    return got


def _stored(kern: Kernel, slug: str) -> list[dict[str, Any]]:
    with Store(kern.home) as store:
        conv = store.get_conversation(slug)
        assert conv is not None, slug
        return store.messages(conv["id"])


def _stored_answers(kern: Kernel, slug: str) -> list[Answer]:
    """The tool results the store holds, as the model is meant to read them (an empty
    output is "(no output)" on every wire)."""
    return [
        Answer(
            str(m["content"]["tool_use_id"]),
            str(m["content"]["content"] or "") or "(no output)",
            bool(m["content"]["is_error"]),
        )
        for m in _stored(kern, slug)
        if m["message_type"] == "tool"
    ]


def _bash(call_id: str, given: Mapping[str, Any]) -> Any:
    return tool_use("bash", dict(given), id=call_id)


# ---- the table: tool results made by the real tools -----------------------------------

ODD_COMMAND = r"printf 'h\303\251llo \344\270\226\347\225\214 \001\033[31mred\033[0m\ttab\n'"
ODD = "h\u00e9llo \u4e16\u754c \x01\x1b[31mred\x1b[0m\ttab"


@dataclass(frozen=True)
class Case:
    """One turn: the calls the model makes (id -> bash input), and what each answer must
    be on the wire (None: whatever the store holds, checked by `check`)."""

    name: str
    calls: Mapping[str, Mapping[str, Any]]
    answers: Sequence[Answer | None]
    check: Any = None  # extra checks of the answers received: fn(list[Answer]) -> None
    more: Mapping[str, Any] = field(default_factory=dict)


def _megabyte(answers: list[Answer]) -> None:
    big = answers[0].text
    head, omitted, tail = big.partition(" bytes omitted …")
    assert omitted and not answers[0].is_error, big[:200]
    assert head.startswith("x" * 10_000) and tail.rstrip().endswith("x" * 10_000)


def _refused(answers: list[Answer]) -> None:
    assert answers[0].is_error and "command" in answers[0].text, answers[0]


CASES = [
    Case(
        "string",
        {"toolu_string": {"command": "echo first-line; echo second-line"}},
        [Answer("toolu_string", "first-line\nsecond-line")],
    ),
    Case("empty", {"toolu_empty": {"command": "true"}}, [Answer("toolu_empty", "(no output)")]),
    Case(
        "failed command",
        {"toolu_failed": {"command": "echo boom; exit 3"}},
        [Answer("toolu_failed", "boom\n[exit code 3]")],
    ),
    Case("is_error", {"toolu_refused": {}}, [None], check=_refused),
    Case(
        "non-ASCII and control", {"toolu_odd": {"command": ODD_COMMAND}}, [Answer("toolu_odd", ODD)]
    ),
    Case(
        "1 MB of output",
        {"toolu_mb": {"command": "head -c 1000000 /dev/zero | tr '\\0' x"}},
        [None],
        check=_megabyte,
    ),
    Case(
        "parallel calls",
        {
            "toolu_p1": {"command": "echo one"},
            "toolu_p2": {"command": "echo two >&2; exit 1"},
            "toolu_p3": {"command": "echo three"},
        },
        [
            Answer("toolu_p1", "one"),
            Answer("toolu_p2", "two\n[exit code 1]"),
            Answer("toolu_p3", "three"),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name.replace(" ", "-") for c in CASES])
def test_tool_results_reach_the_server_and_the_store_as_made(
    kern: Kernel, wire: Wire, case: Case
) -> None:
    slug = "case-" + case.name.replace(" ", "-").replace("_", "-").lower()
    ask = f"run the {case.name} case"
    calls = [_bash(call_id, given) for call_id, given in case.calls.items()]
    wire.fake.script(Turn([text("Running."), *calls]), Turn([text("All seen.")]))
    start = len(received_bodies(wire))
    cell = kern.run(f"%%phoenix --name {slug}\n{ask}", allow_stdin=False, timeout=WAIT)
    assert cell.status == "ok", cell.error()
    record = cell.last_bundle()[MIME]
    assert state_name(record) == "idle"
    assert "All seen." in cell.last_bundle()["text/markdown"]

    bodies = received_bodies(wire)[start:]
    assert len(bodies) == 2, "one request per model turn, none retried"
    first, second = (_received(wire, b) for b in bodies)
    assert first.calls == [] and first.user_texts == [ask]
    assert models_asked(wire)[start:] == [wire.model, wire.model]
    got = second
    assert got.named == [(c, "bash", dict(g)) for c, g in case.calls.items()], "sent back as made"
    assert got.calls == list(case.calls), "in the order the model made them"
    assert got.user_texts == [ask], "the user's words once; answers are not user text"
    answers = got.answers
    assert [a.call for a in answers] == list(case.calls)
    for expected, answer in zip(case.answers, answers, strict=True):
        if expected is not None:
            assert answer == expected
    if case.check is not None:
        case.check(answers)
    assert _stored_answers(kern, slug) == answers, "the store holds what the server received"


# ---- cancels, retries -------------------------------------------------------------------


def test_a_cancel_while_the_answer_streams_sends_the_users_words_and_nothing_half_made(
    kern: Kernel, wire: Wire
) -> None:
    slug = "case-cancel-stream"
    # A whole call streams first, then words: cancelled, the response is dropped whole,
    # so no call goes back unanswered (nor answered with a synthetic result).
    half = _bash("toolu_half", {"command": "echo half-made"})
    wire.fake.script(
        Turn([half, text("word " * 400, chunk=5, delay=0.05)]), Turn([text("Hello again.")])
    )
    start = len(received_bodies(wire))
    cell = kern.submit(f"%%phoenix --name {slug}\ntalk for a long time")
    kern.wait_until(
        lambda: any("word word" in json.dumps(r) for r in cell.records()),
        WAIT,
        "the answer to start streaming",
    )
    kern.km.interrupt_kernel()
    kern.finish(cell)
    assert cell.reply is not None and cell.reply["content"]["ename"] == "TurnInterrupted"
    assert wire.fake.wait_for(lambda f: any(e.kind == "disconnected" for e in f.events), 30)

    again = kern.run("%%phoenix\nnever mind, just say hi", timeout=WAIT)
    assert again.status == "ok", again.error()
    assert "Hello again." in again.last_bundle()["text/markdown"]
    bodies = received_bodies(wire)[start:]
    assert len(bodies) == 2
    got = _received(wire, bodies[1])
    assert got.calls == [] and got.answers == []
    assert "word word" not in json.dumps(bodies[1]), "the half-made answer is not sent"
    assert "toolu_half" not in json.dumps(bodies[1])
    said = ["talk for a long time", "never mind, just say hi"]
    # One user message either way: Chat Completions carries it as one string.
    assert got.user_texts == (["\n".join(said)] if wire.name == "openai" else said)
    stored = [m["message_type"] for m in _stored(kern, slug)]
    assert stored.count("user") == 2 and "tool" not in stored


def test_a_cancel_while_a_tool_runs_answers_every_call_once_with_its_synthetic_result(
    kern: Kernel, wire: Wire, tmp_path: Path
) -> None:
    slug = "case-cancel-tools"
    started = tmp_path / "started"
    calls = {
        "toolu_run": {"command": f"touch {started}; sleep 60"},
        "toolu_next": {"command": "echo never-ran"},
    }
    wire.fake.script(
        Turn([text("Two things."), *(_bash(c, g) for c, g in calls.items())]),
        Turn([text("Fine, stopping.")]),
    )
    start = len(received_bodies(wire))
    cell = kern.submit(f"%%phoenix --name {slug} --mode unrestricted\ndo two things")
    kern.wait_until(started.exists, WAIT, "the first tool to start")
    kern.km.interrupt_kernel()
    kern.finish(cell)
    assert cell.reply is not None and cell.reply["content"]["ename"] == "TurnInterrupted"

    again = kern.run("%%phoenix\nnever mind", timeout=WAIT)
    assert again.status == "ok", again.error()
    bodies = received_bodies(wire)[start:]
    assert len(bodies) == 2
    got = _received(wire, bodies[1])
    assert got.named == [(c, "bash", g) for c, g in calls.items()]
    assert got.answers == [
        Answer("toolu_run", CANCELLED_RESULT, True),
        Answer("toolu_next", SKIPPED_RESULT, True),
    ]
    assert got.user_texts[0] == "do two things"
    assert got.user_texts[-1] == "never mind", "the user's words follow the answers"
    assert _stored_answers(kern, slug) == got.answers


def test_a_retried_429_sends_the_same_request_again_and_stores_one_answer(
    kern: Kernel, wire: Wire
) -> None:
    slug = "case-retry"
    wire.fake.script(
        Turn([text("Looking."), _bash("toolu_r", {"command": "echo retried-output"})]),
        Fault.status(429, retry_after=0),
        Turn([text("Answered after a retry.")]),
    )
    start = len(received_bodies(wire))
    cell = kern.run(f"%%phoenix --name {slug}\nlook once", allow_stdin=False, timeout=WAIT)
    assert cell.status == "ok", cell.error()
    assert "Answered after a retry." in cell.last_bundle()["text/markdown"]
    bodies = received_bodies(wire)[start:]
    assert len(bodies) == 3
    assert bodies[1] == bodies[2], "the retry is the same request, field by field"
    got = _received(wire, bodies[2])
    assert got.answers == [Answer("toolu_r", "retried-output")]
    stored = _stored(kern, slug)
    agents = [m for m in stored if m["message_type"] == "agent"]
    assert len(agents) == 2, "the refused attempt stored nothing"
    assert _stored_answers(kern, slug) == got.answers
