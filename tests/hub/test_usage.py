"""The usage the gateway reads from the bytes it forwards, however they are cut."""

from __future__ import annotations

import json
import random

import pytest

from phoenix_nb.hub import UsageMeter

SEED = 4040

ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":1000,'
    b'"cache_read_input_tokens":4000,"cache_creation_input_tokens":0,"output_tokens":1}}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"usage"}}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","usage":{"output_tokens":250}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_a_messages_stream_cut_anywhere_gives_the_same_usage() -> None:
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(50):
        meter = UsageMeter("claude-sonnet-4-5", streamed=True)
        cuts = sorted(rng.sample(range(1, len(ANTHROPIC_STREAM)), 8))
        for start, end in zip([0, *cuts], [*cuts, len(ANTHROPIC_STREAM)], strict=True):
            meter.feed(ANTHROPIC_STREAM[start:end])
        used = meter.result()
        assert (used.input_tokens, used.output_tokens, used.cached_tokens) == (1000, 250, 4000)
        # $3/M input, $15/M output, $0.30/M cache reads
        assert used.dollars == pytest.approx(0.003 + 0.00375 + 0.0012)


def _bedrock_stream(pad: int) -> bytes:
    """The same events as Bedrock sends them: one `chunk` frame each (botocore's own
    decoder reads these frames in the provider tests), then an exception frame. The
    message_delta has `pad` characters before its usage: each frame is encoded alone,
    so pads 0, 1, 2 put "usage" at each of the three base64 alignments."""
    from phoenix_nb.testing.fake_bedrock import chunk_frame, exception_frame

    events = [block.split(b"data: ", 1)[1] for block in ANTHROPIC_STREAM.split(b"\n\n") if block]
    delta = json.dumps({"type": "message_delta", "p": "x" * pad, "usage": {"output_tokens": 250}})
    frames = [chunk_frame(event) for event in events[:2]]  # message_start, a text delta
    frames += [chunk_frame(delta.encode()), chunk_frame(events[-1])]
    return b"".join(frames) + exception_frame("throttlingException", "usage: slow down")


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_bedrocks_event_stream_cut_anywhere_gives_the_same_usage(pad: int) -> None:
    stream = _bedrock_stream(pad)
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(50):
        meter = UsageMeter("claude-sonnet-4-5", streamed=True, framing="eventstream")
        cuts = sorted(rng.sample(range(1, len(stream)), 12))
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            meter.feed(stream[start:end])
        used = meter.result()
        assert (used.input_tokens, used.output_tokens, used.cached_tokens) == (1000, 250, 4000)
    one_by_one = UsageMeter("claude-sonnet-4-5", streamed=True, framing="eventstream")
    for i in range(len(stream)):
        one_by_one.feed(stream[i : i + 1])
    assert one_by_one.result().output_tokens == 250


def test_a_whole_json_answer_and_an_unpriced_model() -> None:
    meter = UsageMeter("someone-elses-model", streamed=False)
    body = json.dumps({"usage": {"input_tokens": 10, "output_tokens": 5}}).encode()
    meter.feed(body[:7])
    meter.feed(body[7:])
    used = meter.result()
    assert (used.input_tokens, used.output_tokens, used.tokens) == (10, 5, 15)
    assert used.dollars is None, "no price is known: the token budget applies"


def test_the_ledger_refuses_by_tokens_and_by_conversation_and_renews_each_day() -> None:
    from phoenix_nb.hub import Ledger
    from phoenix_nb.policy import parse_policy

    policy = parse_policy(
        "[budgets]\nconversation = 1.0\nuser_daily_tokens = 1000\n", "/etc/phoenix/policy.toml"
    )
    ledger = Ledger.for_policy(policy)
    ledger.add("ada", "2026-11-29", "c1", 1.2, 10)
    refusal = ledger.refusal("ada", "2026-11-29", "c1")
    assert refusal is not None and "conversation c1 has spent $1.20" in refusal
    assert "line 2 ([budgets] conversation)" in refusal
    assert ledger.refusal("ada", "2026-11-29", "c2") is None, "another conversation goes on"
    ledger.add("ada", "2026-11-29", "c2", None, 990)
    refusal = ledger.refusal("ada", "2026-11-29", "c2")
    assert refusal is not None and "1,000 tokens today" in refusal
    assert ledger.refusal("ada", "2026-11-30", "c3") is None, "a new day"
    assert ledger.refusal("bob", "2026-11-29", "c2") is None, "another user"
