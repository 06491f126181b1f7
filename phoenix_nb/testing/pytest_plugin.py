"""The `fake_anthropic` fixture: a started FakeAnthropic, stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phoenix_nb.demo.server import FakeAnthropic


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A fresh fake Messages API on a free 127.0.0.1 port (works in sync and async tests)."""
    with FakeAnthropic() as fake:
        yield fake
