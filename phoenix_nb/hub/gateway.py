"""The phoenix gateway: a JupyterHub service that holds the provider key.

Kernels send their model requests here with the user's own Hub token as the
credential (`x-api-key`, or `Authorization: Bearer` from an OpenAI client).
For each request the gateway

1. asks the Hub whose token it is (`TokenAuth`; `HubTokenAuth` is JupyterHub's
   `HubAuth`, and the token must grant access to this service);
2. refuses a model outside the policy's `[models] allowed`, and a user or
   conversation whose budget is spent (`Ledger`), with a 403 whose message
   names the policy's line: the kernel shows it as the turn's error;
3. forwards the request to the admin's upstream with the gateway's own
   credential in place of the user's token (`UpstreamAuth`: the admin's key, a
   SigV4 signature for Bedrock, a Google token for Vertex; upstreams.py), and
   streams the answer back unchanged, chunk by chunk as it arrives (Bedrock's
   event-stream frames byte for byte), reading the usage on the way (`UsageMeter`);
4. writes one audit line (`AuditSink`) and adds the spend to the user's day.

Kernels also POST the events the user decides on (approvals, denials, mode
changes, MCP approvals, reverts) to `/audit`; `/spend` (JSON) and `/` (a page)
show the caller's spend today. The user is always the token's, never a field
of the body. A browser logs in to the page through the Hub (`BrowserLogin`:
JupyterHub's OAuth, with PKCE and a state cookie); the token it gets is kept in
an HttpOnly cookie scoped to the gateway's prefix, which only the page and
`/spend` accept: a model request never (another site's page could make a
browser send one, spending the user's budget).

Run by the Hub as a managed service (`python -m phoenix_nb.hub.gateway`, see
docs/jupyterhub.md); `serve` is the same on a given port, for tests and benches.
The budget check happens before a request is forwarded and the spend is added
after it: requests already in flight when a budget runs out finish (a user can
overshoot by the requests they run at once).
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from aiohttp import ClientSession, ClientTimeout, DummyCookieJar, TCPConnector, web
from yarl import URL

from phoenix_nb.errors import PhoenixError
from phoenix_nb.hub.audit import AuditLog, AuditSink, Ledger
from phoenix_nb.hub.upstreams import (
    GoogleAuth,
    KeyAuth,
    SigV4Auth,
    UpstreamAuth,
    UpstreamAuthError,
    Wire,
    wire_for,
)
from phoenix_nb.hub.usage import Metered, UsageMeter
from phoenix_nb.policy import POLICY_VARIABLE, Policy, PolicyError, load_policy

__all__ = [
    "BrowserLogin",
    "Gateway",
    "HubOAuthLogin",
    "HubTokenAuth",
    "LoginFailed",
    "TokenAuth",
    "main",
    "make_app",
]

# Headers that describe one hop, never forwarded (RFC 9110 7.6.1), and the
# caller's credentials, replaced by the admin's.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "content-encoding",
    }
)
_CREDENTIALS = frozenset({"x-api-key", "authorization", "cookie"})
CONVERSATION_HEADER = "x-phoenix-conversation"
SERVER_HEADER = "x-phoenix-server"  # the user's named server, where it has one
_EVENTS = frozenset(
    {"approval", "denial", "mode_change", "mcp_approval", "revert", "policy_refusal"}
)
_MAX_EVENT = 16 * 1024
_PARSE_ON_LOOP = 256 * 1024  # bytes of a request body parsed on the event loop (~1 ms)


class HubUnreachable(PhoenixError):
    """The Hub could not say whose a token is (down, or answering with an error)."""


class TokenAuth(Protocol):
    """Who a token belongs to.

    `user_for` returns the Hub user's name for a token the Hub accepts for this
    service, and None for any other (unknown, expired, revoked, or without
    access to the service); HubUnreachable when the Hub cannot tell now. It may
    cache answers for a short while (minutes).
    """

    async def user_for(self, token: str) -> str | None: ...


class LoginFailed(PhoenixError):
    """A browser's OAuth login did not complete (a stale or forged state, or the Hub
    refused the code); the message says which."""


class BrowserLogin(Protocol):
    """The Hub's OAuth login for the gateway's own page.

    `cookie` names the cookie that keeps a logged-in browser's token. `start(next)`
    begins a login for a browser that wants the page at path `next`: the Hub's
    authorization URL to send it to, and the state to keep in its state cookie.
    `finish(code, state)` ends it when the Hub sends the browser back: the user's
    token for `code` and the path to return to; LoginFailed for a state this
    gateway did not issue (or that expired), or a code the Hub refuses.
    """

    cookie: str

    def start(self, next_path: str) -> tuple[str, str]: ...

    async def finish(self, code: str, state: str) -> tuple[str, str]: ...


class HubOAuthLogin:
    """`BrowserLogin` by JupyterHub's `HubOAuth` (the service's OAuth client the Hub
    registers: JUPYTERHUB_CLIENT_ID, JUPYTERHUB_OAUTH_CALLBACK_URL), with PKCE."""

    def __init__(self, oauth: Any) -> None:
        self._oauth = oauth
        self.cookie = str(oauth.cookie_name)

    def start(self, next_path: str) -> tuple[str, str]:
        verifier, challenge, method = self._oauth.generate_pkce_code_challenge()
        state = str(self._oauth.generate_state(next_path, code_verifier=verifier))
        query = {"state": state, "code_challenge": challenge, "code_challenge_method": method}
        return f"{self._oauth.login_url}&{urllib.parse.urlencode(query)}", state

    async def finish(self, code: str, state: str) -> tuple[str, str]:
        verifier = self._oauth.get_code_verifier(state)
        if not verifier:
            raise LoginFailed("phoenix gateway: that login is stale; open the page again.")
        next_path = str(self._oauth.get_next_url(state))
        self._oauth.clear_oauth_state(state)
        try:
            token = await self._oauth.token_for_code(code, code_verifier=verifier, sync=False)
        except Exception as exc:  # tornado's HTTPError: the Hub refused the code
            raise LoginFailed(f"phoenix gateway: the Hub refused the login ({exc}).") from exc
        return str(token), next_path


class HubTokenAuth:
    """JupyterHub's `HubAuth`: the Hub's REST API says whose token it is.

    The gateway's own credentials (JUPYTERHUB_API_TOKEN, JUPYTERHUB_API_URL) come
    from the Hub, which starts it as a service; a user's token must carry
    `access:services!service=<this service>` (docs/jupyterhub.md: the Hub's
    `c.Spawner.server_token_scopes`)."""

    def __init__(self) -> None:
        from jupyterhub.services.auth import HubAuth, HubOAuth  # the `phoenix_nb[hub]` extra

        # HubOAuth is HubAuth plus the service's OAuth client, which the Hub registers
        # for a service with a URL (it sets JUPYTERHUB_CLIENT_ID)
        oauth = bool(os.environ.get("JUPYTERHUB_CLIENT_ID"))
        self._auth = (HubOAuth if oauth else HubAuth)(cache_max_age=60)

    def browser_login(self) -> BrowserLogin | None:
        """The Hub's OAuth login for the page, where the Hub gave this service a client."""
        from jupyterhub.services.auth import HubOAuth

        return HubOAuthLogin(self._auth) if isinstance(self._auth, HubOAuth) else None

    async def user_for(self, token: str) -> str | None:
        try:
            model = await self._auth.user_for_token(token, sync=False)
        except Exception as exc:  # tornado's HTTPError (a 5xx), or the Hub not listening
            raise HubUnreachable(f"phoenix gateway: the Hub did not answer ({exc}).") from exc
        if not model or model.get("kind", "user") != "user":
            return None
        required = self._auth.access_scopes
        if required and not self._auth.check_scopes(required, model):
            return None
        name = model.get("name")
        return name if isinstance(name, str) else None


