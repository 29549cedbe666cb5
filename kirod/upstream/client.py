"""KiroClient: every HTTP exchange with Kiro (chat, usage, models, token refresh, device login).

Each exchange runs on its account's pool for that host and proxy (`kirod.upstream.pools`): two
accounts never share a connection or a proxy tunnel. The client retries nothing itself but the
one resend of a request its reused connection failed before the server took it (see `pools`);
every other retry is the dispatch pipeline's. aiohttp, JSON and decoding errors are mapped into
`kirod.upstream.errors` here and nowhere else.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import hashlib
import json
import logging
import math
import os
import re
import socket
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import aiohttp_socks

from kirod.canonical import wirejson
from kirod.drift import Drift, Kind, key_names
from kirod.upstream.errors import (
    Failure,
    UpstreamConnectionError,
    UpstreamHttpError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from kirod.upstream.frames import Frame, FrameDecoder
from kirod.upstream.outages import Outages
from kirod.upstream.pools import KEEP_ALIVE_TIMEOUT_S, MAX_IDLE_POOLS, Pool, Pools
from kirod.upstream.proxies import Route, effective_proxy, route
from kirod.upstream.secrets import AuthKind, Credentials

logger = logging.getLogger(__name__)

KIRO_IDE_VERSION = "0.9.2"
SDK_VERSION = "1.0.34"
MAX_ERROR_BODY = 64 * 1024
MAX_JSON_ANSWER = 4 * 1024 * 1024
"""Largest JSON answer read (usage, a model-list page, a token refresh, OIDC): each is a few
kilobytes; a larger one is refused without being read further."""
MAX_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Endpoints:
    """Base URL templates; `{region}` is replaced per call (tests point them at loopback)."""

    kiro: str
    auth: str
    oidc: str

    def kiro_url(self, region: str) -> str:
        return self.kiro.replace("{region}", region).rstrip("/")

    def auth_url(self, region: str) -> str:
        return self.auth.replace("{region}", region).rstrip("/")

    def oidc_url(self, region: str) -> str:
        return self.oidc.replace("{region}", region).rstrip("/")


@dataclass(frozen=True)
class UpstreamAccount:
    """What the client needs to act for one account."""

    id: str
    region: str
    auth_region: str
    auth_kind: AuthKind
    profile_arn: str | None
    credentials: Credentials
    # None: the global proxy setting; "direct": no proxy at all; else this account's proxy URL.
    proxy_url: str | None = None


@dataclass(frozen=True)
class ClientOptions:
    proxy_url: str | None = None
    keep_alive: bool = True
    keep_alive_timeout_s: float = KEEP_ALIVE_TIMEOUT_S
    max_idle_pools: int = MAX_IDLE_POOLS
    # extra CA certificates (PEM), trusted besides the system's for Kiro and HTTPS proxies alike
    ca_file: Path | None = None
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 120.0
    request_timeout_s: float = 600.0


@functools.lru_cache(maxsize=1024)
def machine_id(account_id: str) -> str:
    """A stable per-account machine id, as Kiro IDE sends; derived, never identifying the host."""
    return hashlib.sha256(f"kirod/{account_id}".encode()).hexdigest()


def _clean_message(text: object) -> str:
    if not isinstance(text, str):
        return ""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return printable[:MAX_MESSAGE_CHARS]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


def _body_wait(doc: Mapping[str, Any]) -> float | None:
    """The wait a ThrottlingException's body names, `retryAfterMilliseconds`, in seconds
    (docs/KIRO-PROTOCOL.md §4.2): today's Kiro sends it instead of a Retry-After header."""
    value = doc.get("retryAfterMilliseconds")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value / 1000.0


def _wait(header: float | None, body: float | None) -> float | None:
    """Kiro's wait: the body's, or the header's, or the longer when both came. A retry before a
    penalty window ends prolongs it (docs/KIRO-PROTOCOL.md §4.3), while waiting a little long
    costs only latency: the longer is the safe one."""
    if header is None or body is None:
        return body if header is None else header
    return max(header, body)


