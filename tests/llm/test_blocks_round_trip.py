"""Nothing the API returns is lost: blocks phoenix does not interpret go back verbatim.

Real path: the fake streams the blocks over SSE, the official SDK parses them,
the provider assembles them, the runtime persists them in the real store, and
the next request is built from the stored history. The fake rejects what the
real API rejects (a server tool call left without its result anywhere but in the
paused last message).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.codec import from_json
from phoenix_nb.core.values import CitedTextBlock, RawBlock, Usage
from phoenix_nb.llm.provider import AnthropicProvider
from phoenix_nb.llm.stream import ServerToolInputDelta, ServerToolUseStart, ToolInputDelta
from phoenix_nb.runtime import updates as up
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from phoenix_nb.testing.script import raw, redacted_thinking, server_tool_result, server_tool_use
from tests.runtime.harness import assert_valid_history, phoenix_for, project_dir

from .helpers import collect, request

pytestmark = pytest.mark.timeout(60)

CITATION = {
    "type": "web_search_result_location",
    "url": "https://example.org/paris",
    "title": "Paris",
    "encrypted_index": "Eo8BCioIAhgBIiQ",
    "cited_text": "Paris is the capital of France.",
}
RESULTS = [
    {
        "type": "web_search_result",
        "url": "https://example.org/paris",
        "title": "Paris",
        "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5",
        "page_age": None,
    }
]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def agent_blocks(conv: Any) -> list[Any]:
    return [
        block
        for m in conv.history()
        if m["message_type"] == "agent"
        for block in from_json(m["content"]["blocks"])
    ]


async def test_pause_turn_with_a_pending_server_tool_call_round_trips(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    call = server_tool_use("web_search", {"query": "capital of France"}, id="srvtoolu_01")
    fake_anthropic.script(
        Turn([text("Let me search."), call], stop_reason="pause_turn"),
        Turn(
            [
                server_tool_result("srvtoolu_01", RESULTS),
                text("Paris is the capital of France.", citations=[CITATION]),
            ]
        ),
        Turn([text("You are welcome.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("What is the capital of France?")
        # The continuation request ends with the paused content, exactly as sent.
        paused = fake_anthropic.requests[1].body["messages"][-1]
        assert paused["role"] == "assistant"
        assert paused["content"] == [
            {"type": "text", "text": "Let me search."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01",
                "name": "web_search",
                "input": {"query": "capital of France"},
            },
        ]
        await conv.run("Thanks")
        # Both halves of the paused turn go back as one assistant turn, call answered.
        body = fake_anthropic.requests[2].body
        assistant = body["messages"][1]["content"]
        assert [b["type"] for b in assistant] == [
            "text",
            "server_tool_use",
            "web_search_tool_result",
            "text",
        ]
        assert assistant[2]["content"] == RESULTS
        assert assistant[3]["citations"] == [CITATION]
        assert_valid_history(conv)
        blocks = agent_blocks(conv)
        assert any(isinstance(b, RawBlock) and b.kind == "server_tool_use" for b in blocks)
        cited = [b for b in blocks if isinstance(b, CitedTextBlock)]
        assert cited and cited[0].citations[0].data == CITATION
        # The record: the search is a call in the "other" group, with its result.
        record = conv.payload()
        calls = [
            c
            for cycle in record["cycles"]
            for step in cycle["steps"]
            if step["kind"] == "ai"
            for g in step["tool_groups"]
            if g["group"] == "other"
            for c in g["calls"]
        ]
        assert [(c["name"], c["summary"], c["server"]) for c in calls] == [
            ("web_search", "capital of France", True)
        ]
        assert "https://example.org/paris" in calls[0]["result"]["content"]
        items = [
            s["item"]
            for c in record["cycles"]
            for s in c["steps"]
            if s["kind"] == "ai" and s["item"]
        ]
        assert any(i.get("citations", [{}])[0].get("url") == CITATION["url"] for i in items)


async def test_a_paused_call_dropped_from_history_is_rejected_by_the_fake(
    fake_anthropic: FakeAnthropic,
) -> None:
    """The fake's rule the round trip above relies on: an unanswered server call
    anywhere but in the last message is a 400, as the API answers."""
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    call = {"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search", "input": {}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": "and?"},
    ]
    _, outcome = await collect(provider, request(messages=messages))
    assert outcome.failure is not None and outcome.failure.status == 400
    assert "srvtoolu_9" in outcome.failure.message
    await provider.aclose()


async def test_redacted_thinking_before_a_tool_use_round_trips(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    secret = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
    fake_anthropic.script(
        Turn([redacted_thinking(secret), tool_use("bash", {"command": "echo hi"}, id="toolu_r1")]),
        Turn([text("It printed hi.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("say hi")
        assistant = fake_anthropic.requests[1].body["messages"][1]
        assert assistant["content"][0] == {"type": "redacted_thinking", "data": secret}
        assert assistant["content"][1]["type"] == "tool_use"
        assert assistant["content"][1]["id"] == "toolu_r1"
        assert_valid_history(conv)


async def test_an_unknown_block_type_round_trips_byte_for_byte(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    # Key order, nesting, unicode, null, floats: all must come back as they went.
    block = {
        "type": "hologram_2027",
        "zeta": "first key is not alphabetical",
        "payload": {"b": [1, 2.5, "é€"], "a": None, "nested": {"y": True, "x": -0.125}},
        "id": "holo_01",
    }
    wire = compact(block)
    fake_anthropic.script(Turn([text("Here."), raw(block)]), Turn([text("ok")]))
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("show me")
        await conv.run("again")
        sent = fake_anthropic.requests[1].body["messages"][1]["content"]
        assert [compact(b) for b in sent] == [compact({"type": "text", "text": "Here."}), wire]
        # ...and the store keeps it exactly too (a restart sends the same bytes).
        stored = [b for b in agent_blocks(conv) if isinstance(b, RawBlock)]
        assert [compact(b.data) for b in stored] == [wire]


async def test_unknown_block_completed_from_unknown_deltas(fake_anthropic: FakeAnthropic) -> None:
    """A streamed block of an unknown type: string fields append, lists extend."""
    start = {"type": "compaction", "content": "", "parts": []}
    deltas = [
        {"type": "compaction_delta", "content": "Summary of "},
        {"type": "compaction_delta", "content": "the work.", "parts": [1]},
    ]
    final = {"type": "compaction", "content": "Summary of the work.", "parts": [1]}
    fake_anthropic.script(Turn([raw(final, start=start, deltas=deltas), text("go on")]))
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    _, outcome = await collect(provider)
    assert outcome.response is not None
    assert outcome.response.content[0] == RawBlock(final)
    await provider.aclose()


async def test_server_tool_input_updates_are_typed_as_server_calls(
    fake_anthropic: FakeAnthropic,
) -> None:
    """Input deltas of a server tool call are not client tool-input updates without an id."""
    fake_anthropic.script(
        Turn(
            [server_tool_use("web_search", {"query": "anthropic pricing"}, id="srvtoolu_7")],
            stop_reason="pause_turn",
        )
    )
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url)
    updates, outcome = await collect(provider)
    assert not any(isinstance(u, ToolInputDelta) for u in updates)
    starts = [u for u in updates if isinstance(u, ServerToolUseStart)]
    assert [(s.id, s.name, s.kind) for s in starts] == [
        ("srvtoolu_7", "web_search", "server_tool_use")
    ]
    fragments = "".join(u.partial_json for u in updates if isinstance(u, ServerToolInputDelta))
    assert json.loads(fragments) == {"query": "anthropic pricing"}
    assert outcome.response is not None and outcome.response.stop_reason == "pause_turn"
    await provider.aclose()


async def test_a_continuation_request_sends_server_tool_blocks_as_text(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A summary request offers no tools, so server calls and results become text too."""
    call = server_tool_use("web_search", {"query": "capital"}, id="srvtoolu_c1")
    fake_anthropic.script(
        Turn([call], stop_reason="pause_turn"),
        Turn(
            [server_tool_result("srvtoolu_c1", RESULTS), text("Paris.", citations=[CITATION])],
            usage=Usage(input_tokens=195_000, output_tokens=10),
        ),
        Turn([text("Summary: the user asked for a capital; it is Paris.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("capital?")
        summary_request = fake_anthropic.requests[-1].body
        assert "tools" not in summary_request or not summary_request["tools"]
        kinds = {
            b["type"]
            for m in summary_request["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        }
        assert kinds == {"text"}, kinds
        words = json.dumps(summary_request["messages"])
        assert "[called web_search" in words and "example.org/paris" in words


async def test_watchers_see_server_tool_calls_as_such(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    call = server_tool_use("web_search", {"query": "capital"}, id="srvtoolu_w1")
    fake_anthropic.script(
        Turn([call], stop_reason="pause_turn"),
        Turn([server_tool_result("srvtoolu_w1", RESULTS), text("Paris.")]),
    )
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        updates = [u async for u in await conv.send("capital?")]
    server = [u.data for u in updates if u.kind == up.SERVER_TOOL]
    assert asdict(server[0]) == {
        "index": 0,
        "id": "srvtoolu_w1",
        "name": "web_search",
        "kind": "server_tool_use",
        "partial_json": "",
    }
    assert json.loads("".join(d.partial_json for d in server)) == {"query": "capital"}
    assert not [u for u in updates if u.kind == up.TOOL_INPUT]
