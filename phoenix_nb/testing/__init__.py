"""The fake Anthropic Messages API, for tests only.

It lives in `phoenix_nb.demo`, which serves the offline demo model through it;
nothing in the product imports this package.
"""

from phoenix_nb.demo.server import ConnectionEvent, FakeAnthropic
from phoenix_nb.demo.turns import (
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
