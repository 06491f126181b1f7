"""Tagged JSON round trip of core values (states are persisted as state_data)."""

from __future__ import annotations

import json

import pytest

from phoenix_nb.core.codec import CodecError, from_json, to_json
from phoenix_nb.core.displays import BashDisplay
from phoenix_nb.core.states import ConvState, ToolExecuting, from_persisted, persisted_fields
from phoenix_nb.core.values import Mode, ToolResult, ToolUseBlock, Usage


def test_state_round_trips_through_json_text() -> None:
    call = ToolUseBlock("t1", "bash", {"type": "not-a-tag", "nested": [1, {"a": None}]})
    state = ConvState(
        ToolExecuting(call, (call,), (ToolResult("t0", "ok", display=BashDisplay("true", 0)),)),
        Mode.UNRESTRICTED,
        Usage(1, 2, 3, 4),
    )
    assert from_json(json.loads(json.dumps(to_json(state)))) == state
    fields = persisted_fields(state)
    assert fields["state"] == "tool_executing" and fields["mode"] == "unrestricted"
    assert from_persisted(json.loads(json.dumps(fields))) == state


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "Nope"},
        {"no": "tag"},
        {"type": "Usage", "bogus": 1},
        {"type": "Mode", "value": "x"},
    ],
)
def test_bad_data_is_a_clear_error(bad: object) -> None:
    with pytest.raises(CodecError):
        from_json(bad)
