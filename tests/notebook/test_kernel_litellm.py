"""phoenix through a real LiteLLM proxy (1.106.12, its own venv: tests/litellm_proxy.py),
started with the README's configuration in front of a fake vLLM (Chat Completions),
in a real kernel set up with the README's settings: the Messages endpoint with the
Anthropic provider and the Chat Completions endpoint with the OpenAI provider, each
with a turn with a tool call, a cancel and an error. What the upstream received is
asserted: the tool's output crossed the proxy's translation intact."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.llm import capabilities
from phoenix_nb.testing import Fault, Turn, text, tool_use
from phoenix_nb.testing.fake_openai import FakeOpenAI
from phoenix_nb.testing.received import chat_received
from tests.litellm_proxy import PROXY_PLACEHOLDER, litellm_proxy, readme_block
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(600)

PROVIDER = {"messages": "anthropic", "chat": "openai"}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    """The upstream vLLM (the shared fixtures' name for the module's server)."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with litellm_proxy(fake.base_url, tmp_path_factory.mktemp("litellm")) as url:
        yield url


@pytest.fixture(scope="module")
def kernel(proxy: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    root = tmp_path_factory.mktemp("kernel-litellm")
    with loaded_kernel(root, "http://127.0.0.1:9") as k:
        k.ok("%config Phoenix.retry_delay_scale = 0.001")
        yield k


def _use(kern: Kernel, proxy: str, endpoint: str) -> None:
    """The README's settings for `endpoint`, with this proxy's address."""
    block = readme_block(f"litellm-{endpoint}")
    kern.ok(block.replace(PROXY_PLACEHOLDER, proxy.removeprefix("http://")))


def _record(cell: Any) -> Any:
    return cell.last_bundle()[MIME]


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
def test_a_turn_with_a_tool_call(kern: Kernel, fake: FakeOpenAI, proxy: str, endpoint: str) -> None:
    _use(kern, proxy, endpoint)
    fake.script(
        Turn([text("Looking."), tool_use("bash", {"command": "echo via-litellm"}, id="call_l1")]),
        Turn([text("Done through the proxy.")]),
    )
    cell = kern.run(f"%%phoenix --name tool-{endpoint}\nrun it", allow_stdin=False)
    assert cell.status == "ok", cell.error()
    record = _record(cell)
    assert state_name(record) == "idle", json.dumps(record)[:3000]
    assert "Done through the proxy." in cell.last_bundle()["text/markdown"]
    assert record["conversation"]["provider"] == PROVIDER[endpoint]
    assert len(fake.requests) == 2
    got = chat_received(fake.requests[-1].body)
    assert got.problems() == []
    [answer] = got.answers
    assert (answer.text, answer.is_error) == ("via-litellm", False), answer
    assert fake.requests[-1].body["model"] == "qwen3-coder"


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
def test_a_cancel_mid_stream(kern: Kernel, fake: FakeOpenAI, proxy: str, endpoint: str) -> None:
    _use(kern, proxy, endpoint)
    fake.script(Turn([text("word " * 400, chunk=5, delay=0.05)]), Turn([text("Back again.")]))
    cell = kern.submit(f"%%phoenix --name cancel-{endpoint}\ntalk for a long time")
    kern.wait_until(
        lambda: any("word word" in json.dumps(r) for r in cell.records()),
        120,
        "the answer to start streaming through the proxy",
    )
    kern.km.interrupt_kernel()
    kern.finish(cell)
    assert cell.reply is not None and cell.reply["content"]["ename"] == "TurnInterrupted"
    # The proxy, not phoenix, decides whether the upstream sees the cancel: LiteLLM
    # 1.106.12 goes on reading it (no disconnect had reached the fake when the cell
    # ended), so this asserts phoenix's side and the next turn only.
    after = kern.run(f"%%phoenix --name cancel-{endpoint}\nare you there?", allow_stdin=False)
    assert after.status == "ok", after.error()
    assert "Back again." in after.last_bundle()["text/markdown"]
    said = json.dumps(fake.requests[-1].body["messages"])
    assert "talk for a long time" in said and "are you there?" in said


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
def test_an_error_is_shown_and_not_retried(
    kern: Kernel, fake: FakeOpenAI, proxy: str, endpoint: str
) -> None:
    _use(kern, proxy, endpoint)
    fake.script(Fault.status(400, message="upstream refuses this request"))
    cell = kern.run(f"%%phoenix --name error-{endpoint}\nhello", timeout=120)
    record = _record(cell)
    assert state_name(record) == "error"
    assert "upstream refuses this request" in json.dumps(record)
    assert len(fake.requests) == 1, "a 400 is not retried"


def test_caching_the_proxy_ignores_is_shown_in_status(
    kern: Kernel, fake: FakeOpenAI, proxy: str
) -> None:
    _use(kern, proxy, "messages")
    big = Usage(input_tokens=9_000, output_tokens=5)
    fake.script(*(Turn([text(f"Answer {i}.")], usage=big) for i in range(3)))
    lines = []
    for i in range(3):
        cell = kern.run(f"%%phoenix --name cache-ignored\nquestion {i}", allow_stdin=False)
        assert cell.status == "ok", cell.error()
        lines.append(capabilities.IGNORED_NOTICE in cell.text())
    assert lines == [False, True, False], "one line, at the second response"
    assert "cache_control" in json.dumps(fake.requests[0].body), "LiteLLM forwards it"
    assert "cache_control" not in json.dumps(fake.requests[-1].body), "no longer sent"
    status = kern.ok("%phoenix status cache-ignored").text()
    assert "lacks caching" in status and "no feature known missing" not in status, status
