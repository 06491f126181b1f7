"""Fixtures shared by every test directory, and the randomness policy.

`pytest_plugins` may only be declared here (pytest refuses it in nested
conftest files): the fake Messages API fixture comes from our own package.

Randomness: the README's test command (and so CI) is deterministic. Hypothesis
runs derandomized (a fixed seed, printed in the header) with no example
database, and every test that draws its own random numbers takes its seed from
`phoenix_seed()`, printed with any failure. `tests/explore.sh` sets
PHOENIX_EXPLORE=1: fresh random seeds and many more examples, to find bugs that
then become explicit `@example`s or deterministic tests.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.seeds import EXPLORING, phoenix_seed

pytest_plugins = ["phoenix_nb.testing.pytest_plugin"]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    derandomize=False,
    print_blob=True,
    deadline=None,
    max_examples=int(os.environ.get("PHOENIX_EXPLORE_EXAMPLES", "1000")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("explore" if EXPLORING else "ci")


def _randomness() -> str:
    mode = "explore (random seeds)" if EXPLORING else "deterministic (derandomized hypothesis)"
    return f"phoenix randomness: {mode}; PHOENIX_SEED={phoenix_seed()}"


def pytest_report_header() -> str:
    return _randomness()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Exploration runs thousands of examples: a test's own time limit (a marker, which
    # pytest-timeout prefers to the command line) would cut it short mid-example and
    # read as a hang.
    if EXPLORING:
        for item in items:
            item.add_marker(pytest.mark.timeout(0), append=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # The header is hidden under -q (the README's command): say it again at the end.
    terminalreporter.write_line(_randomness())
