"""What a conversation's finished sub-agents spent, read from the store.

A record's spend includes its sub-agents' (each keeps its own history in the
store), so whoever builds a record reads them: `Phoenix` in the kernel, with its
cache, and the child process that builds a whole record from the store
(`snapshot.StoredRecord`). One walk serves both, so the two never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from phoenix_nb.core.displays import SubAgentsDisplay
from phoenix_nb.core.stored import BadStoredMessage, MessageKind, StoredMessage
from phoenix_nb.core.values import Usage
from phoenix_nb.store import Store

__all__ = ["ChildSpend", "child_ids", "sub_agent_usage"]

log = logging.getLogger(__name__)

# One finished child's (created_at, usage) per response, and its own children's ids.
ChildSpend = tuple[tuple[tuple[str, Usage], ...], tuple[str, ...]]


def child_ids(history: Sequence[StoredMessage]) -> list[str]:
    """Conversation ids of the sub-agents whose results a history records."""
    ids = []
    for message in history:
        if message.kind is MessageKind.TOOL and message.display is not None:
            agents = SubAgentsDisplay.read(message.display).agents
            ids += [a.conversation_id for a in agents if a.conversation_id]
    return ids


def _readable(rows: Sequence[Mapping[str, Any]]) -> list[StoredMessage]:
    """The messages of a finished child's rows that this version can read: its spend is
    shown from what can be read (a row it cannot read stays in the store as it is)."""
    out = []
    for row in rows:
        try:
            out.append(StoredMessage.parse(row))
        except BadStoredMessage as exc:
            log.warning("phoenix: a sub-agent's spend skips %s", exc)
    return out


def sub_agent_usage(
    store: Store, ids: Sequence[str], known: MutableMapping[str, ChildSpend]
) -> tuple[tuple[str, Usage], ...]:
    """(created_at, usage) of every response of the sub-agents `ids`, nested ones
    included. Each child is read once into `known` (a finished child's history no
    longer changes, so the caller may keep it across calls)."""
    out: list[tuple[str, Usage]] = []
    pending = list(ids)
    seen: set[str] = set()
    while pending:
        child = pending.pop()
        if child in seen:
            continue
        seen.add(child)
        if child not in known:
            try:
                messages = _readable(store.messages(child))
            except KeyError:  # an unknown id in a hand-edited history
                messages = []
            usages = tuple(
                (m.created_at, m.usage)
                for m in messages
                if m.kind is MessageKind.AGENT and m.usage is not None
            )
            known[child] = (usages, tuple(child_ids(messages)))
        usages, grandchildren = known[child]
        out.extend(usages)
        pending.extend(grandchildren)
    return tuple(out)
