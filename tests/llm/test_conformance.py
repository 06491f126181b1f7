"""The conformance suite: the same agent histories through every provider, asserting what
the server received, field by field, against its wire format's documented shape.

Each provider is the real adapter on its real SDK, over loopback to a fake of its wire
format: Anthropic's Messages API, a compatible local server (no caching, no thinking),
Bedrock (AWS event stream, SigV4), Vertex (:streamRawPredict, google-auth token) and
OpenAI-compatible Chat Completions. For Bedrock and Vertex the body read is the one the
cloud route received (`wire`), as the SDK sent it.

What a server received is read back into one neutral form (`testing.received`: an
`Answer` per tool call, its id, text, error flag and images), so every case states once
what the agent meant and each wire format is held to it: every call answered exactly
once, with the tool's actual output. Where the formats differ by design (Chat
Completions has no empty tool message: "(no output)"), the case says so. The
kernel-level counterpart, the cases a scripted model can drive through `%%phoenix`,
is tests/notebook/test_kernel_conformance.py.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from phoenix_nb.core.messages import interrupted_text
from phoenix_nb.core.requests import continuation_messages
from phoenix_nb.core.transition import continuation_prompt
from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.llm.openai_chat import OpenAIChatProvider
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.providers import make_provider
from phoenix_nb.testing import Fault, Turn, text
from phoenix_nb.testing.compat_server import CompatServer
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_openai import FakeOpenAI
from phoenix_nb.testing.fake_vertex import FakeVertex
from phoenix_nb.testing.received import Answer, Received, chat_received, messages_received

from .helpers import BASH_TOOL, collect

WIRES = ("anthropic", "compat", "bedrock", "vertex", "openai")
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "compat": "qwen3-coder:30b",
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
    "openai": "gpt-test-unknown",
}


@dataclass
class Server:
    """One wire format: its fake, the adapter talking to it, and what it received."""

    name: str
    fake: FakeAnthropic
    provider: Any
    model: str

    @property
    def chat(self) -> bool:
        return self.name == "openai"

    def bodies(self) -> list[Mapping[str, Any]]:
        """Every request body the server received, in order (refused ones included
        for Bedrock and Vertex, whose cloud route records before relaying)."""
        if isinstance(self.fake, FakeBedrock | FakeVertex):
            return [r.body for r in self.fake.wire]
        return [r.body for r in self.fake.requests]


@pytest.fixture(params=WIRES)
def server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Server]:
    name = str(request.param)
    for var in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    fake: FakeAnthropic
    if name == "anthropic":
        fake = FakeAnthropic(api_key="sk-ant-conformance").start()
        provider: Any = AnthropicProvider(
            api_key="sk-ant-conformance", base_url=fake.base_url, stall_timeout=10
        )
    elif name == "compat":
        fake = CompatServer().start()
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        provider = AnthropicProvider(base_url=fake.base_url, stall_timeout=10)
    elif name == "bedrock":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-access-key")
        monkeypatch.setenv("AWS_REGION", "us-west-2")
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        fake = FakeBedrock().start()
        provider = make_provider("bedrock", base_url=fake.base_url, stall_timeout=10)
    elif name == "vertex":
        vertex = FakeVertex().start()
        fake = vertex
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(vertex.credentials_file(tmp_path)))
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "fake-project")
        monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
        monkeypatch.setenv("NO_GCE_CHECK", "True")
        provider = make_provider("vertex", base_url=vertex.vertex_url, stall_timeout=10)
    else:
        fake = FakeOpenAI(api_key="sk-conformance").start()
        provider = OpenAIChatProvider(
            base_url=fake.base_url, api_key="sk-conformance", stall_timeout=10
        )
    try:
        yield Server(name, fake, provider, MODELS[name])
    finally:
        fake.stop()


# ---- what a server received, in one neutral form ------------------------------------


def received(server: Server, body: Mapping[str, Any]) -> Received:
    got = chat_received(body) if server.chat else messages_received(body)
    assert got.problems() == [], "every call answered exactly once"
    return got


# ---- the histories -------------------------------------------------------------------


def _png(colour: str = "blue") -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _image(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": command}}


def _result(call_id: str, content: Any, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


def _round(
    results: Sequence[dict[str, Any]], calls: Sequence[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """A user's words, the agent's calls, and the tools' results (as core sends them)."""
    calls = calls or [_call(str(r["tool_use_id"]), "true") for r in results]
    return [
        {"role": "user", "content": [{"type": "text", "text": "please look"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, *calls]},
        {"role": "user", "content": list(results)},
    ]


MEGABYTE = "".join(f"line {i:06d}: {'ab' * 20}\n" for i in range(20_000))[:1_000_000]
ODD = "héllo wörld — 世界 🎉 \x00\x01\x07\x1b[31mred\x1b[0m\ttab\r\n\u2028end\x7f"
PICTURE = _png()


@dataclass(frozen=True)
class Case:
    name: str
    messages: list[dict[str, Any]]
    answers: list[Answer]  # the Messages API's view; `chat` overrides where it differs
    chat: list[Answer] | None = None


CASES = [
    Case(
        "string result",
        _round([_result("toolu_s", "total 0\nmade.txt")]),
        [Answer("toolu_s", "total 0\nmade.txt")],
    ),
    Case(
        "block result",
        _round(
            [_result("toolu_b", [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}])]
        ),
        [Answer("toolu_b", "one\ntwo")],
    ),
    Case(
        "empty result",
        _round([_result("toolu_e", "")]),
        [Answer("toolu_e", "")],
        chat=[Answer("toolu_e", "(no output)")],
    ),
    Case(
        "is_error",
        _round([_result("toolu_x", "boom\n[exit code 2]", is_error=True)]),
        [Answer("toolu_x", "boom\n[exit code 2]", is_error=True)],
    ),
    Case("1 MB of output", _round([_result("toolu_m", MEGABYTE)]), [Answer("toolu_m", MEGABYTE)]),
    Case(
        "non-ASCII and control characters",
        _round([_result("toolu_o", ODD)]),
        [Answer("toolu_o", ODD)],
    ),
    Case(
        "image in a tool result",
        _round([_result("toolu_i", [{"type": "text", "text": "a plot"}, _image(PICTURE)])]),
        [Answer("toolu_i", "a plot", images=(PICTURE,))],
    ),
    Case(
        "parallel calls answered out of order",
        _round(
            [
                _result("toolu_p2", "second"),
                _result("toolu_p3", "third", is_error=True),
                _result("toolu_p1", "first"),
            ],
            [
                _call("toolu_p1", "echo first"),
                _call("toolu_p2", "echo second"),
                _call("toolu_p3", "echo third"),
            ],
        ),
        [
            Answer("toolu_p2", "second"),
            Answer("toolu_p3", "third", is_error=True),
            Answer("toolu_p1", "first"),
        ],
    ),
    Case(
        "cancel mid-stream: synthetic results",
        [
            *_round(
                [
                    _result("toolu_c1", interrupted_text("cancelled by the user"), True),
                    _result("toolu_c2", interrupted_text("cancelled by the user"), True),
                ],
                [_call("toolu_c1", "sleep 100"), _call("toolu_c2", "sleep 200")],
            )[:-1],
            {
                "role": "user",
                "content": [
                    _result("toolu_c1", interrupted_text("cancelled by the user"), True),
                    _result("toolu_c2", interrupted_text("cancelled by the user"), True),
                    {"type": "text", "text": "never mind, just say hi"},
                ],
            },
        ],
        [
            Answer("toolu_c1", interrupted_text("cancelled by the user"), True),
            Answer("toolu_c2", interrupted_text("cancelled by the user"), True),
        ],
    ),
]


