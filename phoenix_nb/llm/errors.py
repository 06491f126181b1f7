"""Every way an LLM request can fail, classified once into an `LlmFailure`.

The state machine decides about retries (REQ-BED-006) from `kind` and
`retryable` alone, so this module is the single place where HTTP statuses,
in-stream error types and raw transport exceptions are judged. The tables are
meant to be checked at a glance against the API's error documentation.

The SDK (and its HTTP client) are imported when a failure is classified, not
when this module is: the notebook extension imports it at `%load_ext`, long
before any request, and `import anthropic` alone costs about 1.5 s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from phoenix_nb.core.values import ErrorKind, LlmFailure
from phoenix_nb.errors import PhoenixError

if TYPE_CHECKING:
    import anthropic
    import httpx2

K = ErrorKind

# HTTP status -> (kind, retryable). Statuses not listed: other 5xx are retryable
# server errors, other 4xx are non-retryable invalid requests.
STATUS_TABLE: dict[int, tuple[ErrorKind, bool]] = {
    400: (K.INVALID_REQUEST, False),
    401: (K.AUTH, False),
    402: (K.AUTH, False),  # billing
    403: (K.AUTH, False),
    404: (K.INVALID_REQUEST, False),  # unknown model
    408: (K.NETWORK, True),
    409: (K.SERVER_ERROR, True),
    413: (K.INVALID_REQUEST, False),
    422: (K.INVALID_REQUEST, False),
    429: (K.RATE_LIMIT, True),
    500: (K.SERVER_ERROR, True),
    502: (K.SERVER_ERROR, True),
    503: (K.SERVER_ERROR, True),
    504: (K.SERVER_ERROR, True),
    529: (K.SERVER_ERROR, True),  # overloaded
}

# `error.type` of an in-stream `event: error` (HTTP status 200) -> (kind, retryable).
ERROR_TYPE_TABLE: dict[str, tuple[ErrorKind, bool]] = {
    "invalid_request_error": (K.INVALID_REQUEST, False),
    "authentication_error": (K.AUTH, False),
    "billing_error": (K.AUTH, False),
    "permission_error": (K.AUTH, False),
    "not_found_error": (K.INVALID_REQUEST, False),
    "request_too_large": (K.INVALID_REQUEST, False),
    "rate_limit_error": (K.RATE_LIMIT, True),
    "timeout_error": (K.NETWORK, True),
    "api_error": (K.SERVER_ERROR, True),
    "overloaded_error": (K.SERVER_ERROR, True),
    # Bedrock's exception frames in an AWS event stream (the SDK reports their type).
    "throttlingException": (K.RATE_LIMIT, True),
    "serviceUnavailableException": (K.SERVER_ERROR, True),
    "internalServerException": (K.SERVER_ERROR, True),
    "modelStreamErrorException": (K.SERVER_ERROR, True),
    "modelTimeoutException": (K.NETWORK, True),
    "validationException": (K.INVALID_REQUEST, False),
}

# The status the API uses for each error type, so an in-stream error reads like its HTTP twin.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "api_error": 500,
    "overloaded_error": 529,
    "throttlingException": 429,
    "serviceUnavailableException": 503,
    "internalServerException": 500,
    "modelStreamErrorException": 500,
    "modelTimeoutException": 504,
    "validationException": 400,
}

_CONTEXT_MARKERS = ("prompt is too long", "context window", "context_length")


class LlmCallError(PhoenixError):
    """Raised by `complete_text`, whose callers want an exception, carrying the classification."""

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def status_kind(status: int) -> tuple[ErrorKind, bool]:
    """Kind and retryability of an HTTP status, with the table's fallbacks."""
    if status in STATUS_TABLE:
        return STATUS_TABLE[status]
    if status >= 500:
        return (K.SERVER_ERROR, True)
    return (K.INVALID_REQUEST, False)


def retry_after_seconds(headers: httpx2.Headers | None) -> float | None:
    """The server's requested delay: `retry-after-ms` wins over `retry-after` (seconds).

    An HTTP-date `retry-after` is ignored (the API sends seconds); the state
    machine's own backoff applies then.
    """
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if value >= 0:
            return value
    return None


# What to set when a server refuses the credentials, per provider (`classify`'s
# `provider`): each message names the credentials that provider reads, and no other.
CREDENTIALS = {
    "anthropic": "ANTHROPIC_API_KEY",
    "bedrock": "the AWS credentials (a profile, `aws sso login`, AWS_ACCESS_KEY_ID / "
    "AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK)",
    "vertex": "the Google credentials (`gcloud auth application-default login` or "
    "GOOGLE_APPLICATION_CREDENTIALS)",
}


