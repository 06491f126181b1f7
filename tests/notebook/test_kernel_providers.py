"""`%%phoenix` in a real kernel against each wire format phoenix speaks, through each
real SDK, over loopback to a fake of that format: an Anthropic-compatible server that
lacks caching, thinking and a models endpoint (an unknown model, no price), Bedrock
(AsyncAnthropicBedrock, AWS event stream, SigV4 from AWS_* variables), Vertex
(AsyncAnthropicVertex, :streamRawPredict, a token from google-auth's chain) and
OpenAI-compatible Chat Completions (the openai SDK).

Per format, one kernel runs: a whole turn with parallel tool calls, an approval and
a write; a cancel mid-stream; a retryable and a non-retryable error; an image.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.testing import Fault, Turn, text, thinking, tool_use
from phoenix_nb.testing.received import Answer, chat_received, messages_received
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name
from tests.notebook.wires import SDK_MODULES, Wire, make_wire

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=["compat", "bedrock", "vertex", "openai"])
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
        loaded = k.eval(
            f"sorted(m for m in __import__('sys').modules if m.split('.')[0] in {SDK_MODULES!r})"
        )
        assert loaded == [], f"%load_ext imported {loaded}"
        for key, value in {**wire.config, "retry_delay_scale": "0.001"}.items():
            k.ok(
                f"%config Phoenix.{key} = {value!r}"
                if key != "retry_delay_scale"
                else f"%config Phoenix.{key} = {value}"
            )
        yield k


def _bodies(wire: Wire) -> list[Any]:
    return [r.body for r in wire.fake.requests]


def _record(cell: Any) -> Mapping[str, Any]:
    return cell.last_bundle()[MIME]


def test_a_turn_with_parallel_tool_calls_an_approval_and_a_write(kern: Kernel, wire: Wire) -> None:
    wire.fake.script(
        Turn(
            [
                text("Looking around."),
                tool_use("bash", {"command": "echo first-call"}),
                tool_use("bash", {"command": "echo second-call"}),
            ]
        ),
        Turn([tool_use("request_mode_upgrade", {"reason": "I need to write made.txt"})]),
        Turn([tool_use("bash", {"command": "echo made > made.txt"})]),
        Turn([text("Wrote made.txt for you.")]),
    )
    cell = kern.run(f"%%phoenix --name turn-{wire.name}\nplease make made.txt", allow_stdin=False)
    assert cell.status == "ok", cell.error()
    record = _record(cell)
    assert state_name(record) == "awaiting_mode_approval"
    shown = json.dumps(record)
    assert "first-call" in shown and "second-call" in shown, "both parallel calls ran"
    after = kern.run("%phoenix approve", allow_stdin=False, timeout=60)
    assert after.status == "ok", after.error()
    final = _record(after)
    assert state_name(final) == "idle"
    assert (kern.project / "made.txt").read_text().strip() == "made"
    assert "Wrote made.txt for you." in after.last_bundle()["text/markdown"]
    conversation = final["conversation"]
    assert conversation["provider"] == ("anthropic" if wire.name == "compat" else wire.name)
    assert conversation["model"] == wire.model
    markdown = after.last_bundle()["text/markdown"] + after.last_bundle()["text/plain"]
    served = {
        "compat": "without caching",
        "bedrock": "via bedrock",
        "vertex": "via vertex",
        "openai": "via openai · without thinking",
    }[wire.name]
    assert served in after.last_bundle()["text/markdown"]
    assert (
        served in after.last_bundle()["text/plain"] and served in after.last_bundle()["text/html"]
    )
    if wire.priced:
        assert "price unknown" not in markdown and final["usage"]["priced"] is True
    else:
        assert "price unknown" in markdown and "$0.00" not in markdown
        assert final["usage"]["total"]["cost_usd"] is None
    if wire.name == "compat":
        assert "rejected prompt caching" in cell.text(), "one line says caching is off"
        assert conversation["lacks"] == ["caching"]
        assert wire.fake.refused == ["caching"], "refused once, never sent again"
    if wire.name == "openai":
        assert "thinking" in conversation["lacks"]
        sent = _bodies(wire)[1]["messages"]
        answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert sorted(answered) == sorted(calls) and len(calls) == 2
        outputs = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
        said = [outputs[c] for c in calls]
        assert "first-call" in said[0] and "second-call" in said[1], said
    status = kern.ok(f"%phoenix status turn-{wire.name}").text()
    assert "provider" in status and (wire.config.get("provider", "anthropic") in status)
    loaded = kern.eval(
        f"sorted({{m.split('.')[0] for m in __import__('sys').modules}} & {set(SDK_MODULES)!r})"
    )
    assert set(loaded) <= set(wire.loads), f"{wire.name} loaded {loaded}"


def test_cancel_mid_stream(kern: Kernel, wire: Wire) -> None:
    wire.fake.script(Turn([text("word " * 400, chunk=5, delay=0.05)]))
    cell = kern.submit(f"%%phoenix --name cancel-{wire.name}\ntalk for a long time")
    kern.wait_until(
        lambda: any("word word" in json.dumps(r) for r in cell.records()),
        60,
        "the answer to start streaming",
    )
    kern.km.interrupt_kernel()
    kern.finish(cell)
    assert cell.reply is not None and cell.reply["content"]["ename"] == "TurnInterrupted"
    assert wire.fake.wait_for(lambda f: any(e.kind == "disconnected" for e in f.events), 30)


def test_a_retryable_error_is_retried(kern: Kernel, wire: Wire) -> None:
    wire.fake.script(Fault.status(429, retry_after=0), Turn([text("Answered after a retry.")]))
    cell = kern.run(f"%%phoenix --name retry-{wire.name}\nhello", timeout=60)
    assert cell.status == "ok", cell.error()
    assert "Answered after a retry." in cell.last_bundle()["text/markdown"]
    assert len(wire.fake.requests) == 2


def test_a_non_retryable_error_stops_with_its_message(kern: Kernel, wire: Wire) -> None:
    wire.fake.script(Fault.status(400, message="the request had a bad field"))
    cell = kern.run(f"%%phoenix --name bad-{wire.name}\nhello", timeout=60)
    record = _record(cell)
    assert state_name(record) == "error"
    assert "the request had a bad field" in json.dumps(record)
    assert len(wire.fake.requests) == 1, "not retried"


def test_an_image_reaches_the_model(kern: Kernel, wire: Wire) -> None:
    kern.ok("from PIL import Image\nred = Image.new('RGB', (40, 30), 'red')")
    wire.fake.script(Turn([text("A red rectangle.")]))
    cell = kern.run(f"%%phoenix --name image-{wire.name} --image red\nwhat is this?")
    assert cell.status == "ok", cell.error()
    assert wire.image_word in json.dumps(_bodies(wire)[-1])
    assert "A red rectangle." in cell.last_bundle()["text/markdown"]


# Parallel calls whose outputs are the conformance suite's core cases, made by the real
# tools in the kernel (tests/llm/test_conformance.py has every case, adapter by adapter).
ODD_COMMAND = r"printf 'h\303\251llo \344\270\226\347\225\214 \001\033[31mred\033[0m\ttab\n'"
CORE_CALLS: dict[str, dict[str, Any]] = {
    "string": {"command": "echo first-line; echo second-line"},
    "empty": {"command": "true"},
    "failed": {"command": "echo boom; exit 3"},
    "odd": {"command": ODD_COMMAND},
    "megabyte": {"command": "head -c 1000000 /dev/zero | tr '\\0' x"},
    "refused": {},  # bad input: an is_error result
}
# What each wire's server received, by wire: every wire must have received the same.
SEEN: dict[str, dict[str, Answer]] = {}


def test_tool_outputs_reach_the_server_as_the_tools_made_them(kern: Kernel, wire: Wire) -> None:
    calls = [tool_use("bash", given, id=f"toolu_{k}") for k, given in CORE_CALLS.items()]
    wire.fake.script(Turn([text("Running them."), *calls]), Turn([text("All seen.")]))
    cell = kern.run(f"%%phoenix --name core-{wire.name}\nrun these", allow_stdin=False)
    assert cell.status == "ok", cell.error()
    assert "All seen." in cell.last_bundle()["text/markdown"]
    body = _bodies(wire)[-1]
    got = chat_received(body) if wire.name == "openai" else messages_received(body)
    assert got.problems() == [], "every call answered exactly once"
    assert got.calls == [f"toolu_{k}" for k in CORE_CALLS], "in the order the model made them"
    answers = got.by_call()
    said = {k: answers[f"toolu_{k}"] for k in CORE_CALLS}
    assert said["string"] == Answer("toolu_string", "first-line\nsecond-line")
    assert said["empty"] == Answer("toolu_empty", "(no output)")
    assert said["failed"] == Answer("toolu_failed", "boom\n[exit code 3]")
    assert said["odd"] == Answer("toolu_odd", "h\u00e9llo \u4e16\u754c \x01\x1b[31mred\x1b[0m\ttab")
    big = said["megabyte"].text
    head, _, tail = big.partition(" bytes omitted …")
    assert head.startswith("x" * 10_000) and tail.rstrip().endswith("x" * 10_000), big[:80]
    assert said["refused"].is_error and "command" in said["refused"].text
    SEEN[wire.name] = said
    first = next(iter(SEEN.values()))
    assert said == first, f"{wire.name} received other answers than {next(iter(SEEN))}"


def test_thinking_is_shown_and_goes_back_only_where_the_api_takes_it(
    kern: Kernel, wire: Wire
) -> None:
    """Chat Completions servers stream reasoning as `reasoning_content` (vLLM, DeepSeek):
    shown as thinking, never sent back (the fake answers 400 as DeepSeek does)."""
    wire.fake.script(
        Turn(
            [thinking("Weighing whether to list the files."), tool_use("bash", {"command": "ls"})]
        ),
        Turn([text("Listed.")]),
    )
    cell = kern.run(f"%%phoenix --name think-{wire.name}\nlist files", allow_stdin=False)
    assert cell.status == "ok", cell.error()
    assert state_name(_record(cell)) == "idle", json.dumps(_record(cell))[:2000]
    assert "Weighing whether to list the files." in json.dumps(_record(cell))
    later = json.dumps(_bodies(wire)[-1]["messages"])
    if wire.name == "openai":
        assert "Weighing" not in later and "reasoning" not in later, later
    else:  # a signed thinking block goes back unchanged (the API requires it)
        assert "Weighing whether to list the files." in later and "fake-signature" in later
