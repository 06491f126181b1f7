"""Model limits belong to the server a conversation is on (DESIGN decision 22), not to
the current setting: two Messages API servers serve a model of the same name with
different limits; a conversation started on each keeps seeing its own server's
figures — in its context window and in the `max_tokens` its server receives — after
the setting moved to the other server, and again from the store in a new `Phoenix`.

Before, the cache was keyed by the current setting: the first conversation's next
turn read the second server's fresh figures and asked its own server for the other's
output limit. Real SDK over loopback to two fake servers, real store."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from phoenix_nb.llm.model_limits import CACHE_FILE
from phoenix_nb.testing import FakeAnthropic, Turn, text

from .harness import phoenix_for, project_dir

pytestmark = pytest.mark.timeout(120)

LOCAL = "house-model-7b"  # the same name on both servers


async def test_same_model_name_on_two_servers_each_conversation_sees_its_own_limits(
    tmp_path: Path,
) -> None:
    with FakeAnthropic() as first, FakeAnthropic() as second:
        first.add_model(LOCAL, max_input_tokens=50_000, max_tokens=4_000)
        second.add_model(LOCAL, max_input_tokens=90_000, max_tokens=8_000)
        for server in (first, second):
            server.add_rule(lambda r: True, Turn([text("ok")]))
        async with phoenix_for(first, tmp_path, model=LOCAL) as phoenix:
            a = phoenix.create(cwd=project_dir(tmp_path))
            await a.run("hello")
            assert a.runtime.context.window == 50_000

            phoenix.reconfigure(replace(phoenix.settings, base_url=second.base_url))
            b = phoenix.create(cwd=project_dir(tmp_path))
            await b.run("hello")
            assert b.runtime.context.window == 90_000

            await a.run("and again, on the first server")
            assert a.runtime.context.window == 50_000, "the first server's own figures"
            assert b.runtime.context.window == 90_000
            assert [r.body["max_tokens"] for r in first.requests] == [4_000, 4_000]
            assert [r.body["max_tokens"] for r in second.requests] == [8_000]
            assert first.model_requests == [LOCAL] and second.model_requests == [LOCAL]
            a_slug, b_slug = a.slug, b.slug

        cached = json.loads((tmp_path / "store" / CACHE_FILE).read_text(encoding="utf-8"))
        assert cached[f"anthropic {first.base_url}|{LOCAL}"]["max_input_tokens"] == 50_000
        assert cached[f"anthropic {second.base_url}|{LOCAL}"]["max_input_tokens"] == 90_000

        # A new Phoenix set to the second server reads each one's figures from the store.
        async with phoenix_for(second, tmp_path, model=LOCAL) as again:
            assert again.get(a_slug).runtime.context.window == 50_000
            assert again.get(b_slug).runtime.context.window == 90_000
            assert again.stored_record(a_slug).header.context_window == 50_000
        assert first.model_requests == [LOCAL] and second.model_requests == [LOCAL]
