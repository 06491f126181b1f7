"""A fake Vertex AI endpoint for Claude, as `anthropic.AsyncAnthropicVertex` expects it,
with the OAuth token endpoint Google's credential chain refreshes against.

The SDK sends `POST {base}/projects/{project}/locations/{region}/publishers/
anthropic/models/{model}:streamRawPredict` (`:rawPredict` unstreamed) with the
Messages API body minus `model`, plus an `anthropic_version` (the SDK sends its API version date),
and `Authorization: Bearer <access token>`. The streamed answer is the Messages
API's own SSE, passed through.

The token comes from google-auth's application-default chain: a service-account
key file (`GOOGLE_APPLICATION_CREDENTIALS`) whose `token_uri` is this server's
`/token` (`credentials_file()` writes one, with a fresh RSA key). google-auth
signs a JWT with the key and exchanges it there (the jwt-bearer grant); the fake
checks the signature against the key's public half. So the test runs the chain a
user's machine runs, with the refresh landing here. (An `authorized_user` file
cannot be used: google-auth always sends those to Google's own token endpoint.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from phoenix_nb.testing.relay import RelayFake, Upstream

__all__ = ["FakeVertex"]

ACCESS_TOKEN = "ya29.fake-vertex-access-token"


class FakeVertex(RelayFake):
    """See the module docstring. `base_url` is the API root (ANTHROPIC_VERTEX_BASE_URL)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.token_requests = 0
        self._public_key: Any = None

    @property
    def vertex_url(self) -> str:
        return self.base_url + "/v1"

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/token", self._handle_token),
            web.post(
                "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{call}",
                self._handle_predict,
            ),
        ]

    def credentials_file(self, folder: Path) -> Path:
        """A service-account key file whose token refreshes against this fake."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._public_key = key.public_key()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        path = folder / "service_account.json"
        path.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": "fake-project",
                    "private_key_id": "fake-key-id",
                    "private_key": pem,
                    "client_email": "phoenix-test@fake-project.iam.gserviceaccount.com",
                    "client_id": "1234567890",
                    "token_uri": f"{self.base_url}/token",
                }
            )
        )
        return path

    def _assertion_valid(self, assertion: str) -> bool:
        """The JWT's RS256 signature checks out against the key file's public key."""
        import base64

        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        try:
            head, body, signature = assertion.split(".")
            raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
            self._public_key.verify(
                raw, f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except (ValueError, AttributeError, InvalidSignature):
            return False
        return True

    async def _handle_token(self, request: web.Request) -> web.Response:
        form = await request.post()
        with self._cond:
            self.token_requests += 1
            self._cond.notify_all()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        if not self._assertion_valid(str(form.get("assertion") or "")):
            return web.json_response({"error": "invalid_grant"}, status=400)
        return web.json_response(
            {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        )

    async def _handle_predict(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.note_wire(request, body)
        if request.headers.get("authorization") != f"Bearer {ACCESS_TOKEN}":
            error = {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
            return web.json_response({"error": error}, status=401)
        model, _, method = request.match_info["call"].partition(":")
        if method not in ("streamRawPredict", "rawPredict"):
            return web.json_response({"error": {"message": f"unknown method {method}"}}, status=404)
        if not isinstance(body, dict) or not body.get("anthropic_version"):
            error = {"type": "invalid_request_error", "message": "anthropic_version is required"}
            return web.json_response({"type": "error", "error": error}, status=400)
        relayed = {k: v for k, v in body.items() if k != "anthropic_version"}
        relayed["model"] = model
        async with self.relay(relayed) as response:
            upstream = Upstream(response)
            if upstream.status != 200 or not relayed.get("stream"):
                keep = {
                    k: v
                    for k, v in response.headers.items()
                    if k.lower() in ("retry-after", "retry-after-ms")
                }
                return web.json_response(
                    await upstream.json(), status=upstream.status, headers=keep
                )
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            try:
                async for chunk in upstream.raw():
                    await resp.write(chunk)
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                assert request.transport is not None
                request.transport.close()  # a scripted drop upstream: cut this side too
                return resp
            except ConnectionError:
                return resp
            await resp.write_eof()
            return resp
