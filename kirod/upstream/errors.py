"""Errors raised while talking to Kiro, classified by what the dispatch pipeline should do.

This is the upstream branch of the tree drawn in `kirod.errors`. Foreign exceptions met on the way
(aiohttp, botocore, JSON) are mapped into it by the upstream module that calls the foreign library.

    KirodError
    ├── UpstreamError              talking to Kiro failed; `failure` says what to do about it
    │   ├── UpstreamProtocolError  the response stream is malformed: bad framing or CRC,
    │   │                          oversized frame, truncated stream, undecodable payload
    │   ├── UpstreamHttpError      Kiro answered with an error status
    │   ├── UpstreamConnectionError  no connection, or it broke
    │   │   └── UpstreamUnreachable  no route to Kiro's host connects: the machine's, not the
    │   │                          account's (`kirod.upstream.outages`)
    │   ├── UpstreamTimeout        no answer, or silence past the idle timeout
    │   ├── UpstreamStreamError    Kiro's error event that is the account's failure (throttled,
    │   │                          unavailable, empty): before any output, or mid-stream
    │   ├── UpstreamPromptTooLong  the prompt exceeds the model's window, by Kiro's count
    │   ├── UpstreamDocumentRefused  Kiro refused a body that carries documents
    │   ├── RefreshError           a token refresh failed (`permanent`: the account needs login)
    │   └── LoginError             a device-code login ended without tokens
    └── CredentialImportError      a credential file saved by another Kiro tool is unreadable,
                                   incomplete or inconsistent

Each `UpstreamError` carries a `Failure`, the class that decides what happens next
(docs/KIRO-PROTOCOL.md §4.3):

    Failure
    ├── the request's, never retried: bad_request, context_too_long (also Kiro's 402
    │   CONVERSATION_LIMIT_EXCEEDED), invalid_model
    ├── the request's shape, sent once more on the account without what Kiro refused:
    │   request_fields (the root additionalModelRequestFields), signature_invalid (replayed
    │   reasoning made under another tool list)
    ├── the credentials' or profile's: bearer (refresh once), profile_required (discover once)
    ├── the account's, resting it: suspended, quota (monthly or overage), throttled (Kiro's
    │   wait), penalty_window (USER_REQUEST_RATE_EXCEEDED: the window's length), daily_limit
    │   (DAILY_REQUEST_COUNT: until 00:00 UTC), suspicious_activity (hours), forbidden
    ├── Kiro's, not the account's: capacity (INSUFFICIENT_MODEL_CAPACITY, the model overloaded),
    │   service_throttled (SERVICE_REQUEST_RATE_EXCEEDED): the client hears Kiro's wait
    ├── the machine's, not the account's: unreachable (no route to Kiro's host connects)
    └── transient, counted by the breaker: server, network, timeout, protocol

`UpstreamError.to_api_error()` renders a failure for the client. Upstream credential failures are
never reported as the *client's* key being wrong (they are 502s, not 401s), and the upstream's own
message text is kept only where it helps the user (quota reason, prompt too long).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kirod.errors import ApiError, ErrorKind, KirodError


class Failure(enum.Enum):
    """What a failure means for the request and for the account (docs/KIRO-PROTOCOL.md §4.3)."""

    BAD_REQUEST = "bad_request"  # the payload was rejected: fatal, never retried
    REQUEST_FIELDS = "request_fields"  # root additionalModelRequestFields refused: resend without
    SIGNATURE = "signature_invalid"  # a replayed reasoning signature refused: resend without
    CONTEXT_TOO_LONG = "context_too_long"  # the prompt exceeds the model's window
    INVALID_MODEL = "invalid_model"  # unknown model, or not in this account's plan
    BEARER = "bearer"  # access token rejected: refresh once, then retry
    SUSPENDED = "suspended"  # the account is locked; do not retry on it
    FORBIDDEN = "forbidden"  # not authorized (profile/region mismatch, feature)
    PROFILE_REQUIRED = "profile_required"  # the call needs a (valid) profile ARN this one lacks
    QUOTA = "quota"  # monthly credits (or the overage limit on top) used up
    THROTTLED = "throttled"  # the account is rate limited; honour Kiro's wait
    PENALTY = "penalty_window"  # USER_REQUEST_RATE_EXCEEDED: every request waits the window out
    DAILY_LIMIT = "daily_limit"  # DAILY_REQUEST_COUNT: the account rests until 00:00 UTC
    SUSPICIOUS = "suspicious_activity"  # Kiro flagged the account and limits it: rest for hours
    CAPACITY = "capacity"  # the model is overloaded (Kiro's, not the account's)
    SERVICE_THROTTLED = "service_throttled"  # Kiro throttles its service, not the account
    SERVER = "server"  # 5xx from Kiro
    NETWORK = "network"  # connection refused, reset, DNS
    UNREACHABLE = "unreachable"  # no route to Kiro's host connects: the machine's, not an account's
    TIMEOUT = "timeout"  # no answer in time
    PROTOCOL = "protocol"  # the stream itself is broken

    @property
    def retryable(self) -> bool:
        """May another attempt (same account after refresh, or another account) succeed?"""
        return self not in (
            Failure.BAD_REQUEST,
            Failure.REQUEST_FIELDS,
            Failure.SIGNATURE,
            Failure.CONTEXT_TOO_LONG,
            Failure.INVALID_MODEL,
        )


class UpstreamError(KirodError):
    """Base of every failure of the upstream Kiro service or of our exchange with it."""

    failure: Failure = Failure.SERVER
    retry_after_s: float | None = None

    def to_api_error(self) -> ApiError:
        return _render(self)

    @property
    def detail(self) -> str:
        """A short, secret-free description, for the account's last error."""
        return str(self)