# The allowance is used up: the month's credits, or the overage limit on top of them.
_QUOTA_REASONS = frozenset({"MONTHLY_REQUEST_COUNT", "OVERAGE_REQUEST_LIMIT_EXCEEDED"})
# ThrottlingException's reasons, whatever the status, and what each means
# (docs/KIRO-PROTOCOL.md §4.3). MODEL_TEMPORARILY_UNAVAILABLE comes as a 500 and means the same as
# the capacity one.
_REASON_FAILURES: Mapping[str, Failure] = {
    "CREDIT_CONSUMPTION_RATE_EXCEEDED": Failure.THROTTLED,
    "USER_REQUEST_RATE_EXCEEDED": Failure.PENALTY,
    "DAILY_REQUEST_COUNT": Failure.DAILY_LIMIT,
    "SERVICE_REQUEST_RATE_EXCEEDED": Failure.SERVICE_THROTTLED,
    "INSUFFICIENT_MODEL_CAPACITY": Failure.CAPACITY,
    "MODEL_TEMPORARILY_UNAVAILABLE": Failure.CAPACITY,
}
# ServiceQuotaExceededException (402) for the conversation, not the account: its context is
# full (docs/KIRO-PROTOCOL.md §4.2). Read before the status, which would say "quota".
_CONVERSATION_FULL = "CONVERSATION_LIMIT_EXCEEDED"
# What kirod knows of Kiro's error answers (docs/KIRO-PROTOCOL.md §4.1, §4.2); anything else is
# served as its status's class always was, and recorded as drift (`kirod.drift`) where a Kiro
# operation answered it. Reasons read whatever the status came with, then those of one status:
_ANY_STATUS_REASONS = frozenset({*_QUOTA_REASONS, *_REASON_FAILURES, _CONVERSATION_FULL})
_STATUS_REASONS: Mapping[int, frozenset[str]] = {
    400: frozenset(
        {
            "REQUEST_BODY_INVALID",
            "THINKING_SIGNATURE_INVALID",
            "TOOL_SCHEMA_INVALID",
            "CONTENT_LENGTH_EXCEEDS_THRESHOLD",
            "INVALID_CONVERSATION_ID",
            "INVALID_MODEL_ID",
        }
    ),
    403: frozenset({"TEMPORARILY_SUSPENDED", "FEATURE_NOT_SUPPORTED"}),
}
# The service model's error shapes, as `__type` (after its namespace's `#`) or `x-amzn-errortype`.
_ERROR_TYPES = frozenset(
    {
        "ValidationException",
        "AccessDeniedException",
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "InternalServerException",
        "ServiceUnavailableException",
        "ResourceNotFoundException",
        "ConflictException",
    }
)
# The statuses `classify` sorts by; another is served as a server error, as before.
_KNOWN_STATUSES = frozenset({400, 401, 402, 403, 429, 500, 502, 503, 504})
# How Kiro names the root field its schema refused (docs/KIRO-PROTOCOL.md §2.6).
_REFUSED_PROPERTY = re.compile(r"property '([A-Za-z_][\w-]{0,63})'")
# A 403 saying the account is locked: "temporarily is suspended. We've locked your account as a
# security precaution" (docs/KIRO-PROTOCOL.md §4.2), or "... locked it as a security precaution"
# (kirodotdev/Kiro#4963).
_LOCKED_WORDS = ("suspended", "locked your account", "security precaution")


