"""One budget per turn, sub-agents included — through a real kernel, counted by the server.

The model spawns three sub-agents; each of them (and the parent, if it is
asked again) never stops calling a tool that does not exist. The fake server
counts every request, parent's and sub-agents' alike, and reports a fixed
usage per response, so the turn's dollars are known exactly.

* rounds: with ``max_turn_rounds = 2`` the whole turn makes exactly 2 requests
  (the parent's spawn, one sub-agent request), stays under ``max_turn_cost``,
  and the parent's record says the sub-agents were stopped by the budget;
* dollars: with a dollar limit that two responses reach, the sub-agents stop
  after the response that reached it (one request in flight at a time), as the
  parent's own rounds do; no request is sent after it;
* a second spawn within one turn draws from what the first left (the count is
  not reset), and a new message starts a new turn with the whole budget again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.prices import cost
from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text, tool_use
from tests.notebook.kernel_harness import MODEL, Kernel, state_name

USAGE = Usage(input_tokens=6_000, output_tokens=100)  # $0.0195 at Sonnet's list price
PRICE = cost(USAGE, MODEL)
TASKS = [{"task": f"Frobnicate part {n}."} for n in (1, 2, 3)]


def _is_parent(request: FakeRequest) -> bool:
    """A sub-agent's request offers submit_result; its parent's does not."""
    return "submit_result" not in {t.get("name") for t in request.body.get("tools", [])}


def _runaway(_request: FakeRequest) -> Turn:
    return Turn([text("Once more."), tool_use("frobnicate", {"again": True})], usage=USAGE)


def _spawn() -> Turn:
    return Turn([tool_use("spawn_agents", {"tasks": TASKS})], usage=USAGE)


def _cycle(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record["cycles"][-1]


def _run(kern: Kernel, fake: FakeAnthropic, *config: str, message: str) -> Any:
    for line in config:
        kern.ok(line)
    fake.add_rule(_is_parent, lambda r: _spawn() if len(fake.requests) <= 1 else _runaway(r))
    fake.add_rule(lambda r: True, _runaway)
    cell = kern.run(f"%%phoenix --new\n{message}", timeout=180)
    assert cell.status == "ok", (cell.error(), cell.text())
    return cell


def _reset(kern: Kernel) -> None:
    kern.ok("%config Phoenix.max_turn_rounds = 100")
    kern.ok("%config Phoenix.max_turn_cost = None")


def test_three_runaway_sub_agents_stay_inside_the_rounds_of_their_turn(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    assert PRICE is not None
    try:
        cell = _run(
            kern,
            fake,
            "%config Phoenix.max_turn_rounds = 2",
            "%config Phoenix.max_turn_cost = 0.05",
            message="Split the work in three.",
        )
        assert len(fake.requests) == 2, [_is_parent(r) for r in fake.requests]
        assert sum(_is_parent(r) for r in fake.requests) == 1
        record = cell.records()[-1]
        assert state_name(record) == "idle"
        assert record["usage"]["turn"]["cost_usd"] < 0.05
        cycle = _cycle(record)
        assert cycle["stop"]["limit"] == "max_turn_rounds"
        shown = json.dumps(record)
        assert "by its sub-agents" in shown and "Stopped by the turn's budget" in shown
        notes = [s for s in cycle["steps"] if s["kind"] == "system" and s.get("limit")]
        assert "after 2 model responses (1 of them by its sub-agents" in notes[-1]["text"]
    finally:
        _reset(kern)


def test_sub_agents_stop_after_the_response_that_reaches_the_turns_dollars(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    assert PRICE is not None
    limit = round(PRICE * 2.5, 4)  # the parent's response, then two sub-agent responses
    try:
        cell = _run(
            kern,
            fake,
            f"%config Phoenix.max_turn_cost = {limit}",
            message="Split the work in three.",
        )
        # 1 parent + 2 sub-agent responses reach the limit; nothing is sent after that
        assert len(fake.requests) == 3, len(fake.requests)
        record = cell.records()[-1]
        spent = record["usage"]["turn"]["cost_usd"]
        assert limit <= spent <= limit + PRICE
        cycle = _cycle(record)
        assert cycle["stop"]["limit"] == "max_turn_cost"
        assert "max_turn_cost counts the sub-agents' spend too" in json.dumps(record)
    finally:
        _reset(kern)


def test_a_second_spawn_keeps_the_count_and_a_new_message_starts_a_new_turn(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    done = Turn([tool_use("submit_result", {"result": "part done", "success": True})], usage=USAGE)
    try:
        kern.ok("%config Phoenix.max_turn_rounds = 6")
        spawns = iter([_spawn(), _spawn()])
        fake.add_rule(_is_parent, lambda r: next(spawns, None) or _runaway(r))
        fake.add_rule(lambda r: True, done)
        cell = kern.run("%%phoenix --name twice\nTwo rounds of helpers.", timeout=180)
        assert cell.status == "ok", (cell.error(), cell.text())
        # spawn (1) + three sub-agents (4) + spawn again (5) + one sub-agent (6): the
        # second spawn's sub-agents draw from what the first left, not a fresh count
        parents = [_is_parent(r) for r in fake.requests]
        assert len(parents) == 6 and sum(parents) == 2, parents
        assert _cycle(cell.records()[-1])["stop"]["limit"] == "max_turn_rounds"
        fake.clear()
        fake.add_rule(lambda r: True, lambda r: Turn([text("Fine.")], usage=USAGE))
        again = kern.run("%%phoenix --name twice\nAnd now?", timeout=120)
        assert again.status == "ok", again.error()
        assert len(fake.requests) == 1, again.text()[:2000]
        assert state_name(again.records()[-1]) == "idle"
    finally:
        _reset(kern)