class UpstreamProtocolError(UpstreamError):
    """Kiro's response violated the event-stream protocol; the stream cannot be trusted further."""

    failure = Failure.PROTOCOL


class UpstreamHttpError(UpstreamError):
    """An error status from Kiro, with its reason code and a short, sanitized message."""

    def __init__(
        self,
        status: int,
        failure: Failure,
        *,
        reason: str | None = None,
        message: str = "",
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"Kiro answered {status} ({reason or failure.value})")
        self.status = status
        self.failure = failure
        self.reason = reason
        self.upstream_message = message
        self.retry_after_s = retry_after_s

    @property
    def detail(self) -> str:
        if self.failure is Failure.SUSPENDED and self.upstream_message:
            return self.upstream_message
        return f"HTTP {self.status}" + (f" {self.reason}" if self.reason else "")


class UpstreamConnectionError(UpstreamError):
    """`unconnected`: why no connection was made at all (DNS, refused, TLS, the proxy), in a few
    words naming no address; None when one was made and broke."""

    failure = Failure.NETWORK

    def __init__(self, message: str, *, unconnected: str | None = None) -> None:
        super().__init__(message)
        self.unconnected = unconnected


class UpstreamUnreachable(UpstreamConnectionError):
    """No connection to Kiro's host could be made, and no other route to it is known to
    connect: one condition of the machine, which rests no account (`kirod.upstream.outages`)."""

    failure = Failure.UNREACHABLE

    def __init__(self, message: str, unconnected: str) -> None:
        super().__init__(message, unconnected=unconnected)


class UpstreamTimeout(UpstreamError):
    failure = Failure.TIMEOUT


class UpstreamStreamError(UpstreamError):
    """Kiro's error event that is the account's failure: the answer's only event (before any
    output), or the one that broke it off after others; `code` is the event's."""

    def __init__(self, failure: Failure, error: ApiError) -> None:
        super().__init__(error.code or failure.value)
        self.failure = failure
        self._error = error

    def to_api_error(self) -> ApiError:
        return self._error


class UpstreamPromptTooLong(UpstreamError):
    """Kiro said the prompt does not fit; told in the form Claude Code reads to start its
    auto-compaction, with at least one token more than the window."""

    failure = Failure.CONTEXT_TOO_LONG

    def __init__(self, tokens: int, window: int) -> None:
        super().__init__(f"prompt is too long: {max(tokens, window + 1)} tokens > {window} maximum")

    def to_api_error(self) -> ApiError:
        return ApiError(
            ErrorKind.INVALID_REQUEST, str(self), code="context_length_exceeded", final=True
        )


class UpstreamDocumentRefused(UpstreamError):
    """Kiro answered a body carrying documents with its bare 400: said as the documents' fault,
    the likeliest one (docs/KIRO-PROTOCOL.md §2.3, rule 21), with what the client can do."""

    failure = Failure.BAD_REQUEST

    def __init__(self, formats: tuple[str, ...], model: str) -> None:
        count = f"{len(formats)} document" + ("s" if len(formats) > 1 else "")
        kinds = ", ".join(dict.fromkeys(formats))
        super().__init__(
            f"Kiro refused the request, which carries {count} ({kinds}), for model '{model}'; "
            "check that each file is a valid document of its type, or send its text instead"
        )

    def to_api_error(self) -> ApiError:
        return ApiError(
            ErrorKind.INVALID_REQUEST, str(self), code="document_refused", param="messages"
        )


class RefreshError(UpstreamError):
    """A token refresh failed. `permanent` means the refresh token is dead: log in again."""

    failure = Failure.BEARER

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class LoginError(UpstreamError):
    """A device-code login ended: `code` is access_denied, expired_token or a transport error."""

    failure = Failure.BEARER

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class CredentialImportError(KirodError):
    """An imported credential file cannot become an account.

    The message names the kind of file and the field at fault and is safe to show to the user: it
    never quotes a token or secret, only field names, lengths and non-secret values.
    """


@dataclass(frozen=True)
class _Rendering:
    """How one failure reads to a client. `with_message` / `with_reason` append the upstream's
    own words where they help (a quota reason, a suspension notice); `retry` sends Retry-After."""

    kind: ErrorKind
    message: str
    code: str
    param: str | None = None
    with_message: bool = False
    with_reason: bool = False
    retry: bool = False