def _status_message(status: int, api_message: str, model: str, provider: str) -> str:
    detail = f" The API said: {api_message}" if api_message else ""
    what = CREDENTIALS.get(provider, CREDENTIALS["anthropic"])
    if status == 401:
        return (
            f"Authentication failed (401): check {what}.{detail if provider != 'anthropic' else ''}"
        )
    if status == 402:
        return f"Billing problem (402): check the account's plan and credit.{detail}"
    if status == 403 and provider != "anthropic":
        return f"Permission denied (403): check {what} and the model's access.{detail}"
    if status == 403:
        return f"Permission denied (403): this API key may not use this model or feature.{detail}"
    if status == 404:
        return (
            f"Not found (404): the model {model!r} does not exist or this key cannot use it;"
            f" choose another model.{detail}"
        )
    if status == 413:
        return (
            "The request is too large (413): remove large images or attachments,"
            f" or start a new conversation.{detail}"
        )
    if status == 429:
        return f"Rate limited by the API (429); the request will be retried.{detail}"
    if status == 529:
        return "The API is overloaded (529); the request will be retried."
    if status >= 500:
        return f"The API had a server error ({status}); the request will be retried.{detail}"
    if status == 200:
        return f"The API reported an error mid-response.{detail}"
    return f"Invalid request ({status}):{detail or ' the API rejected the request.'}"


def classify(
    exc: BaseException,
    *,
    model: str = "",
    stall_timeout: float | None = None,
    provider: str = "anthropic",
) -> LlmFailure:
    """Turn any exception from a request into one `LlmFailure` the user can act on;
    `provider` (anthropic, bedrock, vertex) decides which credentials a refusal names."""
    import anthropic
    import httpx2

    if isinstance(exc, anthropic.APIStatusError):
        return _classify_status(exc, model, provider)
    if isinstance(exc, anthropic.APITimeoutError):
        return LlmFailure(
            K.NETWORK,
            "Timed out waiting for the API to answer; the request will be retried.",
            True,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        why = f" ({type(cause).__name__}: {cause})" if cause else ""
        return LlmFailure(
            K.NETWORK,
            f"Could not connect to the API at {exc.request.url.host}{why}; check the network"
            " or ANTHROPIC_BASE_URL.",
            True,
        )
    if isinstance(exc, httpx2.ReadTimeout):
        secs = f" for {stall_timeout:g} s" if stall_timeout else ""
        return LlmFailure(
            K.NETWORK,
            f"The API stopped sending data{secs} (stalled response); it will be retried.",
            True,
        )
    if isinstance(exc, httpx2.TransportError):
        return LlmFailure(
            K.NETWORK,
            f"The connection to the API dropped mid-response ({type(exc).__name__});"
            " it will be retried.",
            True,
        )
    if isinstance(exc, json.JSONDecodeError):
        return LlmFailure(
            K.SERVER_ERROR, "The API sent a malformed event; the request will be retried.", True
        )
    if isinstance(exc, anthropic.CredentialsError | TypeError) and "auth" in str(exc).lower():
        return LlmFailure(K.AUTH, "No API key found: set ANTHROPIC_API_KEY.", False)
    cloud = _cloud_credentials(exc)
    if cloud is not None:
        return cloud
    return LlmFailure(
        K.UNKNOWN, f"Unexpected error from the LLM client: {type(exc).__name__}: {exc}", False
    )


def _cloud_credentials(exc: BaseException) -> LlmFailure | None:
    """Bedrock's and Vertex's credential chains fail with botocore's or google-auth's own
    exceptions, judged by module so that neither library is imported to tell."""
    module, name = type(exc).__module__, type(exc).__name__
    if module.startswith("google.auth"):
        if name == "TransportError":
            return LlmFailure(
                K.NETWORK,
                f"Could not reach Google to refresh the Vertex credentials ({exc});"
                " it will be retried.",
                True,
            )
        return LlmFailure(
            K.AUTH,
            f"Google credentials for Vertex did not work ({name}: {exc}). Run `gcloud auth "
            "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.",
            False,
        )
    if module.startswith("botocore") or "AWS credentials" in str(exc):
        return LlmFailure(
            K.AUTH,
            f"AWS credentials for Bedrock did not work ({name}: {exc}). Set up a profile, "
            "`aws sso login`, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.",
            False,
        )
    return None


def _body_message(body: object) -> str:
    """The message of an error body in Bedrock's (`{"message"}`) or Google's
    (`{"error": {"message"}}`) form, which the SDK does not read for us."""
    if not isinstance(body, dict):
        return ""
    inner = body.get("error")
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    return str(body["message"]) if isinstance(body.get("message"), str) else ""


def _classify_status(exc: anthropic.APIStatusError, model: str, provider: str) -> LlmFailure:
    api_message = getattr(exc, "api_message", "") or _body_message(exc.body)
    status = exc.status_code
    error_type = exc.type if isinstance(exc.type, str) else None
    if status == 200:
        # An in-stream `event: error`: judged by its type, reported with that type's status.
        kind, retryable = ERROR_TYPE_TABLE.get(error_type or "", (K.SERVER_ERROR, True))
        shown = _TYPE_STATUS.get(error_type or "", 200)
    else:
        kind, retryable = status_kind(status)
        shown = status
    if kind is K.INVALID_REQUEST and any(m in api_message.lower() for m in _CONTEXT_MARKERS):
        return LlmFailure(
            K.CONTEXT_EXHAUSTED,
            f"The conversation no longer fits the model's context window. {api_message}".strip(),
            False,
            status=status,
        )
    return LlmFailure(
        kind,
        _status_message(shown, api_message, model, provider),
        retryable,
        retry_after=retry_after_seconds(exc.response.headers),
        status=status,
    )
