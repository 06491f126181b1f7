"""A fake Amazon Bedrock runtime for Claude, as `anthropic.AsyncAnthropicBedrock` expects it.

The SDK signs each request with SigV4 (botocore) and sends
`POST /model/{model id}/invoke-with-response-stream` (or `/invoke`) with the
Messages API body minus `model` and `stream`, plus
an `anthropic_version` (the SDK sends its API version date). The answer is an AWS event stream
(`application/vnd.amazon.eventstream`): binary frames of a 12-byte prelude
(total length, headers length, CRC32), typed headers, a payload and a CRC32 of
the whole frame. Each Messages API event is one `chunk` frame whose JSON payload
holds the event's JSON, base64-encoded, under `bytes`; an error mid-stream is an
`exception` frame (`throttlingException`, `internalServerException`, …); an
error before the stream is an HTTP status with `{"message": …}` and an
`x-amzn-ErrorType` header.

Given `aws_keys` (an access key id and its secret), the fake checks more than the
signature's shape: the request must be signed with that very key, and the
signature must match the one botocore's signer computes from what arrived (the
method, the path as sent, the signed headers, the body), as Bedrock checks it.

The frames are built here from that description (the SDK parses them with
botocore's own decoder, which checks both CRCs). Requests whose Authorization
is not a SigV4 signature for the `bedrock` service are refused with 403.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import aiohttp
from aiohttp import web

from phoenix_nb.testing.relay import RelayFake, Upstream

__all__ = ["FakeBedrock", "event_frame"]

# HTTP status -> the error name Bedrock puts in x-amzn-ErrorType.
_ERROR_NAMES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
# Messages API in-stream error type -> Bedrock's exception frame type.
_STREAM_EXCEPTIONS = {
    "rate_limit_error": "throttlingException",
    "overloaded_error": "serviceUnavailableException",
    "api_error": "internalServerException",
    "invalid_request_error": "validationException",
}


def _header(name: str, value: str) -> bytes:
    key, raw = name.encode(), value.encode()
    return struct.pack("!B", len(key)) + key + struct.pack("!BH", 7, len(raw)) + raw


def event_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (string headers only, as Bedrock sends)."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    head = prelude + struct.pack("!I", zlib.crc32(prelude))
    frame = head + encoded + payload
    return frame + struct.pack("!I", zlib.crc32(frame))


def chunk_frame(event_json: bytes) -> bytes:
    payload = json.dumps({"bytes": base64.b64encode(event_json).decode()}).encode()
    return event_frame(
        {
            ":event-type": "chunk",
            ":content-type": "application/json",
            ":message-type": "event",
        },
        payload,
    )


def _signature_matches(request: web.Request, body: bytes, keys: tuple[str, str]) -> bool:
    """Whether the SigV4 Authorization is the one `keys` give for what arrived."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    fields = dict(
        part.strip().split("=", 1)
        for part in request.headers["authorization"].split(" ", 1)[1].split(",")
    )
    key_id, _date, region, service, _ = fields["Credential"].split("/")
    if key_id != keys[0]:
        return False
    signed = fields["SignedHeaders"].split(";")
    headers = {name: request.headers.get(name, "") for name in signed}
    aws = AWSRequest(
        method=request.method,
        url=f"http://{request.host}{request.raw_path}",
        data=body,
        headers=headers,
    )
    aws.context["timestamp"] = request.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(keys[0], keys[1]), service, region)
    if signer.signed_headers(signer.headers_to_sign(aws)) != fields["SignedHeaders"]:
        return False
    canonical = signer.canonical_request(aws)
    expected = signer.signature(signer.string_to_sign(aws, canonical), aws)
    return bool(expected == fields["Signature"])


def exception_frame(kind: str, message: str) -> bytes:
    return event_frame(
        {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


class FakeBedrock(RelayFake):
    """See the module docstring. Point the SDK at `base_url` (ANTHROPIC_BEDROCK_BASE_URL)."""

    def __init__(self, *, aws_keys: tuple[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.aws_keys = aws_keys
        self.refused_signatures = 0

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/model/{model_id}/invoke-with-response-stream", self._handle_invoke),
            web.post("/model/{model_id}/invoke", self._handle_invoke),
        ]

    def _signed(self, request: web.Request, body: bytes) -> bool:
        auth = request.headers.get("authorization", "")
        shaped = (
            auth.startswith("AWS4-HMAC-SHA256 Credential=")
            and "/bedrock/aws4_request" in auth
            and "Signature=" in auth
            and bool(request.headers.get("x-amz-date"))
        )
        if not shaped or self.aws_keys is None:
            return shaped
        if _signature_matches(request, body, self.aws_keys):
            return True
        with self._cond:
            self.refused_signatures += 1
        return False

    def _bedrock_error(
        self, status: int, message: str, headers: dict[str, str] | None = None
    ) -> Any:
        name = _ERROR_NAMES.get(
            status, "InternalServerException" if status >= 500 else "ValidationException"
        )
        out = {"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
        out.update(headers or {})
        return web.json_response({"message": message}, status=status, headers=out)

    async def _handle_invoke(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.note_wire(request, body)
        if not self._signed(request, raw):
            return self._bedrock_error(403, "Missing or malformed SigV4 Authorization for bedrock.")
        if not isinstance(body, dict) or not body.get("anthropic_version"):
            return self._bedrock_error(400, "anthropic_version is required")
        if "model" in body:
            return self._bedrock_error(400, "model: Extra inputs are not permitted")
        stream = request.path.endswith("-with-response-stream")
        relayed = {**body, "model": request.match_info["model_id"], "stream": stream}
        relayed.pop("anthropic_version", None)
        async with self.relay(relayed) as response:
            upstream = Upstream(response)
            if upstream.status != 200:
                error = await upstream.json()
                detail = (error.get("error") or {}) if isinstance(error, dict) else {}
                keep = {
                    k: v
                    for k, v in response.headers.items()
                    if k.lower() in ("retry-after", "retry-after-ms")
                }
                return self._bedrock_error(upstream.status, str(detail.get("message") or ""), keep)
            if not stream:
                return web.json_response(await upstream.json())
            return await self._frames(request, upstream)

    async def _frames(self, request: web.Request, upstream: Upstream) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "application/vnd.amazon.eventstream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            async for name, data in upstream.events():
                if name == "error":
                    error = json.loads(data).get("error") or {}
                    kind = _STREAM_EXCEPTIONS.get(
                        str(error.get("type")), "modelStreamErrorException"
                    )
                    await resp.write(exception_frame(kind, str(error.get("message") or "")))
                    break
                await resp.write(chunk_frame(data))
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
            # The Messages API side was cut (a scripted drop): cut this side too.
            assert request.transport is not None
            request.transport.close()
            return resp
        except ConnectionError:
            return resp  # the client went away (a cancel); the relay closes upstream
        await resp.write_eof()
        return resp