def _token(request: web.Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    return None


def _redirect(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})


def _error(status: int, kind: str, message: str) -> web.Response:
    """An error in the Messages API's shape, which both SDKs show with its message."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.json_response(body, status=status)


class Gateway:
    """One gateway: the upstream, its key, the policy, who's who, and the audit trail."""

    def __init__(
        self,
        *,
        upstream: str,
        upstream_key: str = "",
        policy: Policy | None,
        auth: TokenAuth,
        audit: AuditSink,
        prefix: str = "/",
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        upstream_auth: UpstreamAuth | None = None,
        wire: Wire | None = None,
        login: BrowserLogin | None = None,
    ) -> None:
        """`upstream_auth`: the gateway's credential (default: `upstream_key` as the
        kind's key header); `wire`: the upstream's kind (default: the policy's);
        `login`: the Hub's OAuth login for the page (None: a token only)."""
        self.login = login
        self.upstream = upstream.rstrip("/")
        self.policy = policy
        self.wire = wire or wire_for(policy.upstream if policy is not None else "anthropic")
        self.kind = self.wire.kind
        self._upstream_auth = upstream_auth or KeyAuth(upstream_key, bearer=self.kind == "openai")
        self.auth = auth
        self.audit = audit
        self.prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
        self.now = now
        self.ledger = Ledger.for_policy(policy)
        self.ledger.replay(audit.lines())
        self._client: ClientSession | None = None

    def _path(self, request: web.Request) -> str:
        path = request.path
        if self.prefix != "/" and path.startswith(self.prefix):
            path = "/" + path[len(self.prefix) :]
        return path

    async def _user(self, request: web.Request) -> str | None:
        token = _token(request)
        return await self.auth.user_for(token) if token else None

    def _line(self, user: str, request: web.Request, **fields: Any) -> dict[str, Any]:
        return {
            "time": self.now().isoformat(timespec="milliseconds"),
            "user": user,
            "server": request.headers.get(SERVER_HEADER, ""),
            "conversation": request.headers.get(CONVERSATION_HEADER, ""),
            **fields,
        }

    def _record(self, line: Mapping[str, Any]) -> None:
        """One audit line, written inline (one small O_APPEND write): the line exists
        by the time the answer has ended, and a crash loses at most the request in flight."""
        self.audit.write(line)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        except HubUnreachable as exc:
            return _error(503, "api_error", str(exc))
        except UpstreamAuthError as exc:
            return _error(502, "api_error", str(exc))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = self._path(request)
        if path == "/audit" and request.method == "POST":
            return await self._event(request)
        if path in ("/spend", "/") and request.method == "GET":
            return await self._spend(request, page=path == "/")
        if path == "/oauth_callback" and request.method == "GET" and self.login is not None:
            return await self._logged_in(request)
        return await self._forward(request, path)

    async def _forward(self, request: web.Request, path: str) -> web.StreamResponse:
        user = await self._user(request)
        if user is None:
            return _error(401, "authentication_error", "phoenix gateway: not a valid Hub token.")
        if not self.wire.allows(request.method, path):
            # the admin's key opens more than model requests (batches, files …): those
            # would spend unmetered, so only what a kernel sends is forwarded
            return _error(
                404,
                "not_found_error",
                f"phoenix gateway: {request.method} {path} is not forwarded.",
            )
        body = await request.read()
        parsed = None
        if body and request.content_type == "application/json":
            # parsed whole (a regex could be fooled by a "model" inside the messages);
            # a long history's body is parsed off the loop, so other users' streams flow
            parse = partial(_json_or_none, body)
            big = len(body) > _PARSE_ON_LOOP
            parsed = await asyncio.to_thread(parse) if big else parse()
        fields = parsed if isinstance(parsed, dict) else None
        model = self.wire.model(path, fields)
        streamed = self.wire.streamed(path, fields)
        day = self.now().date().isoformat()
        conversation = request.headers.get(CONVERSATION_HEADER, "")
        refusal = None
        if model and self.policy is not None and not self.policy.model_allowed(model):
            refusal = (
                f"phoenix gateway: model {model!r} is not allowed by "
                f"{self.policy.where('models.allowed')}."
            )
        refusal = refusal or self.ledger.refusal(user, day, conversation)
        if refusal is not None:
            self._record(
                self._line(
                    user,
                    request,
                    event="request",
                    path=path,
                    model=model,
                    status="refused",
                    reason=refusal,
                    **_zero(),
                )
            )
            return _error(403, "permission_error", refusal)
        meter = UsageMeter(model, streamed=streamed, framing=self.wire.framing)
        recorded = False

        def account(status: str) -> None:
            """The spend and the audit line, once: before the answer's end is sent, so
            both exist by the time the client has the whole answer."""
            nonlocal recorded
            if recorded:
                return
            recorded = True
            used = meter.result() if model else Metered(model)
            self.ledger.add(user, day, conversation, used.dollars, used.tokens)
            fields = _counts(used)
            self._record(
                self._line(
                    user, request, event="request", path=path, model=model, status=status, **fields
                )
            )

        response: web.StreamResponse | None = None
        # the path as the kernel encoded it (a Bedrock model id's ":" is "%3A"), sent
        # unchanged (`encoded=True`): a SigV4 signature covers the exact bytes
        raw_path, _, query = request.raw_path.partition("?")
        if self.prefix != "/" and raw_path.startswith(self.prefix):
            raw_path = "/" + raw_path[len(self.prefix) :]
        url = self.upstream + self.wire.upstream_path(raw_path) + (f"?{query}" if query else "")
        headers = self._headers(request)
        try:
            headers.update(await self._upstream_auth.sign(request.method, url, headers, body))
        except UpstreamAuthError:
            account("upstream credential")
            raise
        try:
            async with self._session().request(
                request.method,
                URL(url, encoded=True),
                data=body if body else None,
                headers=headers,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for name, value in upstream.headers.items():
                    if name.lower() not in _HOP:
                        response.headers.add(name, value)
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)  # passed on first, read after:
                    meter.feed(chunk)  # the meter never delays a byte
                account("ok" if upstream.status < 400 else f"upstream {upstream.status}")
                await response.write_eof()
            return response
        except (ConnectionResetError, asyncio.CancelledError):
            account("client closed")
            raise
        except OSError as exc:
            account(f"upstream unreachable: {type(exc).__name__}")
            if response is None:
                return _error(502, "api_error", "phoenix gateway: the upstream did not answer.")
            raise
        finally:
            account("error")

    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in _HOP
            and k.lower() not in _CREDENTIALS
            and not k.lower().startswith("x-phoenix-")
        }
        headers["Accept-Encoding"] = "identity"  # the usage is read as it passes
        return headers

    def _session(self) -> ClientSession:
        if self._client is None:
            # no total timeout: a long answer streams for minutes; the kernel's own
            # stall timeout bounds the gaps between chunks
            # no cookie jar: the session is shared by every user, and a cookie the
            # upstream sets for one (a CDN's) must not ride along on the others'
            # no pool limit: each answer holds its connection for as long as it streams,
            # so aiohttp's default of 100 would make the hub's 101st user wait, with no
            # timeout, for someone else's answer to end; the open requests are the bound
            self._client = ClientSession(
                connector=TCPConnector(limit=0),
                timeout=ClientTimeout(total=None, sock_connect=10),
                auto_decompress=False,
                cookie_jar=DummyCookieJar(),
            )
        return self._client

    async def _event(self, request: web.Request) -> web.Response:
        user = await self._user(request)
        if user is None:
            return _error(401, "authentication_error", "phoenix gateway: not a valid Hub token.")
        raw = await request.content.read(_MAX_EVENT + 1)
        try:
            event = json.loads(raw) if len(raw) <= _MAX_EVENT else None
        except ValueError:
            event = None
        if not isinstance(event, dict) or event.get("event") not in _EVENTS:
            return _error(
                400,
                "invalid_request_error",
                f"phoenix gateway: an event is a JSON object whose event is one of "
                f"{', '.join(sorted(_EVENTS))}.",
            )
        fields = {k: v for k, v in event.items() if k not in ("user", "time", "server")}
        line = self._line(user, request, **fields)
        if isinstance(event.get("conversation"), str):
            line["conversation"] = event["conversation"]
        self._record(line)
        return web.json_response({"recorded": True})

    async def _spend(self, request: web.Request, *, page: bool) -> web.StreamResponse:
        token = _token(request) or request.query.get("token")
        if not token and self.login is not None:
            token = request.cookies.get(self.login.cookie)  # a browser that logged in
        user = await self.auth.user_for(token) if token else None
        if user is None and page and self.login is not None:
            return self._log_in(request)
        if user is None:
            return _error(401, "authentication_error", "phoenix gateway: not a valid Hub token.")
        spent = self.ledger.today(user, self.now().date().isoformat())
        budget = self.policy.budgets.user_daily if self.policy is not None else None
        report = {
            "user": user,
            "dollars": round(spent.dollars, 6),
            "tokens": spent.tokens,
            "daily_budget": budget,
        }
        if not page:
            return web.json_response(report)
        bound = f" of ${budget:g}" if budget is not None else ""
        text = (
            "<!doctype html><title>phoenix gateway</title>"
            f"<h1>{html.escape(user)}: today</h1>"
            f"<p>${spent.dollars:.2f}{bound} spent, {spent.tokens:,} tokens (UTC day).</p>"
        )
        return web.Response(text=text, content_type="text/html")

    def _cookie_options(self, request: web.Request) -> dict[str, Any]:
        # the scheme the browser used: a proxy in front says it (the Hub's proxy sends
        # lists such as ",http"), else this connection's
        said = request.headers.get("X-Forwarded-Proto", "").split(",")
        scheme = next((p.strip() for p in said if p.strip()), request.scheme)
        return {
            "path": self.prefix,
            "httponly": True,
            "samesite": "Lax",
            "secure": scheme == "https",
        }

    def _log_in(self, request: web.Request) -> web.StreamResponse:
        """Send a browser to the Hub to log in, keeping the login's state in a cookie."""
        assert self.login is not None
        url, state = self.login.start(request.path)
        response = _redirect(url)
        response.set_cookie(
            f"{self.login.cookie}-oauth-state", state, max_age=600, **self._cookie_options(request)
        )
        return response

    async def _logged_in(self, request: web.Request) -> web.StreamResponse:
        """The Hub sent the browser back: check the state against its cookie (a login
        this browser started, not one a third party slipped it), take the token."""
        assert self.login is not None
        state = request.query.get("state", "")
        code = request.query.get("code", "")
        kept = request.cookies.get(f"{self.login.cookie}-oauth-state", "")
        if not code or not state or state != kept:
            return _error(
                403,
                "permission_error",
                "phoenix gateway: the login's state does not match; open the page again.",
            )
        try:
            token, next_path = await self.login.finish(code, state)
        except LoginFailed as exc:
            return _error(403, "permission_error", str(exc))
        if not next_path.startswith(self.prefix):
            next_path = self.prefix  # only ever back to this gateway's own page
        response = _redirect(next_path)
        options = self._cookie_options(request)
        response.del_cookie(f"{self.login.cookie}-oauth-state", path=options["path"])
        response.set_cookie(self.login.cookie, token, **options)
        return response

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _zero() -> dict[str, Any]:
    return {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "dollars": 0.0}


