"""The model and price tables are values: two `Phoenix` objects in one process, each
with its own `c.Phoenix.models`, each see their own window, price and missing features
(they were process-global, and the second Phoenix overwrote the first's). Real SDK
over loopback to the fake Messages API, real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, Turn, text

from .harness import phoenix_for, project_dir

pytestmark = pytest.mark.timeout(120)

LOCAL = "house-model-7b"  # a name no registry knows
USAGE = Usage(input_tokens=10_000, output_tokens=10_000)


def _models(window: int, price: float, caching: bool) -> dict[str, object]:
    return {
        LOCAL: {
            "context_window": window,
            "max_output": 4_000,
            "prices": {"input": price, "output": price},
            "supports": {"caching": caching},
        }
    }


async def test_two_phoenix_objects_keep_their_own_models_tables(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.add_rule(lambda r: True, Turn([text("ok")], usage=USAGE))
    first_models, second_models = _models(50_000, 1.0, True), _models(90_000, 3.0, False)
    async with (
        phoenix_for(fake_anthropic, tmp_path / "a", model=LOCAL, models=first_models) as one,
        phoenix_for(fake_anthropic, tmp_path / "b", model=LOCAL, models=second_models) as two,
    ):
        a = one.create(cwd=project_dir(tmp_path))
        b = two.create(cwd=project_dir(tmp_path))
        assert (a.runtime.context.window, b.runtime.context.window) == (50_000, 90_000)
        await a.run("hello")
        await b.run("hello")
        cost_a = a.payload()["usage"]["total"]["cost_usd"]
        cost_b = b.payload()["usage"]["total"]["cost_usd"]
        assert (cost_a, cost_b) == (pytest.approx(0.02), pytest.approx(0.06))
        assert one.lacks(LOCAL) == () and two.lacks(LOCAL) == ("caching",)
        sent = [("cache_control" in str(r.body)) for r in fake_anthropic.requests]
        assert sent == [True, False], "each Phoenix's provider reads its own supports"
        assert a.payload()["conversation"]["lacks"] == []
        assert b.payload()["conversation"]["lacks"] == ["caching"]
