"""A fake Anthropic Messages API for tests and the offline demo model."""

from phoenix_nb.testing.fake_anthropic import ConnectionEvent, FakeAnthropic
from phoenix_nb.testing.script import (
    FakeRequest,
    Fault,
    Turn,
    text,
    thinking,
    tool_use,
)

__all__ = [
    "ConnectionEvent",
    "FakeAnthropic",
    "FakeRequest",
    "Fault",
    "Turn",
    "text",
    "thinking",
    "tool_use",
]