def _counts(used: Metered) -> dict[str, Any]:
    return {
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cached_tokens": used.cached_tokens,
        "cache_write_tokens": used.cache_write_tokens,
        "dollars": used.dollars,
    }


def make_app(gateway: Gateway) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)  # requests carry images
    app.router.add_route("*", "/{tail:.*}", gateway.handle)

    async def close(_app: web.Application) -> None:
        await gateway.aclose()

    app.on_cleanup.append(close)
    return app


def _upstream(kind: str, environ: Mapping[str, str]) -> tuple[str, UpstreamAuth, Wire]:
    """The upstream's URL, the gateway's credential for it and its wire, from the
    service's environment (each cloud's own variables; botocore and google-auth read
    their credential chains from the process environment themselves)."""
    named = environ.get("PHOENIX_UPSTREAM_URL")
    if kind == "bedrock":
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or ""
        if not region:
            raise PolicyError("phoenix gateway: a Bedrock upstream needs AWS_REGION.")
        upstream = (
            named
            or environ.get("ANTHROPIC_BEDROCK_BASE_URL")
            or f"https://bedrock-runtime.{region}.amazonaws.com"
        )
        return upstream, SigV4Auth(region), wire_for(kind)
    if kind == "vertex":
        region = environ.get("CLOUD_ML_REGION") or ""
        if not region:
            raise PolicyError("phoenix gateway: a Vertex upstream needs CLOUD_ML_REGION.")
        google = GoogleAuth()
        project = environ.get("ANTHROPIC_VERTEX_PROJECT_ID") or google.project or ""
        if not project:
            raise PolicyError(
                "phoenix gateway: a Vertex upstream needs ANTHROPIC_VERTEX_PROJECT_ID."
            )
        host = "aiplatform.googleapis.com"
        default = f"https://{host}/v1" if region == "global" else f"https://{region}-{host}/v1"
        upstream = named or environ.get("ANTHROPIC_VERTEX_BASE_URL") or default
        return upstream, google, wire_for(kind, project=project, region=region)
    if kind == "openai":
        upstream = named or environ.get("OPENAI_BASE_URL") or ""
        key = environ.get("OPENAI_API_KEY", "")
    else:
        upstream = named or environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        key = environ.get("ANTHROPIC_API_KEY", "")
    if not upstream or not key:
        raise PolicyError(
            "phoenix gateway: set the upstream's key (ANTHROPIC_API_KEY or OPENAI_API_KEY) "
            "and, for OpenAI-compatible upstreams, PHOENIX_UPSTREAM_URL."
        )
    return upstream, KeyAuth(key, bearer=kind == "openai"), wire_for(kind)


