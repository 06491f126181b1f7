"""The turn budget: a runaway model is stopped, cleanly, and told why.

Real SDK over loopback to the fake Messages API, real tools, real store. The
"model" here never stops calling a tool (one it was never given, as in the
466-round cell that motivated the budget); each test checks where the turn
stopped, that the history stays valid for the API, what the record says, and
that the model reads the limit with the next message.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.prices import cost
from phoenix_nb.core.states import Idle
from phoenix_nb.core.transition import BUDGET_NOT_RUN_RESULT
from phoenix_nb.core.values import Usage
from phoenix_nb.runtime.manager import Conversation, PhoenixError
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use

from .harness import MODEL, assert_valid_history, phoenix_for, project_dir

pytestmark = pytest.mark.timeout(120)

# One response's usage: priced, it costs about $0.32 with the harness's model.
EXPENSIVE = Usage(input_tokens=100_000, output_tokens=1_000)
_IDS = itertools.count(1)


def runaway(fake: FakeAnthropic, usage: Usage | None = None) -> None:
    """The model calls an undeclared tool again and again, whatever it is told."""

    def reply(_request: FakeRequest) -> Turn:
        call = tool_use("frobnicate", {"n": next(_IDS)}, id=f"toolu_run_{next(_IDS):05d}")
        return Turn([text("Once more."), call], usage=usage)

    fake.add_rule(lambda request: "Stop now" not in request.last_user_text, reply)


def last_cycle(conv: Conversation) -> dict[str, Any]:
    cycles = conv.payload()["cycles"]
    assert cycles
    return dict(cycles[-1])


def limit_steps(cycle: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in cycle["steps"] if s["kind"] == "system" and s.get("limit")]


def notice_sent(request: FakeRequest, limit: str) -> bool:
    """The request tells the model that a limit stopped the last turn."""
    return any(
        isinstance(block, dict)
        and "[phoenix notice]" in block.get("text", "")
        and limit in block.get("text", "")
        for message in request.body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
    )


async def test_a_runaway_model_stops_at_max_turn_rounds_with_a_valid_chain(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    runaway(fake_anthropic)
    async with phoenix_for(fake_anthropic, tmp_path, max_turn_rounds=5) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("Frobnicate everything.")

        assert isinstance(conv.state.phase, Idle)
        assert len(fake_anthropic.requests) == 5  # five responses, no sixth request
        assert_valid_history(conv)
        history = conv.history()
        # The fifth response's call was answered without being run, then the note.
        assert history[-2]["message_type"] == "tool"
        assert history[-2]["content"]["content"] == BUDGET_NOT_RUN_RESULT.format(
            limit="max_turn_rounds"
        )
        assert history[-1]["message_type"] == "system"
        assert history[-1]["content"]["limit"] == "max_turn_rounds"

        cycle = last_cycle(conv)
        (step,) = limit_steps(cycle)
        assert "after 5 model responses" in step["text"]
        assert "%config Phoenix.max_turn_rounds" in step["text"]
        assert cycle["stop"] == {"reason": "interrupted", "limit": "max_turn_rounds"}

        # The next message goes on, tells the model, and the count starts again.
        fake_anthropic.script(Turn([text("Stopping, as asked.")]))
        await conv.run("Stop now and summarise.")
        follow_up = fake_anthropic.requests[-1]
        assert notice_sent(follow_up, "max_turn_rounds")
        assert len(fake_anthropic.requests) == 6
        assert isinstance(conv.state.phase, Idle)
        assert_valid_history(conv)


async def test_max_turn_cost_stops_a_priced_turn_after_the_response_that_reaches_it(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    per_response = cost(EXPENSIVE, MODEL)
    assert per_response is not None, "the harness's model must be priced"
    limit = 1.0
    expected = math.ceil(limit / per_response)
    assert 1 < expected < 10
    runaway(fake_anthropic, EXPENSIVE)
    async with phoenix_for(fake_anthropic, tmp_path, max_turn_cost=limit) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("Frobnicate everything.")

        assert len(fake_anthropic.requests) == expected
        assert isinstance(conv.state.phase, Idle)
        assert_valid_history(conv)
        (step,) = limit_steps(last_cycle(conv))
        assert step["limit"] == "max_turn_cost"
        assert "$1.00" in step["text"] and "%config Phoenix.max_turn_cost" in step["text"]
        spent = conv.spending()["turn"]["cost_usd"]
        assert spent >= limit > spent - per_response

        # A turn's limit is per turn: the next message may spend again.
        fake_anthropic.script(Turn([text("Stopping.")], usage=EXPENSIVE))
        await conv.run("Stop now.")
        assert notice_sent(fake_anthropic.requests[-1], "max_turn_cost")
        assert isinstance(conv.state.phase, Idle)


async def test_max_conversation_cost_stops_the_turn_and_refuses_more_until_raised(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    per_response = cost(EXPENSIVE, MODEL)
    assert per_response is not None
    limit = 1.0
    expected = math.ceil(limit / per_response)
    runaway(fake_anthropic, EXPENSIVE)
    settings: dict[str, Any] = {"max_conversation_cost": limit}
    async with phoenix_for(fake_anthropic, tmp_path, **settings) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("Frobnicate everything.")
        assert len(fake_anthropic.requests) == expected
        assert_valid_history(conv)
        (step,) = limit_steps(last_cycle(conv))
        assert step["limit"] == "max_conversation_cost"

        # Over its limit, the conversation takes no message; nothing is sent or stored.
        stored = len(conv.history())
        with pytest.raises(PhoenixError, match="max_conversation_cost"):
            await conv.run("Stop now.")
        assert len(fake_anthropic.requests) == expected
        assert len(conv.history()) == stored

        # Raised (as `%config` does), it goes on, and the model is told.
        phoenix.reconfigure(replace(phoenix.settings, max_conversation_cost=100.0))
        fake_anthropic.script(Turn([text("Stopping.")], usage=EXPENSIVE))
        await conv.run("Stop now.")
        assert notice_sent(fake_anthropic.requests[-1], "max_conversation_cost")
        assert isinstance(conv.state.phase, Idle)
        assert_valid_history(conv)


async def test_dollar_limits_are_off_for_a_model_without_a_price(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    runaway(fake_anthropic, EXPENSIVE)
    async with phoenix_for(
        fake_anthropic,
        tmp_path,
        model="local-model-without-a-price",
        # Described (no prices): a served model nobody describes gets a small stated
        # window, which this runaway's usage would fill before its rounds run out.
        models={"local-model-without-a-price": {"context_window": 1_000_000}},
        max_turn_cost=0.01,
        max_conversation_cost=0.01,
        max_turn_rounds=4,
    ) as phoenix:
        conv = phoenix.create(cwd=project_dir(tmp_path))
        await conv.run("Frobnicate everything.")
        assert len(fake_anthropic.requests) == 4  # the rounds stopped it, not the dollars
        (step,) = limit_steps(last_cycle(conv))
        assert step["limit"] == "max_turn_rounds"
        assert_valid_history(conv)
