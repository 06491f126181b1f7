"""The real-kernel fixtures every `tests/notebook/test_kernel_*`-style module shares.

Per module: `fake` (one FakeAnthropic server) and `kernel` (one real kernel with
`%load_ext phoenix_nb`, since start-up costs seconds); per test: `kern`, the shared
kernel with a fresh script on the fake and any cell a failed test left running
interrupted afterwards. A module with special needs overrides one small fixture
locally: `kernel_env` (extra environment, e.g. JPY_SESSION_NAME), `kernel_setup`
(cells run once after `%load_ext`), or `kernel` itself (e.g. one kernel per test).
`notebook_kernel` is a fresh kernel per test started as Jupyter Server starts one for a
notebook (JPY_SESSION_NAME set), for tests that restart it or count on an empty store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from phoenix_nb.testing import FakeAnthropic
from tests.notebook.kernel_harness import Kernel, loaded_kernel, settle


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def kernel_env() -> Mapping[str, str]:
    """Extra environment for the module's kernel (none by default)."""
    return {}


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    """Cells the module's kernel runs once after `%load_ext` (none by default)."""
    return lambda kernel: None


@pytest.fixture(scope="module")
def kernel(
    fake: FakeAnthropic,
    tmp_path_factory: pytest.TempPathFactory,
    kernel_env: Mapping[str, str],
    kernel_setup: Callable[[Kernel], None],
) -> Iterator[Kernel]:
    with loaded_kernel(tmp_path_factory.mktemp("kernel"), fake.base_url, extra_env=kernel_env) as k:
        kernel_setup(k)
        yield k


@pytest.fixture
def kern(kernel: Kernel, fake: FakeAnthropic) -> Iterator[Kernel]:
    """The shared kernel with a fresh script on the fake; a cell a failed test left running
    is interrupted so the next test starts on an idle kernel."""
    fake.clear()
    yield kernel
    settle(kernel)


@pytest.fixture
def notebook_kernel(fake: FakeAnthropic, tmp_path: Path) -> Iterator[Kernel]:
    """A kernel started the way Jupyter Server starts one for `work/analysis.ipynb`."""
    fake.clear()
    env = {"JPY_SESSION_NAME": "work/analysis.ipynb"}
    with loaded_kernel(tmp_path, fake.base_url, extra_env=env) as k:
        yield k
