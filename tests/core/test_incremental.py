"""The incremental record and request equal the whole-history ones, however they are fed.

A live conversation feeds its projection and its request history a few stored
messages at a time and reads them in between (`Projection.record(since_cycle=…)`,
`RequestHistory.messages`). For random histories (calls answered, unanswered,
answered twice or out of order, foreign tools, notes, errors, continuations) cut
into random chunks, every read must equal what a fresh walk of the same prefix
gives, and a record since cycle k must be the whole record's cycles from k on.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.cycles import Projection, RecordHeader, project
from phoenix_nb.core.requests import RequestHistory, request_messages
from phoenix_nb.core.states import (
    AwaitingModeApproval,
    ConvState,
    Idle,
    LlmRequesting,
    ToolExecuting,
)
from phoenix_nb.core.values import TextBlock, ToolUseBlock, Usage

from .strategies import PROPERTY

MODEL = "claude-sonnet-4-5"
TOOLS = ("bash", "patch", "think")
HEADER = RecordHeader("c-1", "slug", MODEL, "/work", True, 200_000)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Stored messages in any order a store could hold (damaged ones included)."""
    out: list[dict[str, Any]] = []
    calls: list[str] = []
    for n in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["user", "agent", "agent", "tool", "tool", "system", "error"]))
        record: dict[str, Any] = {"message_type": kind, "sequence_id": n + 1}
        record["created_at"] = f"2026-11-24T00:00:{n:02d}Z"
        if kind == "user":
            record["content"] = {"text": draw(st.sampled_from(["hi", "", "go on"])), "images": []}
        elif kind == "agent":
            blocks: list[Any] = []
            for _ in range(draw(st.integers(0, 3))):
                if draw(st.booleans()):
                    blocks.append(TextBlock(draw(st.sampled_from(["ok", " ", "done"]))))
                else:
                    call = f"toolu_{len(calls)}"
                    calls.append(call)
                    name = draw(st.sampled_from([*TOOLS, "frobnicate"]))
                    blocks.append(ToolUseBlock(call, name, {"command": "ls"}))
            stop = draw(st.sampled_from(["end_turn", "tool_use", "pause_turn"]))
            record["content"] = {"blocks": to_json(tuple(blocks)), "stop_reason": stop}
            usage = Usage(input_tokens=draw(st.integers(0, 5000)), output_tokens=10)
            record["usage_data"] = to_json(usage)
        elif kind == "tool":
            target = draw(st.sampled_from(calls)) if calls else "toolu_none"
            record["content"] = {
                "tool_use_id": target,
                "content": "out",
                "is_error": draw(st.booleans()),
                "images": [],
            }
        elif kind == "system":
            record["content"] = {"text": draw(st.sampled_from(["note", ""]))}
            if draw(st.booleans()):
                record["content"]["limit"] = "max_turn_rounds"
        else:
            record["content"] = {"text": "failed", "kind": "unknown"}
        out.append(record)
    return out


STATES = st.sampled_from(
    [
        ConvState(Idle()),
        ConvState(LlmRequesting(1)),
        ConvState(ToolExecuting(ToolUseBlock("toolu_x", "bash", {}))),
        ConvState(AwaitingModeApproval("write", "toolu_y")),
    ]
)


def cuts(draw: st.DrawFn, size: int) -> list[int]:
    points = draw(st.lists(st.integers(0, size), max_size=6))
    return sorted({0, size, *points})


@PROPERTY
@given(st.data(), histories(), STATES)
def test_records_fed_in_chunks_equal_whole_walks(
    data: st.DataObject, history: list[dict[str, Any]], state: ConvState
) -> None:
    projection = Projection(MODEL)
    ends = cuts(data.draw, len(history))
    for start, end in itertools.pairwise(ends):
        projection.extend(history[start:end])
        whole = project(history[:end], state, HEADER)
        assert projection.record(state, HEADER) == whole
        since = data.draw(st.integers(0, len(whole["cycles"]) + 1))
        part = projection.record(state, HEADER, since_cycle=since)
        assert part["cycles"] == whole["cycles"][since:]
        assert {k: v for k, v in part.items() if k != "cycles"} == {
            k: v for k, v in whole.items() if k != "cycles"
        }
    # a record handed out never changes when more messages arrive
    first = projection.record(state, HEADER)
    frozen = json.dumps(first)
    projection.extend(history)
    assert json.dumps(first) == frozen


@PROPERTY
@given(st.data(), histories(), st.booleans())
def test_requests_fed_in_chunks_equal_whole_conversions(
    data: st.DataObject, history: list[dict[str, Any]], continuation: bool
) -> None:
    requests = RequestHistory()
    prompt = "Summarise." if continuation else None
    handed_out: list[tuple[list[dict[str, Any]], str]] = []
    ends = cuts(data.draw, len(history))
    for start, end in itertools.pairwise(ends):
        requests.extend(history[start:end])
        messages = requests.messages(TOOLS, prompt)
        assert messages == request_messages(history[:end], TOOLS, prompt)
        handed_out.append((messages, json.dumps(messages)))
    # later requests never change an earlier one (their blocks are shared)
    for messages, frozen in handed_out:
        assert json.dumps(messages) == frozen