_RENDERINGS: dict[Failure, _Rendering] = {
    Failure.CONTEXT_TOO_LONG: _Rendering(
        ErrorKind.INVALID_REQUEST,
        "prompt is too long: it exceeds the model's context window; compact the "
        "conversation and try again",
        "context_length_exceeded",
    ),
    Failure.INVALID_MODEL: _Rendering(
        ErrorKind.INVALID_REQUEST,
        "Kiro rejected the model for this account (unknown, not in its plan, or limited by "
        "the region its requests leave from or by an organisation's policy)",
        "model_not_available",
        param="model",
    ),
    Failure.BAD_REQUEST: _Rendering(
        ErrorKind.INVALID_REQUEST,
        "Kiro rejected the request as improperly formed",
        "upstream_rejected_request",
        with_reason=True,
    ),
    Failure.REQUEST_FIELDS: _Rendering(
        ErrorKind.INVALID_REQUEST,
        "Kiro rejected the model's request fields (effort, thinking or max_tokens) as sent",
        "upstream_rejected_request",
        with_reason=True,
    ),
    Failure.SIGNATURE: _Rendering(
        ErrorKind.INVALID_REQUEST,
        "Kiro rejected the signature of a thinking block in the conversation; resend it "
        "without the earlier thinking blocks",
        "invalid_thinking_signature",
    ),
    Failure.QUOTA: _Rendering(
        ErrorKind.RATE_LIMIT,
        "the Kiro account's usage limit is reached",
        "quota_exhausted",
        with_message=True,
        with_reason=True,
        retry=True,
    ),
    Failure.THROTTLED: _Rendering(
        ErrorKind.RATE_LIMIT,
        "Kiro is rate limiting this account; retry later",
        "upstream_rate_limited",
        retry=True,
    ),
    Failure.PENALTY: _Rendering(
        ErrorKind.RATE_LIMIT,
        "Kiro holds the account in a rate-limit penalty window, which a request sent before it "
        "ends prolongs; kirod rests the account until then",
        "upstream_penalty_window",
        retry=True,
    ),
    Failure.DAILY_LIMIT: _Rendering(
        ErrorKind.RATE_LIMIT,
        "the Kiro account's daily request limit is reached; Kiro resets it at 00:00 UTC",
        "daily_limit_reached",  # Retry-After: the pool's, when an account is back (not Kiro's)
    ),
    Failure.SERVICE_THROTTLED: _Rendering(
        ErrorKind.RATE_LIMIT,
        "Kiro is rate limiting its service as a whole, not this account; retry shortly",
        "upstream_service_throttled",
        retry=True,
    ),
    Failure.SUSPICIOUS: _Rendering(
        ErrorKind.RATE_LIMIT,
        "Kiro flagged suspicious activity on the Kiro account and limits how often it may send "
        "requests; kirod rests the account",
        "account_flagged",
    ),
    Failure.CAPACITY: _Rendering(
        ErrorKind.OVERLOADED,
        "the model is overloaded upstream; retry shortly",
        "upstream_overloaded",
        retry=True,
    ),
    Failure.BEARER: _Rendering(
        ErrorKind.UPSTREAM,
        "Kiro rejected the account's credentials; log in again with 'kiroctl accounts login'",
        "upstream_auth_failed",
    ),
    Failure.SUSPENDED: _Rendering(
        ErrorKind.UPSTREAM, "the Kiro account is suspended", "account_suspended", with_message=True
    ),
    Failure.FORBIDDEN: _Rendering(
        ErrorKind.UPSTREAM,
        "Kiro refused the call for this account (profile or region mismatch?)",
        "upstream_forbidden",
    ),
    Failure.PROFILE_REQUIRED: _Rendering(
        ErrorKind.UPSTREAM,
        "Kiro wants a profile the account lacks; see 'kiroctl accounts list'",
        "account_needs_profile",
    ),
    Failure.TIMEOUT: _Rendering(
        ErrorKind.UPSTREAM, "Kiro did not answer in time", "upstream_timeout"
    ),
    Failure.NETWORK: _Rendering(ErrorKind.UPSTREAM, "cannot reach Kiro", "upstream_unreachable"),
    Failure.UNREACHABLE: _Rendering(
        ErrorKind.UPSTREAM, "cannot reach Kiro", "upstream_unreachable"
    ),
    Failure.PROTOCOL: _Rendering(
        ErrorKind.UPSTREAM, "Kiro sent a malformed response stream", "upstream_protocol"
    ),
}
_FALLBACK = _Rendering(ErrorKind.UPSTREAM, "Kiro failed to answer", "upstream_error")


def _render(error: UpstreamError) -> ApiError:
    rendering = _RENDERINGS.get(error.failure, _FALLBACK)
    message = rendering.message
    upstream_message = getattr(error, "upstream_message", "") or ""
    reason = getattr(error, "reason", None)
    if rendering.with_message and upstream_message:
        message += f": {upstream_message}"
    if rendering.with_reason and reason:
        message += f" ({reason})"
    headers = {}
    if rendering.retry and error.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
    return ApiError(
        rendering.kind, message, code=rendering.code, param=rendering.param, headers=headers
    )
