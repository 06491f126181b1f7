"""The audit trail: one JSON object per line, appended, and the spend it adds up to.

Every request the gateway forwards is one line (time, user, server, conversation,
model, tokens, dollars, status), and every event a kernel reports (approvals,
denials, mode changes, MCP approvals, reverts) is one line with its `event`.
The file is the gateway's memory too: at start `Ledger.from_lines` adds up
today's spend from it, so a restarted gateway does not hand out a fresh budget.

`Ledger` is the budgets' arithmetic (pure: it takes the day and the amounts);
`AuditLog` is the file (the one I/O here, behind the `AuditSink` port).
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from phoenix_nb.policy import Budgets, Policy

__all__ = ["AuditLog", "AuditSink", "Ledger", "Spent"]


class AuditSink(Protocol):
    """Where audit lines go.

    `write` appends one JSON object as one line, whole (no two writers' lines
    interleave), and returns once the line is handed to the OS (it survives the
    gateway's crash, not the host's). `lines` reads back every line written so
    far, oldest first, skipping any that is not a JSON object (a torn last line).
    """

    def write(self, record: Mapping[str, Any]) -> None: ...

    def lines(self) -> Iterable[Mapping[str, Any]]: ...


class AuditLog:
    """An append-only JSONL file (created 0600: it names users and their spend)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._folder_made = False

    def write(self, record: Mapping[str, Any]) -> None:
        data = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        with self._lock:
            if not self._folder_made:  # once: a request's end waits for this write
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._folder_made = True
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)  # one write of a whole line with O_APPEND: no interleaving
            finally:
                os.close(fd)

    def lines(self) -> Iterable[Mapping[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out


@dataclass
class Spent:
    """Dollars and tokens spent."""

    dollars: float = 0.0
    tokens: int = 0

    def add(self, dollars: float | None, tokens: int) -> None:
        self.dollars += dollars or 0.0
        self.tokens += tokens


@dataclass
class Ledger:
    """Each user's spend per day (UTC) and per conversation, against the policy's budgets."""

    budgets: Budgets
    policy: Policy | None = None  # names the bound in a refusal
    _daily: dict[tuple[str, str], Spent] = field(default_factory=lambda: defaultdict(Spent))
    _conversations: dict[tuple[str, str], Spent] = field(default_factory=lambda: defaultdict(Spent))

    @classmethod
    def for_policy(cls, policy: Policy | None) -> Ledger:
        return cls(policy.budgets if policy is not None else Budgets(), policy)

    def add(
        self, user: str, day: str, conversation: str, dollars: float | None, tokens: int
    ) -> None:
        self._daily[(user, day)].add(dollars, tokens)
        if conversation:
            self._conversations[(user, conversation)].add(dollars, tokens)

    def today(self, user: str, day: str) -> Spent:
        return self._daily.get((user, day)) or Spent()

    def conversation(self, user: str, conversation: str) -> Spent:
        return self._conversations.get((user, conversation)) or Spent()

    def _where(self, key: str) -> str:
        return self.policy.where(key) if self.policy is not None else "the gateway"

    def refusal(self, user: str, day: str, conversation: str) -> str | None:
        """Why `user` may not send another request now, or None: a budget already spent."""
        b = self.budgets
        spent = self.today(user, day)
        if b.user_daily is not None and spent.dollars >= b.user_daily:
            return (
                f"phoenix gateway: {user} has spent ${spent.dollars:.2f} today, the daily "
                f"budget of ${b.user_daily:g} set by {self._where('budgets.user_daily')}; "
                "it renews at 00:00 UTC."
            )
        if b.user_daily_tokens is not None and spent.tokens >= b.user_daily_tokens:
            return (
                f"phoenix gateway: {user} has used {spent.tokens:,} tokens today, the daily "
                f"budget of {b.user_daily_tokens:,} set by "
                f"{self._where('budgets.user_daily_tokens')}; it renews at 00:00 UTC."
            )
        if conversation and b.conversation is not None:
            used = self.conversation(user, conversation)
            if used.dollars >= b.conversation:
                return (
                    f"phoenix gateway: conversation {conversation} has spent "
                    f"${used.dollars:.2f}, its budget of ${b.conversation:g} set by "
                    f"{self._where('budgets.conversation')}; start a new conversation."
                )
        return None

    def replay(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Add up the spend of audit lines written earlier (a restarted gateway)."""
        for r in records:
            if r.get("event") != "request" or not isinstance(r.get("user"), str):
                continue
            day = str(r.get("time", ""))[:10]
            tokens = sum(
                int(r.get(k) or 0)
                for k in ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens")
            )
            dollars = r.get("dollars")
            self.add(
                r["user"],
                day,
                str(r.get("conversation") or ""),
                float(dollars) if isinstance(dollars, int | float) else None,
                tokens,
            )
