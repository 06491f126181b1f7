"""The kernel's side of a JupyterHub's phoenix gateway: events for its audit trail,
and the user's spend today for `%phoenix status`.

The model requests themselves need nothing here: with a policy naming a gateway,
`Settings.with_policy` points the provider at it with the user's Hub token as
the credential. What the user decides (approvals, denials, mode changes,
reverts) is reported to the gateway's `/audit`, which writes it under the
token's user. Reporting never holds up the user: it runs on a worker thread
with a short timeout, and a gateway that does not answer loses the event (the
gateway's own request lines are the trail that must hold; these are context).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["GatewayLink"]

log = logging.getLogger(__name__)
_TIMEOUT = 5.0


class GatewayLink:
    """Reports to the gateway at `url` as the user whose Hub `token` this is."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self._token = token or ""

    def __repr__(self) -> str:  # never the token
        return f"GatewayLink({self.url!r})"

    def _request(self, path: str, body: bytes | None = None) -> Any:
        headers = {"authorization": f"token {self._token}"}
        if body is not None:
            headers["content-type"] = "application/json"
        req = urllib.request.Request(
            self.url + path, data=body, headers=headers, method="POST" if body else "GET"
        )
        with urllib.request.urlopen(req, timeout=_TIMEOUT) as response:
            return json.loads(response.read())

    def report_now(self, event: Mapping[str, Any]) -> bool:
        """Send one event (its `event` names the kind); True once the gateway recorded it."""
        try:
            answer = self._request("/audit", json.dumps(dict(event)).encode())
        except (OSError, ValueError) as exc:
            log.warning("phoenix gateway %s did not record %s: %s", self.url, event, exc)
            return False
        return bool(isinstance(answer, dict) and answer.get("recorded"))

    async def report(self, event: Mapping[str, Any]) -> bool:
        """`report_now` on a worker thread: the kernel's loop never waits on the network."""
        return await asyncio.to_thread(self.report_now, event)

    def spend_today(self) -> str:
        """'$1.23 of $20 today (12,345 tokens)', or why it is not known."""
        try:
            answer = self._request("/spend")
        except (OSError, ValueError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return f"unknown (the gateway {self.url} did not answer: {reason})"
        if not isinstance(answer, dict):
            return "unknown (the gateway's answer was not understood)"
        budget = answer.get("daily_budget")
        bound = f" of ${budget:g}" if isinstance(budget, int | float) else ""
        return (
            f"${float(answer.get('dollars') or 0):.2f}{bound} today "
            f"({int(answer.get('tokens') or 0):,} tokens, all this user's kernels)"
        )
