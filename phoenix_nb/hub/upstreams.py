"""What the gateway forwards to each kind of upstream, and with which credential.

A kernel speaks its provider's own wire format to the gateway, as it would to the
upstream itself; only the credential differs (the user's Hub token). Per kind
(`Wire`): which requests are forwarded (model requests and lookups, nothing else
the admin's credential opens), where the model is named (the body for Anthropic
and OpenAI, the path for Bedrock and Vertex), whether the answer streams and in
which framing (SSE, or AWS event-stream frames), and the upstream's path (Vertex's
names the admin's project and region, not whatever the kernel put there).

The gateway's own credential (`UpstreamAuth`) replaces the user's token on each
forwarded request: the admin's key (`KeyAuth`: `x-api-key`, or a bearer key for
OpenAI-compatible servers), a SigV4 signature from the gateway's AWS credentials
for Bedrock (`SigV4Auth`, botocore's signer and credential chain), or a Google
access token for Vertex (`GoogleAuth`, google-auth's application-default chain,
refreshed off the loop and shared by concurrent requests). botocore and google-auth
are imported only by the upstream that needs them.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from phoenix_nb.errors import PhoenixError

__all__ = [
    "GoogleAuth",
    "KeyAuth",
    "SigV4Auth",
    "UpstreamAuth",
    "UpstreamAuthError",
    "Wire",
    "wire_for",
]

_CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class UpstreamAuthError(PhoenixError):
    """The gateway's own credential for its upstream cannot be had now (none found, or
    its refresh failed); the message says which."""


class UpstreamAuth(Protocol):
    """The gateway's credential on one forwarded request.

    `sign` gets the request exactly as it will be sent (method, URL already
    percent-encoded, headers without any credential, body) and returns the headers
    to add: a key, a bearer token, or a signature over all of it (so nothing may
    change the request after). It may await I/O (a token refresh); it raises
    UpstreamAuthError when no credential can be had."""

    async def sign(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]: ...


class KeyAuth:
    """The admin's key in one header: `x-api-key` (Anthropic) or `Authorization: Bearer`."""

    def __init__(self, key: str, *, bearer: bool = False) -> None:
        self._header = ("Authorization", f"Bearer {key}") if bearer else ("x-api-key", key)

    async def sign(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        return dict([self._header])


class SigV4Auth:
    """AWS Signature Version 4 for Bedrock from the gateway's AWS credentials.

    The credentials come from botocore's default chain (environment, shared files,
    the instance's or pod's role), read once; refreshable ones (a role) are frozen
    per request off the loop, since a refresh is an HTTP call."""

    def __init__(self, region: str, *, service: str = "bedrock") -> None:
        import botocore.session

        self.region, self.service = region, service
        self._credentials = botocore.session.get_session().get_credentials()
        if self._credentials is None:
            raise UpstreamAuthError(
                "phoenix gateway: no AWS credentials for Bedrock (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or give the gateway a role)."
            )

    async def sign(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        from botocore.auth import SigV4Auth as Signer
        from botocore.awsrequest import AWSRequest

        credentials = self._credentials
        refresh = getattr(credentials, "refresh_needed", None)
        if callable(refresh) and refresh():
            frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
        else:
            frozen = credentials.get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        Signer(frozen, self.service, self.region).add_auth(request)
        wanted = ("authorization", "x-amz-date", "x-amz-security-token")
        return {k: v for k, v in request.headers.items() if k.lower() in wanted}


class GoogleAuth:
    """A Google OAuth access token for Vertex from application-default credentials
    (a service account's key file, workload identity, the metadata server).

    One token serves every request until google-auth says it is no longer valid;
    then one refresh runs on a worker thread while other requests wait for it."""

    def __init__(self) -> None:
        import google.auth
        import google.auth.exceptions

        try:
            self._credentials, self.project = google.auth.default(scopes=[_CLOUD_SCOPE])
        except google.auth.exceptions.DefaultCredentialsError as exc:
            raise UpstreamAuthError(f"phoenix gateway: no Google credentials ({exc})") from None
        self._lock = asyncio.Lock()

    def _refresh(self) -> None:
        import google.auth.transport.requests

        self._credentials.refresh(google.auth.transport.requests.Request())

    async def sign(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        if not self._credentials.valid:
            async with self._lock:
                if not self._credentials.valid:
                    try:
                        await asyncio.to_thread(self._refresh)
                    except Exception as exc:  # google-auth's RefreshError, a network error
                        raise UpstreamAuthError(
                            f"phoenix gateway: the Google token could not be refreshed ({exc})"
                        ) from exc
        return {"Authorization": f"Bearer {self._credentials.token}"}


@dataclass(frozen=True)
class Wire:
    """One upstream kind's requests, as the gateway reads and forwards them."""

    kind: str
    forwarded: re.Pattern[str]  # "METHOD /path" of what a kernel sends
    framing: str = "sse"  # of a streamed answer: "sse" or "eventstream"
    project: str = ""  # Vertex: the admin's project and region, put in the path
    region: str = ""

    def allows(self, method: str, path: str) -> bool:
        return self.forwarded.fullmatch(f"{method} {path}") is not None

    def model(self, path: str, body: Mapping[str, Any] | None) -> str:
        """The model a request names: in the path for Bedrock and Vertex (Vertex's
        token count names it in the body), in the body otherwise."""
        named = str((body or {}).get("model") or "")
        if self.kind == "bedrock" and (m := _BEDROCK.fullmatch(path)):
            return urllib.parse.unquote(m.group("model"))
        if self.kind == "vertex" and (m := _VERTEX.fullmatch(path)):
            model = urllib.parse.unquote(m.group("model"))
            return named if model == "count-tokens" else model
        return named

    def streamed(self, path: str, body: Mapping[str, Any] | None) -> bool:
        if self.kind == "bedrock":
            return path.endswith("/invoke-with-response-stream")
        if self.kind == "vertex":
            return path.endswith(":streamRawPredict")
        return bool((body or {}).get("stream"))

    def upstream_path(self, raw_path: str) -> str:
        """The path sent upstream (still percent-encoded as the kernel sent it): the
        same, except that Vertex's names the admin's project and region."""
        if self.kind == "vertex" and (m := _VERTEX.fullmatch(raw_path)):
            return (
                f"/projects/{self.project}/locations/{self.region}/publishers/anthropic/"
                f"models/{m.group('model')}:{m.group('method')}"
            )
        return raw_path


_BEDROCK = re.compile(r"/model/(?P<model>[^/]+)/(?P<method>invoke|invoke-with-response-stream)")
_VERTEX = re.compile(
    r"/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/"
    r"(?P<model>[^/:]+):(?P<method>rawPredict|streamRawPredict)"
)
_PATTERNS = {
    "anthropic": r"POST /v1/messages(/count_tokens)?|GET /v1/models(/[^/]+)?",
    "openai": r"POST (/v1)?/chat/completions|GET (/v1)?/models(/[^/]+)?",
    "bedrock": "POST " + _BEDROCK.pattern,
    "vertex": "POST " + _VERTEX.pattern,
}


def wire_for(kind: str, *, project: str = "", region: str = "") -> Wire:
    """The wire of an upstream kind (one of policy.UPSTREAM_KINDS)."""
    return Wire(
        kind,
        re.compile(_PATTERNS[kind]),
        framing="eventstream" if kind == "bedrock" else "sse",
        project=project,
        region=region,
    )
