"""A conversation whose server can no longer be used says so, through a real kernel.

Three conversations start on a Chat Completions server (provider `openai`, a key);
the kernel ends. A new kernel on the same store starts new conversations on a
Messages API server. Each old conversation then meets a different reason its own
server cannot be built or used any more — the provider's SDK is missing, its key is
gone (the server refuses the request), its provider kind is one this version does not
speak (a later version's record), the admin's policy does not allow it — and each
says so in one line naming the conversation's server, the current one and
`%phoenix continue`, sending nothing anywhere it should not. `%phoenix continue`
then carries such a conversation to the current server: the summary is asked of the
current server, with the current model (the old one cannot answer), and the new
conversation goes on there.

Before conversations said this, the line was a generic "c.Phoenix.provider =
'openai' needs its SDK" (while the setting said 'anthropic'), an unknown kind moved
the conversation silently to the current server with a history it had never seen,
a policy was not asked at all, and `%phoenix continue` seeded the new conversation
with "the continuation summary could not be generated".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.store import Store
from phoenix_nb.testing import Turn, text
from phoenix_nb.testing.compat_server import CompatServer
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(300)

OLD_KEY = "sk-old-server-key"
OLD_MODEL = "gpt-old-model"
NEW_MODEL = "qwen3-coder:30b"
WAIT = 60.0


@pytest.fixture(scope="module")
def fake() -> Iterator[CompatServer]:
    with CompatServer() as server:
        yield server


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=OLD_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, fake: CompatServer, chat: FakeOpenAI) -> Path:
    """A store holding conversations `nosdk`, `nokey`, `policed` and `restarted` started on the
    Chat Completions server, and `future` stored by a later version on a kind of
    server this one does not speak."""
    root = tmp_path_factory.mktemp("gone")
    env = {"PHOENIX_MODEL": OLD_MODEL, "OPENAI_API_KEY": OLD_KEY}
    with loaded_kernel(root, fake.base_url, extra_env=env) as k:
        k.ok("%config Phoenix.provider = 'openai'")
        k.ok(f"%config Phoenix.base_url = {chat.base_url!r}")
        for name in ("nosdk", "nokey", "policed", "restarted"):
            chat.script(Turn([text(f"Hello from {name}.")]))
            turn = k.run(f"%%phoenix --name {name}\nhello {name}", timeout=WAIT)
            assert turn.status == "ok", turn.error()
            assert state_name(turn.last_bundle()[MIME]) == "idle"
    assert len(chat.requests) == 4 and fake.requests == []
    store = Store(root / "store")
    try:
        store.create_conversation(
            slug="future",
            cwd=str(root / "project"),
            model="mistral-large",
            mode="restricted",
            server={"provider": "mistral", "base_url": "https://api.mistral.example"},
        )
    finally:
        store.close()
    return root


def _the_line(kern: Kernel, name: str) -> str:
    """The turn's error, as the record shows it: one line about the server (the record
    states a turn's error and the conversation's, the same line)."""
    turn = kern.run(f"%%phoenix --name {name}\ngo on", timeout=WAIT)
    assert turn.status == "ok", turn.error()
    shown = turn.last_bundle()["text/plain"]
    lines = {line for line in shown.splitlines() if "This conversation is on" in line}
    assert len(lines) == 1, shown
    return lines.pop()


def test_each_reason_a_server_cannot_be_used_is_one_line_and_continue_moves_on(
    root: Path, fake: CompatServer, chat: FakeOpenAI
) -> None:
    old = f"openai at {chat.base_url}"
    new = f"anthropic at {fake.base_url}"
    # The key is gone ("" is no key: the SDK's placeholder goes instead).
    env = {"PHOENIX_MODEL": NEW_MODEL, "OPENAI_API_KEY": ""}
    sent, asked = len(chat.requests), len(fake.requests)
    with loaded_kernel(root, fake.base_url, extra_env=env) as kern:
        kern.ok("%config Phoenix.retry_delay_scale = 0.001")

        kern.ok("import sys; sys.modules['openai'] = None  # as if the extra were missing")
        line = _the_line(kern, "nosdk")
        assert line.count(old) == 1 and new in line, line
        assert "needs its SDK (openai)" in line and "pip install 'phoenix_nb[openai]'" in line
        assert "`%phoenix continue`" in line
        assert "c.Phoenix.provider = 'openai'" not in line, "the setting says anthropic now"
        assert len(chat.requests) == sent and len(fake.requests) == asked, "nothing was sent"
        status = kern.ok("%phoenix status nosdk").text()
        assert "its server cannot be used here now (the openai provider needs" in status, status

        kern.ok("del sys.modules['openai']  # the SDK is back; the key is still gone")
        line = _the_line(kern, "nokey")
        assert old in line and new in line and "`%phoenix continue`" in line, line
        assert "401" in line and "OPENAI_API_KEY" in line, line
        assert len(chat.requests) == sent + 1 and len(fake.requests) == asked
        refused = chat.requests[-1]  # refused by the server (the 401 above): no key went
        assert "hello nokey" in json.dumps(refused.body["messages"]), "its own history, there"

        line = _the_line(kern, "future")
        assert "mistral at https://api.mistral.example" in line and new in line, line
        assert "does not speak 'mistral'" in line and "`%phoenix continue`" in line
        assert len(chat.requests) == sent + 1 and len(fake.requests) == asked, "not moved silently"
        status = kern.ok("%phoenix status future").text()
        assert "mistral at https://api.mistral.example" in status, status

        # Continue: the old server cannot summarise; the current one does, as itself.
        fake.script(Turn([text("Summary: we said hello to nokey.")]))
        fake.script(Turn([text("Carrying on here.")]))
        kern.ok("%phoenix use nokey")
        moved = kern.ok("%phoenix continue", timeout=WAIT)
        assert "Started" in moved.text(), moved.text()
        assert len(chat.requests) == sent + 1, "the summary was not asked of the old server"
        summary = fake.requests[asked].body
        assert summary["model"] == NEW_MODEL and summary.get("tools") in (None, [])
        history = json.dumps(summary["messages"])
        assert "hello nokey" in history and "Hello from nokey." in history
        cell = kern.run("%%phoenix\nwhere were we?", timeout=WAIT)
        assert cell.status == "ok", cell.error()
        record = cell.last_bundle()[MIME]
        assert state_name(record) == "idle"
        assert record["conversation"]["provider"] == "anthropic"
        body = fake.requests[asked + 1].body
        assert body["model"] == NEW_MODEL
        assert "we said hello to nokey" in json.dumps(body["messages"])


@pytest.mark.parametrize("bound", ["provider", "base URL"])
def test_a_server_the_policy_does_not_allow_is_not_used(
    root: Path, fake: CompatServer, chat: FakeOpenAI, tmp_path: Path, bound: str
) -> None:
    policy = tmp_path / "policy.toml"
    rules = (
        'allowed = ["anthropic"]'
        if bound == "provider"
        else f'allowed = ["anthropic", "openai"]\nbase_urls = ["{fake.base_url}"]'
    )
    policy.write_text(f"[providers]\n{rules}\n", encoding="utf-8")
    env = {"PHOENIX_MODEL": NEW_MODEL, "OPENAI_API_KEY": OLD_KEY, "PHOENIX_POLICY": str(policy)}
    before = len(chat.requests)
    with loaded_kernel(root, fake.base_url, extra_env=env) as kern:
        line = _the_line(kern, "policed")
        assert f"openai at {chat.base_url}" in line and f"anthropic at {fake.base_url}" in line
        refusal = "provider 'openai'" if bound == "provider" else f"base URL {chat.base_url!r}"
        assert f"{refusal} is not allowed" in line and "`%phoenix continue`" in line, line
        assert len(chat.requests) == before, "the policy's refusal: nothing sent"


def test_continue_finds_a_refused_key_by_trying_and_asks_the_current_server(
    root: Path, fake: CompatServer, chat: FakeOpenAI
) -> None:
    """Straight after a kernel start, nothing has told `restarted` its server refuses
    the key: the summary is asked of its own server (refused), then of the current one."""
    env = {"PHOENIX_MODEL": NEW_MODEL, "OPENAI_API_KEY": ""}
    before, asked = len(chat.requests), len(fake.requests)
    with loaded_kernel(root, fake.base_url, extra_env=env) as kern:
        fake.script(Turn([text("Summary: restarted said hello.")]))
        kern.ok("%phoenix use restarted")
        moved = kern.ok("%phoenix continue", timeout=WAIT)
        assert "Started" in moved.text(), moved.text()
        assert len(chat.requests) == before + 1, "its own server was asked first"
        refused = chat.requests[-1].body
        assert refused.get("tools") in (None, []) and "hello restarted" in json.dumps(refused)
        summary = fake.requests[asked].body
        assert summary["model"] == NEW_MODEL and summary.get("tools") in (None, [])
        assert "hello restarted" in json.dumps(summary["messages"])
        fake.script(Turn([text("Going on.")]))
        cell = kern.run("%%phoenix\nand now?", timeout=WAIT)
        assert cell.status == "ok", cell.error()
        assert "restarted said hello" in json.dumps(fake.requests[-1].body["messages"])
        assert "Context limit reached" not in json.dumps(fake.requests[-1].body["messages"])
