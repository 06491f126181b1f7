"""A Phoenix manager wired to the fake Messages API, for runtime tests.

Everything is real except the model: the official SDK over loopback HTTP to
`FakeAnthropic`, real tools in real subprocesses, the real Landlock sandbox,
the real durable store in a temporary folder.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from phoenix_nb.core.messages import to_api_messages, validate_chain
from phoenix_nb.runtime.manager import Conversation, Phoenix
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.testing import FakeAnthropic
from phoenix_nb.tools.kernel_port import KernelPort

MODEL = "claude-sonnet-5-5"


@asynccontextmanager
async def phoenix_for(
    fake: FakeAnthropic, root: Path, *, kernel: KernelPort | None = None, **settings: Any
) -> AsyncIterator[Phoenix]:
    options: dict[str, Any] = {
        "home": root / "store",
        "model": MODEL,
        "base_url": fake.base_url,
        "api_key": "test-key",
        "retry_delay_scale": 0.01,
    }
    options.update(settings)
    phoenix = Phoenix(Settings(**options), kernel=kernel)
    try:
        yield phoenix
    finally:
        await phoenix.aclose()


def project_dir(root: Path) -> Path:
    proj = root / "project"
    proj.mkdir(exist_ok=True)
    (proj / "app.py").write_text("def add(a, b):\n    return a - b\n")
    return proj


def assert_valid_history(conv: Conversation) -> None:
    """Every tool_use answered exactly once, and the API form has alternating roles."""
    history = conv.history()
    assert validate_chain(history) == [], validate_chain(history)
    api = to_api_messages(history)
    roles = [m["role"] for m in api]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


def kinds(conv: Conversation) -> list[str]:
    return [m["message_type"] for m in conv.history()]


def tool_results(conv: Conversation) -> list[dict[str, Any]]:
    return [m["content"] for m in conv.history() if m["message_type"] == "tool"]


def last_user_blocks(request: Any) -> Sequence[Any]:
    content = request.body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
