"""The `fake_anthropic` fixture is registered for all tests in tests/conftest.py; `fake`
is the Chat Completions fake the openai-provider tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phoenix_nb.testing.fake_openai import FakeOpenAI


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key="sk-test") as server:
        yield server
