"""The cached prefix holds: system prompt and tool definitions are byte-identical for
every request of a conversation, across a mode upgrade, a downgrade, a restart and
a second kernel (another process on the same store), and the fake's cache proves
the prefix was reused each time. Sub-agents cache too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.values import Mode
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use
from tests.runtime.harness import MODEL, phoenix_for, project_dir

pytestmark = pytest.mark.timeout(120)

SECOND_KERNEL = textwrap.dedent(
    """
    import asyncio, sys
    from phoenix_nb.runtime.manager import Phoenix
    from phoenix_nb.runtime.settings import Settings

    async def main(home, base_url, model):
        phoenix = Phoenix(Settings(home=home, model=model, base_url=base_url,
                                   api_key="test-key", retry_delay_scale=0.01))
        try:
            conv = phoenix.get("stable")
            await conv.run("hello from the second kernel")
        finally:
            await phoenix.aclose()

    asyncio.run(main(*sys.argv[1:4]))
    """
)


def exact(value: Any) -> bytes:
    """The bytes the request carried for this part (key order included)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def conversation_requests(fake: FakeAnthropic) -> list[FakeRequest]:
    return [r for r in fake.requests if r.body.get("tools")]


async def test_prefix_is_byte_stable_across_modes_restarts_and_kernels(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    proj = project_dir(tmp_path)
    patch = {
        "path": "app.py",
        "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
    }
    fake_anthropic.script(
        Turn([tool_use("request_mode_upgrade", {"reason": "fix add"})]),
        Turn([tool_use("patch", patch)]),
        Turn([text("Fixed.")]),
        Turn([text("Checked, read-only again.")]),
        Turn([text("Still here after the restart.")]),
        Turn([text("Hello from kernel two.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=proj, slug="stable")
        await conv.run("fix it")
        await conv.approve()  # upgrade: Restricted -> Unrestricted
        await conv.wait()
        assert conv.mode is Mode.UNRESTRICTED
        await conv.restrict()  # downgrade
        await conv.run("check it")
    async with phoenix_for(fake_anthropic, tmp_path) as restarted:  # a kernel restart
        await restarted.get("stable").run("still there?")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SECOND_KERNEL,
        str(tmp_path / "store"),
        fake_anthropic.base_url,
        MODEL,
    )
    assert await asyncio.wait_for(child.wait(), 90) == 0

    requests = conversation_requests(fake_anthropic)
    assert len(requests) == 6
    systems = {exact(r.body["system"]) for r in requests}
    tools = {exact(r.body["tools"]) for r in requests}
    assert len(systems) == 1, "the system prompt changed within the conversation"
    assert len(tools) == 1, "the tool definitions changed within the conversation"
    for req in requests:
        assert req.body["cache_control"]["type"] == "ephemeral"
    # What the cache saw: every request after the first read the prefix written before,
    # in the other mode, after the restart and from the other process alike.
    billed = [fake_anthropic.billing(r.index) for r in requests]
    assert billed[0] is not None and billed[0].cache_read_input_tokens == 0
    for before, after in itertools.pairwise(billed):
        assert before is not None and after is not None
        assert after.cache_read_input_tokens >= before.total, (before, after)


async def test_sub_agents_cache_too(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    def is_parent(req: FakeRequest) -> bool:
        return "spawn_agents" in {t["name"] for t in req.body.get("tools", [])}

    child_turns = iter(
        [
            Turn([tool_use("bash", {"command": "ls"})]),
            Turn([tool_use("submit_result", {"result": "two files", "success": True})]),
        ]
    )
    fake_anthropic.add_rule(lambda r: not is_parent(r), lambda _r: next(child_turns))
    fake_anthropic.script(
        Turn([tool_use("spawn_agents", {"tasks": [{"task": "count the files"}]})]),
    )
    fake_anthropic.add_rule(is_parent, Turn([text("The helper found two files.")]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("how many files?")
    children = [r for r in fake_anthropic.requests if not is_parent(r)]
    assert len(children) == 2
    for req in fake_anthropic.requests:
        assert req.body["cache_control"]["type"] == "ephemeral"
    assert len({exact(r.body["system"]) for r in children}) == 1
    second = fake_anthropic.billing(children[1].index)
    assert second is not None and second.cache_read_input_tokens > 0