def _expected(server: Server, case: Case) -> list[Answer]:
    return case.chat if server.chat and case.chat is not None else case.answers


def _request(server: Server, messages: list[dict[str, Any]], **more: Any) -> LlmRequest:
    return LlmRequest(
        model=server.model,
        system="You are a test.",
        messages=messages,
        tools=[BASH_TOOL],
        max_tokens=1000,
        **more,
    )


async def _turn(server: Server, req: LlmRequest, *replies: Any) -> Any:
    server.fake.script(*(replies or (Turn([text("Noted.")]),)))
    _, outcome = await collect(server.provider, req)
    return outcome


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_every_tool_answer_arrives_as_the_tool_made_it(server: Server, case: Case) -> None:
    outcome = await _turn(server, _request(server, case.messages))
    assert outcome.response is not None, outcome.failure
    got = received(server, server.bodies()[-1])
    assert got.answers == _expected(server, case)
    assert got.user_texts[0] == "please look"
    if case.name.startswith("cancel"):
        assert got.user_texts[-1] == "never mind, just say hi", "the user's words follow"
    await server.provider.aclose()


async def test_a_retried_429_sends_the_same_body_again(server: Server) -> None:
    case = CASES[0]
    req = _request(server, case.messages)
    first = await _turn(server, req, Fault.status(429, retry_after=0), Turn([text("ok")]))
    assert first.failure is not None and first.failure.retryable
    second = await _turn(server, req, Turn([text("Answered after a retry.")]))
    assert second.response is not None, second.failure
    bodies = server.bodies()
    assert len(bodies) == 2
    assert bodies[0] == bodies[1], "the retry is the same request"
    assert received(server, bodies[1]).answers == case.answers
    await server.provider.aclose()