def _from_environment(environ: Mapping[str, str]) -> tuple[Gateway, str, int]:
    """The gateway the Hub's service environment describes, and where it listens."""
    policy = load_policy(environ)
    kind = policy.upstream if policy is not None else "anthropic"
    try:
        upstream, upstream_auth, wire = _upstream(kind, environ)
    except UpstreamAuthError as exc:
        raise PolicyError(str(exc)) from None
    url = urllib.parse.urlsplit(
        environ.get("JUPYTERHUB_SERVICE_URL")
        or environ.get("PHOENIX_GATEWAY_URL")
        or (policy.gateway_url if policy is not None and policy.gateway_url else "")
        or "http://127.0.0.1:8765"
    )
    audit_path = (policy.audit_path if policy is not None else None) or environ.get(
        "PHOENIX_AUDIT", "phoenix-audit.jsonl"
    )
    auth = HubTokenAuth()
    gateway = Gateway(
        upstream=upstream,
        policy=policy,
        auth=auth,
        login=auth.browser_login(),
        audit=AuditLog(audit_path),
        prefix=environ.get("JUPYTERHUB_SERVICE_PREFIX", "/"),
        upstream_auth=upstream_auth,
        wire=wire,
    )
    return gateway, url.hostname or "127.0.0.1", url.port or 8765


def main() -> None:
    """`python -m phoenix_nb.hub.gateway`: run as the Hub's managed service."""
    try:
        gateway, host, port = _from_environment(os.environ)
    except PolicyError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    print(
        f"phoenix gateway on http://{host}:{port}{gateway.prefix} -> {gateway.upstream} "
        f"(policy: {os.environ.get(POLICY_VARIABLE) or 'default path'})",
        file=sys.stderr,
        flush=True,
    )
    serve(gateway, host, port)


def serve(gateway: Gateway, host: str, port: int) -> None:
    """Run the gateway until it is stopped (SIGTERM/SIGINT), on uvloop where installed.

    The gateway is a hop on every model request of every kernel: what it adds to the
    time to first text is mostly the event loop's own work per wake-up (accept, read,
    write, the upstream's socket), which uvloop does in C. `phoenix_nb[hub]` installs it;
    without it (another platform, a bare install) the standard loop serves the same."""
    web.run_app(make_app(gateway), host=host, port=port, print=None, loop=_event_loop())


def _event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # optional: the hub extra's speed-up, not a need
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


if __name__ == "__main__":
    main()
