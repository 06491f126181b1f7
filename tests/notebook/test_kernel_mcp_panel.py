"""An MCP server awaiting approval in the side panel's pending list, through a real kernel:
the panel's comm (driven as labextension/src/panel.ts drives it) lists the real request
(`runtime.mcp_requests`, kind `mcp_server`, the whole kernel's) while a `%%phoenix` cell
waits for it, and answering it there lets that cell's turn go on with the server's tools.

Checked from outside: the server's process in /proc, the tools the fake Messages API was
offered, the comm messages the kernel published.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_mcp import HOSTILE, offered, processes_with
from tests.notebook.test_kernel_panel import PanelClient, _listing

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not detect_sandbox().available, reason="stdio MCP servers run in the sandbox"
    ),
]


def test_the_panel_lists_a_waiting_mcp_server_and_its_answer_lets_the_cell_go_on(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    token = f"phoenix-mcp-{uuid.uuid4().hex}"
    entry = {"command": sys.executable, "args": [str(HOSTILE), token], "env": {"TEAM_DB": "x"}}
    (kern.project / ".mcp.json").write_text(json.dumps({"mcpServers": {"team": entry}}))
    try:
        panel = PanelClient(kern)
        fake.script(Turn([text("with the team's tools")]))
        since = time.monotonic()
        cell = kern.submit("%%phoenix --new\nWhich tools?")
        kern.wait_for_button("Approve team", since, timeout=60)
        items = _listing(
            panel,
            "the server's request",
            lambda items: any(i["kind"] == "mcp_server" for i in items),
        )
        [request] = [i for i in items if i["kind"] == "mcp_server"]
        assert request["conversation"] == "" and request["detail"] == {"server": "team"}
        assert token in request["reason"] and "TEAM_DB" in request["reason"]
        assert request["answers"] == ["approve", "deny"]
        assert processes_with(token) == [] and fake.requests == []

        panel.say(type="answer", id=request["id"], answer="approve")
        kern.finish(cell, timeout=90)
        assert cell.status == "ok", cell.error()
        assert processes_with(token), "the approved server runs"
        assert "mcp__team__connect" in offered(fake), "the waiting cell's turn got its tools"
        _listing(
            panel,
            "the list without it",
            lambda items: not any(i["kind"] == "mcp_server" for i in items),
        )
        panel.close()
    finally:
        (kern.project / ".mcp.json").unlink()
        kern.run("%config Phoenix.mcp_servers = {}", timeout=30)