async def test_thinking_goes_back_where_the_api_takes_it_and_nowhere_else(
    server: Server,
) -> None:
    signed = {"type": "thinking", "thinking": "I should list files.", "signature": "sig-123"}
    messages = _round([_result("toolu_t", "a.txt")])
    messages[1] = {"role": "assistant", "content": [signed, _call("toolu_t", "ls")]}
    outcome = await _turn(
        server, _request(server, messages, thinking={"type": "enabled", "budget_tokens": 1024})
    )
    assert outcome.response is not None, outcome.failure
    body = server.bodies()[-1]
    got = received(server, body)
    assert got.answers == [Answer("toolu_t", "a.txt")]
    if server.name in ("anthropic", "bedrock", "vertex"):
        assert got.thinking == [signed], "the signed block goes back unchanged"
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    elif server.name == "compat":  # it refused the parameter; its own blocks still go back
        assert "thinking" not in body and got.thinking == [signed]
        assert server.fake.refused == ["caching", "thinking"]
    else:  # Chat Completions has no thinking to send back
        assert "thinking" not in body and got.thinking == []
        assert "I should list files." not in json.dumps(body)
    await server.provider.aclose()


async def test_a_continuation_summary_request_offers_no_tools_and_keeps_the_history(
    server: Server,
) -> None:
    history = _round([_result("toolu_s", "total 0\nmade.txt")])
    history.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    history.append({"role": "user", "content": [{"type": "text", "text": "and then?"}]})
    prompt = continuation_prompt(())
    req = LlmRequest(
        model=server.model,
        system="You are a test.",
        messages=continuation_messages(history, prompt),
        max_tokens=1000,
    )
    outcome = await _turn(server, req, Turn([text("Summary: made.txt exists.")]))
    assert outcome.response is not None, outcome.failure
    body = server.bodies()[-1]
    got = received(server, body)
    assert got.calls == [] and got.answers == [] and "tools" not in body
    sent = json.dumps(body, ensure_ascii=False)
    assert "total 0\\nmade.txt" in sent, "the tool's output is in the summary request as text"
    assert got.user_texts[-1].endswith(prompt.rsplit("\n", 1)[-1])
    await server.provider.aclose()
