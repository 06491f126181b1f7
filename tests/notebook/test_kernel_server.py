"""A conversation keeps its server, through a real kernel: started on one provider
(a Messages API server at a base URL), it goes on there after `c.Phoenix.provider`
and `base_url` change; new conversations start on the new one (Chat Completions);
the record and `%phoenix status` show the conversation's own server and say how to
move on; `%phoenix continue` asks the summary of the old server and starts the new
conversation on the current one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.testing import Turn, text
from phoenix_nb.testing.compat_server import CompatServer
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with CompatServer() as server:
        yield server


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key="sk-kernel-test") as server:
        yield server


@pytest.fixture(scope="module")
def kernel(fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {"PHOENIX_MODEL": "qwen3-coder:30b", "OPENAI_API_KEY": "sk-kernel-test"}
    with loaded_kernel(tmp_path_factory.mktemp("server"), fake.base_url, extra_env=env) as k:
        k.ok("%config Phoenix.retry_delay_scale = 0.001")
        yield k


def test_a_conversation_keeps_its_server_after_the_provider_changes(
    kern: Kernel, fake: FakeAnthropic, chat: FakeOpenAI
) -> None:
    fake.script(Turn([text("First, on the Messages server.")]))
    first = kern.run("%%phoenix --name kept\nhello", allow_stdin=False)
    assert first.status == "ok", first.error()
    assert len(fake.requests) == 1

    kern.ok("%config Phoenix.provider = 'openai'")
    kern.ok(f"%config Phoenix.base_url = {chat.base_url!r}")
    kern.ok("%config Phoenix.model = 'gpt-test-unknown'")
    fake.script(Turn([text("Still on the Messages server.")]))
    again = kern.run("%%phoenix --name kept\nand again", allow_stdin=False)
    assert again.status == "ok", again.error()
    assert "Still on the Messages server." in again.last_bundle()["text/markdown"]
    assert len(fake.requests) == 2 and chat.requests == [], "the old server, not the new"
    sent = json.dumps(fake.requests[-1].body["messages"])
    assert "hello" in sent and "First, on the Messages server." in sent
    record = again.last_bundle()[MIME]["conversation"]
    assert (record["provider"], record["model"]) == ("anthropic", "qwen3-coder:30b")

    status = kern.ok("%phoenix status kept").text()
    assert f"anthropic at {fake.base_url}" in status, status
    assert f"openai at {chat.base_url}" in status and "%phoenix continue" in status

    chat.script(Turn([text("A new one, on Chat Completions.")]))
    fresh = kern.run("%%phoenix --name fresh\nhi there", allow_stdin=False)
    assert fresh.status == "ok", fresh.error()
    assert len(chat.requests) == 1 and len(fake.requests) == 2
    assert chat.requests[0].body["model"] == "gpt-test-unknown"
    assert fresh.last_bundle()[MIME]["conversation"]["provider"] == "openai"
    assert "stays on its own server" not in kern.ok("%phoenix status fresh").text()


def test_continue_moves_a_conversation_to_the_current_server(
    kern: Kernel, fake: FakeAnthropic, chat: FakeOpenAI
) -> None:
    fake.script(Turn([text("Summary: we said hello twice.")]))
    chat.script(Turn([text("Carrying on here.")]))
    kern.ok("%phoenix use kept")
    moved = kern.ok("%phoenix continue")
    assert "Started" in moved.text(), moved.text()
    assert fake.requests[-1].body.get("tools") in (None, []), "the summary: the old server"
    cell = kern.run("%%phoenix\nwhere were we?", allow_stdin=False)
    assert cell.status == "ok", cell.error()
    record = cell.last_bundle()[MIME]
    assert state_name(record) == "idle"
    assert record["conversation"]["provider"] == "openai"
    body = chat.requests[-1].body
    assert body["model"] == "gpt-test-unknown"
    assert "we said hello twice" in json.dumps(body["messages"])