def classify(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    drift: Drift | None = None,
    where: str = "",
    region: str | None = None,
    sent: bytes | None = None,
) -> UpstreamHttpError:
    """Turn an error response into a classified `UpstreamHttpError` (docs/KIRO-PROTOCOL.md §4).

    With `drift`, what of it kirod does not know is recorded there, by shape: a status, an error
    type or reason, or a refused request field (named by its key path in `sent`, the request
    body), as met by the Kiro operation `where` in `region`.
    """
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    error_value = doc.get("error")
    nested: dict[str, Any] = error_value if isinstance(error_value, dict) else {}
    oauth_code = error_value if isinstance(error_value, str) else None
    message = _clean_message(
        doc.get("message")
        or doc.get("Message")
        or doc.get("errorMessage")
        or doc.get("error_description")
        or nested.get("message")
    )
    # Kiro sends {"message", "reason"}; the OAuth hosts send {"error", "error_description"}.
    reason_value = doc.get("reason") or nested.get("reason") or oauth_code
    reason = reason_value if isinstance(reason_value, str) else None
    lowered = message.lower()
    retry_after = _wait(
        _retry_after(headers.get("Retry-After")), _body_wait(doc) or _body_wait(nested)
    )

    failure: Failure
    if reason == _CONVERSATION_FULL:
        failure = Failure.CONTEXT_TOO_LONG
    elif status == 402 or reason in _QUOTA_REASONS:
        # Before the 400s: peers saw the overage limit come as a 400 as well as a 402.
        failure = Failure.QUOTA
    elif status == 400:
        if reason == "TOOL_SCHEMA_INVALID":  # docs/KIRO-PROTOCOL.md §4.2, whatever it says
            failure = Failure.BAD_REQUEST
        elif reason == "THINKING_SIGNATURE_INVALID" or "invalid `signature`" in lowered:
            failure = Failure.SIGNATURE  # docs/KIRO-PROTOCOL.md §2.6, with or without a reason
        elif "additionalmodelrequestfields" in lowered:
            failure = Failure.REQUEST_FIELDS  # docs/KIRO-PROTOCOL.md §2.6: the schema's refusal
        elif (
            reason == "CONTENT_LENGTH_EXCEEDS_THRESHOLD"
            or "too long" in lowered
            or ("context window" in lowered)
        ):
            failure = Failure.CONTEXT_TOO_LONG
        elif reason == "INVALID_MODEL_ID" or "invalid model" in lowered:
            failure = Failure.INVALID_MODEL
        elif "profilearn is required" in lowered or "invalid profilearn" in lowered:
            failure = Failure.PROFILE_REQUIRED
        else:
            failure = Failure.BAD_REQUEST
    elif status == 401 or (status == 403 and "bearer token" in lowered):
        failure = Failure.BEARER
    elif status == 403:
        suspended = reason == "TEMPORARILY_SUSPENDED" or any(w in lowered for w in _LOCKED_WORDS)
        failure = Failure.SUSPENDED if suspended else Failure.FORBIDDEN
    elif reason is not None and reason in _REASON_FAILURES:
        failure = _REASON_FAILURES[reason]
    elif status == 429 and "suspicious activity" in lowered:
        # "Due to suspicious activity, we are imposing temporary limits on how frequently your
        # account ... can send a request" (docs/KIRO-PROTOCOL.md §4.3): the account's, for hours.
        failure = Failure.SUSPICIOUS
    elif status == 429:
        failure = Failure.THROTTLED
    else:
        failure = Failure.SERVER
    if drift is not None:
        type_value = doc.get("__type") or nested.get("__type") or headers.get("x-amzn-errortype")
        error_type = type_value.rsplit("#", 1)[-1].split(":", 1)[0] if type_value else None
        _observe(drift, where, region, status, reason, error_type)
        if failure is Failure.REQUEST_FIELDS:
            drift.observe(
                Kind.SCHEMA_REFUSAL, where, region=region, **_refused_field(message, sent)
            )
    return UpstreamHttpError(
        status, failure, reason=reason, message=message, retry_after_s=retry_after
    )


def _observe(
    drift: Drift,
    where: str,
    region: str | None,
    status: int,
    reason: str | None,
    error_type: str | None,
) -> None:
    """A status, or an error type or reason for its status, that kirod does not know."""
    if status not in _KNOWN_STATUSES:
        drift.observe(
            Kind.HTTP_STATUS, where, region=region, status=status, type=error_type, reason=reason
        )
        return
    known = _ANY_STATUS_REASONS | _STATUS_REASONS.get(status, frozenset())
    if (reason is not None and reason not in known) or (
        error_type is not None and error_type not in _ERROR_TYPES
    ):
        drift.observe(
            Kind.ERROR_REASON, where, region=region, status=status, type=error_type, reason=reason
        )


def _refused_field(message: str, sent: bytes | None) -> dict[str, object]:
    """The refused root field by its key path in what kirod sent (`output_config.effort`), and
    the leaves it sent; Kiro names only one key, and its message is never kept."""
    try:
        root = json.loads(sent) if sent else {}
    except ValueError:
        root = {}
    fields = root.get("additionalModelRequestFields") if isinstance(root, dict) else None
    leaves = _leaf_paths(fields) if isinstance(fields, dict) else []
    named = _REFUSED_PROPERTY.search(message)
    field = None
    for parts in (leaf.split(".") for leaf in leaves):
        if named and named.group(1) in parts:
            field = ".".join(parts[: parts.index(named.group(1)) + 1])
            break
    return {"field": field, "sent": key_names(dict.fromkeys(leaves)) or None}


