"""What the conversation cost, and where its answers come from, for every renderer.

The record's `usage` (core.cycles.spending) holds tokens, dollars and the
cache-hit share for this turn and for the conversation. One wording here serves
the HTML, Markdown and plain fallbacks, the meter, `%phoenix status` and
`%phoenix history`. A model without a known price shows tokens only and says
"price unknown": a price is never invented, and never shown as $0.00. Citations
become numbered footnotes; only http(s) links are made clickable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from phoenix_nb.core.prices import format_usd
from phoenix_nb.notebook._render import view as v


def _tokens(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1_000:
        return f"{n / 1_000:.1f}k"
    return f"{n:.0f}"


class Spending:
    """The `usage` part of a record, read tolerantly."""

    def __init__(self, usage: Mapping[str, Any] | None) -> None:
        usage = usage or {}
        self.priced = v.flag(usage, "priced")
        self.turn = v.mapping(usage, "turn")
        self.total = v.mapping(usage, "total")
        self.known = bool(v.number(self.total, "responses"))

    @staticmethod
    def _part(part: Mapping[str, Any], priced: bool) -> str:
        cost = v.number(part, "cost_usd")
        if priced and cost is not None:
            return format_usd(cost)
        prompt = sum(
            v.number(part, k) or 0
            for k in ("input_tokens", "cache_write_tokens", "cache_read_tokens")
        )
        out = v.number(part, "output_tokens") or 0
        return f"{_tokens(prompt)} in / {_tokens(out)} out tokens"

    def share(self, part: Mapping[str, Any]) -> str:
        value = v.number(part, "cache_hit_share")
        return "" if value is None else f"{value * 100:.0f}% cache hits"

    @property
    def line(self) -> str:
        """'this turn $0.02 · conversation $0.31 · 87% cache hits' (or tokens only)."""
        if not self.known:
            return ""
        parts = []
        if v.number(self.turn, "responses"):
            parts.append("this turn " + self._part(self.turn, self.priced))
        parts.append("conversation " + self._part(self.total, self.priced))
        share = self.share(self.total)
        if share:
            parts.append(share)
        if not self.priced:
            parts.append("price unknown")
        return " · ".join(parts)


def citations(item: Mapping[str, Any] | None) -> list[tuple[int, str, str]]:
    """(number, url or "", title) for each citation of an assistant item."""
    out = []
    for n, cite in enumerate(v.items(item, "citations"), start=1):
        url = v.text(cite, "url")
        if url.lower().startswith(("https://", "http://")):
            # No quote, bracket, space or backtick survives to end a link early.
            url = quote(url, safe=":/?#[]@!$&()*+,;=%-._~")
        else:
            url = ""
        title = v.text(cite, "title") or url or v.one_line(v.text(cite, "cited_text"), 60)
        out.append((n, url, title or f"source {n}"))
    return out
