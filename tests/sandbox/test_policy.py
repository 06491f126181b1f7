"""The sandbox policy is a value each `Phoenix` owns, never process state.

Two `Phoenix` objects live in one process with different ``deny_read`` lists;
each conversation runs a Restricted ``cat`` of both files through the real
runtime, tools and launcher, at the same time, and the model (a fake Messages
API server) sees what each command printed: each hides its own list and only
its own.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb import sandbox
from phoenix_nb.runtime.manager import Phoenix
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use

pytestmark = pytest.mark.skipif(
    not any(
        g.name == "credential files unreadable" and g.holds
        for g in (sandbox.guarantees() if sandbox.detect_sandbox().available else [])
    ),
    reason="this host cannot hide paths from Restricted commands",
)


def _first_user_text(request: FakeRequest) -> str:
    messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
    content = messages[0].get("content") if messages else ""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _turns(request: FakeRequest) -> int:
    return sum(1 for m in request.body.get("messages", []) if m.get("role") == "assistant")


async def test_two_phoenix_objects_each_hide_their_own_deny_list(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "alpha.txt").write_text("ALPHA-CANARY\n")
    (project / "beta.txt").write_text("BETA-CANARY\n")
    cat = Turn([tool_use("bash", {"command": "cat alpha.txt; cat beta.txt; exit 0"})])

    def reply(request: FakeRequest) -> Any:
        return cat if _turns(request) == 0 else Turn([text("done")])

    async with FakeAnthropic() as fake:
        fake.add_rule(lambda r: True, reply)

        def phoenix(name: str, deny: tuple[str, ...]) -> Phoenix:
            return Phoenix(
                Settings(
                    home=tmp_path / name,
                    base_url=fake.base_url,
                    api_key="k",
                    model="claude-sonnet-4-5",
                    retry_delay_scale=0.01,
                    deny_read=deny,
                )
            )

        hides_alpha = phoenix("a", ("alpha.txt",))
        hides_beta = phoenix("b", ("beta.txt",))  # built second: it must not change the first
        try:
            conv_a = hides_alpha.create(cwd=project, mode="restricted")
            conv_b = hides_beta.create(cwd=project, mode="restricted")
            await asyncio.gather(conv_a.run("run as A"), conv_b.run("run as B"))
        finally:
            await hides_alpha.aclose()
            await hides_beta.aclose()
        seen = {
            _first_user_text(r): json.dumps(r.tool_results) for r in fake.requests if r.tool_results
        }
    assert set(seen) == {"run as A", "run as B"}, seen
    assert "ALPHA-CANARY" not in seen["run as A"] and "Permission denied" in seen["run as A"]
    assert "BETA-CANARY" in seen["run as A"]
    assert "BETA-CANARY" not in seen["run as B"] and "Permission denied" in seen["run as B"]
    assert "ALPHA-CANARY" in seen["run as B"]


def test_the_model_is_never_shown_a_list_that_can_change_and_status_shows_the_real_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool description and the system prompt are fixed at import; a deny list in
    them would be whichever list was configured first. They name none; `%phoenix
    status` shows the conversation's own."""
    from phoenix_nb.notebook.magics import _status
    from phoenix_nb.notebook.session import PhoenixConfig, Session
    from phoenix_nb.runtime.prompts import system_prompt
    from phoenix_nb.tools.bash import BashTool

    shown = [BashTool.description] + [
        system_prompt(cwd=tmp_path, is_sub_agent=sub) for sub in (False, True)
    ]
    for pattern in sandbox.DEFAULT_DENY_READ:
        assert not any(pattern in text for text in shown), pattern
    assert all("%phoenix status" in text for text in shown)

    monkeypatch.setenv("PHOENIX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PHOENIX_MODEL", "demo")
    session = Session(PhoenixConfig(deny_read=["~/.only-this"]), cwd=tmp_path)
    try:
        conv = session.phoenix.create(cwd=tmp_path)
        status = _status(conv, session)
    finally:
        asyncio.run(session.phoenix.aclose())
    [line] = [s for s in status.splitlines() if s.startswith("hidden")]
    assert "~/.only-this" in line and "~/.ssh" not in line