def _leaf_paths(fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted key paths of `fields`' leaves, in order."""
    paths: list[str] = []
    for key, value in fields.items():
        path = f"{prefix}{key}"
        paths += _leaf_paths(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return paths


def _unconnected(exc: aiohttp.ClientError) -> str | None:
    """Why no connection was made (DNS, refused, TLS to the host, an http proxy down or refusing
    the tunnel), in words naming no address; None when one was made (it broke). A resolver's or
    TLS's own words name none; a refused connect's message does ("Connect call failed (host,
    port)"), so its errno is told in the system's words instead ("Connection refused")."""
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"the proxy refused the tunnel ({exc.status})"
    if not isinstance(exc, aiohttp.ClientConnectorError):
        return None
    error = exc.os_error
    if isinstance(error, socket.gaierror | ssl.SSLError):
        said = error.strerror
    else:
        said = os.strerror(error.errno) if error.errno else None
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


@functools.cache
def _host(base: str) -> str:
    """The host (and port) of a base URL: what an outage is told by (`kirod.upstream.outages`).
    Cached: the base URLs are the endpoints of a few regions."""
    return urlsplit(base).netloc


@contextlib.contextmanager
def _mapped(timeout: str, broken: str, *, truncated: str | None = None) -> Iterator[None]:
    """aiohttp's exceptions as `UpstreamError`s, worded for the step that failed.

    `truncated`: a body that ended abnormally is Kiro's protocol error, not a broken connection
    (for the event stream, whose frames say where it should end).
    """
    try:
        yield
    except (TimeoutError, aiohttp.ServerTimeoutError, aiohttp_socks.ProxyTimeoutError):
        raise UpstreamTimeout(timeout) from None
    except (aiohttp_socks.ProxyConnectionError, aiohttp_socks.ProxyError) as exc:
        # A SOCKS proxy that cannot be reached or refused the tunnel (aiohttp_socks' errors are
        # not aiohttp's). Its message names no credentials, but the type is enough.
        why = f"proxy {type(exc).__name__}"
        raise UpstreamConnectionError(f"{broken}: {why}", unconnected=why) from None
    except aiohttp.ClientConnectorCertificateError:
        # Kiro's or an https proxy's certificate failed verification: say what fixes it.
        why = "TLS certificate not trusted (a company CA goes in ca_file)"
        raise UpstreamConnectionError(f"{broken}: {why}", unconnected=why) from None
    except aiohttp.ClientError as exc:
        if truncated is not None and isinstance(exc, aiohttp.ClientPayloadError):
            raise UpstreamProtocolError(truncated) from None
        raise UpstreamConnectionError(
            f"{broken}: {type(exc).__name__}", unconnected=_unconnected(exc)
        ) from None


async def _read_bounded(
    response: aiohttp.ClientResponse, limit: int, *, truncate: bool = False
) -> bytes | None:
    """The body, read up to `limit` bytes. Above it: the first `limit` bytes if `truncate`,
    else None, in both cases without reading the rest (the caller closes the response).

    A declared Content-Length above the limit is refused before any byte is read; the count
    covers the decoded body, so a compressed answer cannot inflate past it either.
    """
    declared = response.content_length
    if declared is not None and declared > limit and not truncate:
        return None
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await response.content.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit] if truncate else None


@dataclass(frozen=True, slots=True)
class _Kiro:
    """The Kiro operation an exchange is, and the account's region, as drift records name them."""

    operation: str
    region: str


class KiroClient:
    def __init__(
        self, endpoints: Endpoints, options: ClientOptions, drift: Drift | None = None
    ) -> None:
        self.endpoints = endpoints
        self.options = options
        # What Kiro answers that kirod does not know, by shape (`kirod.drift`).
        self.drift = Drift() if drift is None else drift
        # Kiro's hosts no route connects to: the machine's condition, not the accounts'.
        self.outages = Outages()
        self._pools = Pools(
            proxy_url=options.proxy_url,
            keep_alive=options.keep_alive,
            keep_alive_timeout_s=options.keep_alive_timeout_s,
            max_idle_pools=options.max_idle_pools,
            ca_file=options.ca_file,
            timeout=aiohttp.ClientTimeout(
                total=options.request_timeout_s,
                sock_connect=options.connect_timeout_s,
                sock_read=options.idle_timeout_s,
            ),
        )

    async def __aenter__(self) -> KiroClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._pools.close()

    def one_off(self, proxy_url: str | None) -> tuple[Route, aiohttp.ClientSession]:
        """A new session, one connection a request, through the proxy an account with
        `proxy_url` takes and trusting what kirod trusts: `kirod.upstream.reach`'s checks. The
        caller closes it."""
        path = route(effective_proxy(proxy_url, self.options.proxy_url))
        return path, self._pools.session(path, reuse=False)

    async def forget_account(self, account_id: str) -> None:
        """Close the connections of a removed account (through every proxy it used)."""
        await self._pools.forget(account_id)

    # -- the Kiro API -------------------------------------------------------------------------

    def _api_headers(self, account: UpstreamAccount, api: str) -> dict[str, str]:
        mid = machine_id(account.id)
        agent = f"KiroIDE-{KIRO_IDE_VERSION}-{mid}"
        headers = {
            "Authorization": f"Bearer {account.credentials.access_token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "x-amzn-codewhisperer-optout": "true",
            "x-amzn-kiro-agent-mode": "vibe",
            "x-amz-user-agent": f"aws-sdk-js/{SDK_VERSION} {agent}",
            "User-Agent": (
                f"aws-sdk-js/{SDK_VERSION} ua/2.1 os/linux lang/js md/nodejs#20.0.0 "
                f"api/{api}#{SDK_VERSION} m/E {agent}"
            ),
            "amz-sdk-invocation-id": str(uuid.uuid4()),
            "amz-sdk-request": "attempt=1; max=1",
        }
        if account.auth_kind is AuthKind.API_KEY:
            headers["tokentype"] = "API_KEY"
        elif account.auth_kind is AuthKind.EXTERNAL_IDP:
            headers["TokenType"] = "EXTERNAL_IDP"
        return headers

    @contextlib.asynccontextmanager
    async def chat(
        self, account: UpstreamAccount, body: Mapping[str, Any] | bytes
    ) -> AsyncIterator[AsyncIterator[list[Frame]]]:
        """POST generateAssistantResponse and yield its decoded frames, a list per network chunk.

        `body` is the payload, or its encoding already made (`BuiltPayload.encoded`).

        Leaving the context before the stream ended (consumer cancelled, idle timeout, client
        gone) aborts the upstream response instead of draining it.
        """
        base = self.endpoints.kiro_url(account.region)
        data = body if isinstance(body, bytes) else wirejson.dumps(body)
        headers = self._api_headers(account, "codewhispererstreaming")
        url = f"{base}/generateAssistantResponse"
        async with self._exchange(
            account.id,
            base,
            account.proxy_url,
            "POST",
            url,
            headers=headers,
            data=data,
            kiro=_Kiro("generateAssistantResponse", account.region),
        ) as response:
            yield self._frames(response)

    async def _frames(self, response: aiohttp.ClientResponse) -> AsyncIterator[list[Frame]]:
        decoder = FrameDecoder()
        with _mapped(
            "Kiro's stream went silent past the idle timeout",
            "connection to Kiro broke",
            truncated="Kiro's response body ended abnormally",
        ):
            async for chunk in response.content.iter_any():
                if frames := decoder.feed(chunk):
                    yield frames
        decoder.finish()

    @contextlib.asynccontextmanager
    async def _exchange(
        self,
        owner: str,
        base: str,
        proxy_url: str | None,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        data: bytes | None = None,
        kiro: _Kiro | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """One request on the pool of `owner` to `base` through `proxy_url`
        (`UpstreamAccount.proxy_url`); yields its response once the head arrived. `kiro`: the
        Kiro operation it is, whose error answers kirod does not know are drift (None: an auth
        host's).

        Leaving the block returns the connection to the pool if the whole answer arrived (read
        or not), and closes it otherwise: an answer is never drained.
        """
        async with self._pools.lease(owner, base, proxy_url) as pool:
            response = await self._send(
                pool, _host(base), method, url, headers=headers, data=data, kiro=kiro
            )
            try:
                yield response
            finally:
                if response.content.is_eof():
                    response.release()
                else:
                    response.close()

    async def _send(
        self,
        pool: Pool,
        host: str,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        data: bytes | None = None,
        kiro: _Kiro | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request; an error status is read (bounded) and raised as classified. A
        connection that cannot be made is the machine's or the route's (`outages`)."""
        try:
            with _mapped("Kiro did not answer in time", "cannot reach Kiro"):
                response = await pool.request(method, url, headers=headers, data=data)
            if response.status == 407 and pool.route.request_proxy is not None:
                # The proxy's answer, not Kiro's (a plain-forwarded http target): no connection.
                response.close()
                why = "the proxy refused kirod's credentials (407)"
                raise UpstreamConnectionError(why, unconnected=why)
        except UpstreamConnectionError as exc:
            unconnected = exc.unconnected
            if unconnected is not None and self.outages.failed(host, pool.route.proxy, unconnected):
                raise UpstreamUnreachable(str(exc), unconnected) from None
            raise
        self.outages.connected(host, pool.route.proxy)
        if response.status >= 400:
            try:
                body = await _read_bounded(response, MAX_ERROR_BODY, truncate=True) or b""
            except (TimeoutError, aiohttp.ClientError):
                body = b""
            finally:
                response.close()
            if kiro is None:
                raise classify(response.status, response.headers, body)
            raise classify(
                response.status,
                response.headers,
                body,
                drift=self.drift,
                where=kiro.operation,
                region=kiro.region,
                sent=data,
            )
        return response

    async def _json(
        self,
        owner: str,
        base: str,
        proxy_url: str | None,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: Mapping[str, Any] | None = None,
        data: bytes | None = None,
        kiro: _Kiro | None = None,
    ) -> dict[str, Any]:
        if body is not None:
            data = json.dumps(body).encode()
        async with self._exchange(
            owner, base, proxy_url, method, url, headers=headers, data=data, kiro=kiro
        ) as response:
            with _mapped("Kiro did not finish its answer in time", "connection to Kiro broke"):
                raw = await _read_bounded(response, MAX_JSON_ANSWER)
        if raw is None:
            raise UpstreamProtocolError(
                f"Kiro's answer exceeds {MAX_JSON_ANSWER // (1024 * 1024)} MiB; it was not read"
            )
        try:
            doc = json.loads(raw)
        except ValueError:
            raise UpstreamProtocolError("Kiro answered with invalid JSON") from None
        if not isinstance(doc, dict):
            raise UpstreamProtocolError("Kiro answered with a non-object JSON document")
        return doc

    def _profile_query(self, account: UpstreamAccount) -> str:
        return f"&profileArn={quote(account.profile_arn, safe='')}" if account.profile_arn else ""

    async def usage_limits(self, account: UpstreamAccount) -> dict[str, Any]:
        """getUsageLimits (docs/KIRO-PROTOCOL.md §6.1)."""
        base = self.endpoints.kiro_url(account.region)
        url = (
            f"{base}/getUsageLimits?origin=AI_EDITOR&resourceType=AGENTIC_REQUEST"
            f"&isEmailRequired=true{self._profile_query(account)}"
        )
        headers = self._api_headers(account, "codewhispererruntime")
        kiro = _Kiro("getUsageLimits", account.region)
        return await self._json(
            account.id, base, account.proxy_url, "GET", url, headers=headers, kiro=kiro
        )

    async def set_overage(self, account: UpstreamAccount, enabled: bool) -> None:
        """setUserPreference with the overage switch Kiro IDE's settings flip
        (docs/KIRO-PROTOCOL.md §6.5): past the plan's credits, Kiro goes on serving and bills the
        overage while it is on. A plan that cannot use overage (Free) is answered 403, raised as
        `Failure.FORBIDDEN`.

        The answer carries nothing kirod reads: getUsageLimits reports the status.
        """
        base = self.endpoints.kiro_url(account.region)
        status = "ENABLED" if enabled else "DISABLED"
        body: dict[str, Any] = {"overageConfiguration": {"overageStatus": status}}
        if account.profile_arn:
            body["profileArn"] = account.profile_arn
        headers = self._api_headers(account, "codewhispererruntime")
        url = f"{base}/setUserPreference"
        data = json.dumps(body).encode()
        kiro = _Kiro("setUserPreference", account.region)
        async with self._exchange(
            account.id, base, account.proxy_url, "POST", url, headers=headers, data=data, kiro=kiro
        ):
            pass  # an error status was raised; a success says nothing more

    async def list_models(
        self, account: UpstreamAccount, max_pages: int = 20
    ) -> list[dict[str, Any]]:
        """ListAvailableModels, all pages (docs/KIRO-PROTOCOL.md §6.2)."""
        base = self.endpoints.kiro_url(account.region)
        headers = self._api_headers(account, "codewhispererruntime")
        pages: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(max_pages):
            url = f"{base}/ListAvailableModels?origin=AI_EDITOR{self._profile_query(account)}"
            if token:
                url += f"&nextToken={quote(token, safe='')}"
            page = await self._json(
                account.id,
                base,
                account.proxy_url,
                "GET",
                url,
                headers=headers,
                kiro=_Kiro("ListAvailableModels", account.region),
            )
            pages.append(page)
            next_token = page.get("nextToken")
            token = next_token if isinstance(next_token, str) and next_token else None
            if token is None:
                break
        return pages

    async def list_profiles(
        self, account: UpstreamAccount, region: str, max_pages: int = 20
    ) -> list[dict[str, Any]]:
        """ListAvailableProfiles in `region`, every page (awsJson1.0 on `POST /`, following
        `nextToken`; docs/UPSTREAM.md §5.3): the profile objects, `{arn, profileName, …}`."""
        base = self.endpoints.kiro_url(region)
        headers = self._api_headers(account, "codewhispererruntime")
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["x-amz-target"] = "AmazonCodeWhispererService.ListAvailableProfiles"
        profiles: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(max_pages):
            body = {"nextToken": token} if token else {}
            page = await self._json(
                account.id,
                base,
                account.proxy_url,
                "POST",
                f"{base}/",
                headers=headers,
                body=body,
                kiro=_Kiro("ListAvailableProfiles", region),
            )
            found = page.get("profiles")
            if isinstance(found, list):
                profiles.extend(item for item in found if isinstance(item, dict))
            next_token = page.get("nextToken")
            token = next_token if isinstance(next_token, str) and next_token else None
            if token is None:
                break
        return profiles

    async def get_profile(self, account: UpstreamAccount, region: str) -> dict[str, Any] | None:
        """GetProfile in `region` (awsJson1.0, body `{}`): the caller's own profile object, the
        one way a `ksk_` API key learns its profile (docs/UPSTREAM.md §5.3)."""
        base = self.endpoints.kiro_url(region)
        headers = self._api_headers(account, "codewhispererruntime")
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["x-amz-target"] = "AmazonCodeWhispererService.GetProfile"
        answer = await self._json(
            account.id,
            base,
            account.proxy_url,
            "POST",
            f"{base}/",
            headers=headers,
            body={},
            kiro=_Kiro("GetProfile", region),
        )
        profile = answer.get("profile")
        return profile if isinstance(profile, dict) else None

    async def mcp(self, account: UpstreamAccount, call: Mapping[str, Any]) -> dict[str, Any]:
        """One JSON-RPC call to Kiro's MCP endpoint (web search; docs/UPSTREAM.md §2.1).

        The profile travels both ways reported to be required: the `x-amzn-kiro-profile-arn`
        header and a root-level `profileArn` in the body.
        """
        base = self.endpoints.kiro_url(account.region)
        headers = self._api_headers(account, "codewhispererstreaming")
        body = dict(call)
        if account.profile_arn:
            headers["x-amzn-kiro-profile-arn"] = account.profile_arn
            body["profileArn"] = account.profile_arn
        return await self._json(
            account.id,
            base,
            account.proxy_url,
            "POST",
            f"{base}/mcp",
            headers=headers,
            body=body,
            kiro=_Kiro("mcp", account.region),
        )

    # -- auth hosts ---------------------------------------------------------------------------

    async def post_json(
        self,
        owner: str,
        url: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        proxy_url: str | None = None,
    ) -> dict[str, Any]:
        """POST JSON to an auth host (refresh, OIDC) through the same proxy and timeouts.

        `proxy_url`: the account's (`UpstreamAccount.proxy_url`); None takes the global one.

        Error statuses surface as `UpstreamHttpError` whose `.reason` is the OAuth `error` code
        when the body carries one (`invalid_grant`, `authorization_pending`, …).
        """
        origin = "/".join(url.split("/", 3)[:3])
        sent = {"Content-Type": "application/json", "Accept": "application/json"}
        sent.update(headers or {})
        return await self._json(owner, origin, proxy_url, "POST", url, headers=sent, body=body)

    async def post_form(
        self, owner: str, url: str, fields: Mapping[str, str], *, proxy_url: str | None = None
    ) -> dict[str, Any]:
        """POST an `application/x-www-form-urlencoded` body (an OAuth token endpoint) and read
        its JSON answer; errors and `proxy_url` as `post_json`'s."""
        origin = "/".join(url.split("/", 3)[:3])
        sent = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        data = urlencode(fields).encode()
        return await self._json(owner, origin, proxy_url, "POST", url, headers=sent, data=data)
