"""A parent and its sub-agent on a store that fills while the sub-agent works.

Run by tests/runtime/test_subagent_store_faults.py inside a private mount
namespace where ``ROOT/store`` (PHOENIX_HOME) is a small tmpfs:
``python full_store_child.py ROOT FREE [long]``. The fake model fills that tmpfs
when the sub-agent asks for its first reply, leaving FREE bytes, and answers with
a reply too big for them, so the sub-agent's save fails. With ``long`` the
parent works in a folder whose path is 4,000 bytes long: its record (which holds
its cwd) no longer fits in the slack of a page a file already holds (tmpfs
counts pages), so with no room left its first save after the report fails for
sure, instead of by the luck of where its journals' last pages end. Prints one JSON object:
what the parent's model was told, what the parent's watchers were shown, and the
histories and states that were saved.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from phoenix_nb.core.messages import to_api_messages, validate_chain
from phoenix_nb.core.states import from_persisted
from phoenix_nb.runtime import updates as up
from phoenix_nb.runtime.settings import SubAgentLimits
from phoenix_nb.testing import FakeAnthropic, FakeRequest, Turn, text
from tests.runtime.harness import phoenix_for, project_dir
from tests.runtime.test_subagents import is_child, is_parent, result_text, scripted, spawn
from tests.small_disk import fill

TASK = "survey the repository"
BIG_REPLY = "y" * 400_000  # far more than the room left


def shown(update: up.Update) -> list[str]:
    """The lines a watcher of the parent (the cell) shows for this update."""
    data = update.data
    if isinstance(data, up.NoticeText):
        return [data.text]
    if isinstance(data, up.MessageSaved):
        display = data.message.display or {}
        return [str(a.get("result", "")) for a in display.get("agents", [])]
    return []


def valid(history: list[dict[str, Any]]) -> bool:
    roles = [m["role"] for m in to_api_messages(history)]
    return validate_chain(history) == [] and all(a != b for a, b in itertools.pairwise(roles))


def deep_project(root: Path) -> Path:
    """A project folder whose absolute path is 4,000 bytes long (PATH_MAX is 4,096)."""
    path = project_dir(root)
    while len(str(path)) < 4000:
        path = path / ("d" * min(200, 4000 - len(str(path)) - 1))
    path.mkdir(parents=True)
    return path


async def main(root: Path, free: int, long: bool) -> dict[str, Any]:
    store = root / "store"

    def child_reply(req: FakeRequest) -> Turn:
        fill(store, free)
        return Turn([text(BIG_REPLY)])

    out: dict[str, Any] = {}
    with FakeAnthropic() as fake:
        fake.add_rule(is_parent, scripted(spawn([TASK]), Turn([text("Noted.")])))
        fake.add_rule(is_child(TASK), child_reply)
        # A child timeout far beyond the caller's wait: only an early report can end it.
        async with phoenix_for(fake, root, sub_agents=SubAgentLimits(timeout=3600)) as phoenix:
            parent = phoenix.create(cwd=deep_project(root) if long else project_dir(root))
            sub = parent.subscribe()
            await parent.run("look around")
            out["shown"] = [line for u in sub.pending() for line in shown(u)]
            sub.close()
            out["results"] = [
                result_text(r.tool_results[0])
                for r in fake.requests
                if is_parent(r) and r.tool_results
            ]
            out["parent_state"] = parent.state.name
            saved = phoenix.store.messages(parent.id)
            out["parent_valid"] = valid(saved)
            out["saved_results"] = [
                m["content"]["content"] for m in saved if m["message_type"] == "tool"
            ]
            [child] = phoenix.store.children(parent.id)
            out["child_state"] = from_persisted(child).phase.__class__.__name__
            out["child_error"] = getattr(from_persisted(child).phase, "error", "")
            out["child_valid"] = valid(phoenix.store.messages(child["id"]))
            os.remove(store / "filler")
            await parent.run("and now?")
            out["parent_valid_after"] = valid(phoenix.store.messages(parent.id))
            out["parent_state_after"] = parent.state.name
    return out


if __name__ == "__main__":
    long = sys.argv[3:] == ["long"]
    result = asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), long))
    print(json.dumps(result))
