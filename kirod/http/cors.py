"""CORS for browser apps that call the API from the page (opt-in: `cors_origins`).

Only the API routes (`/v1/…`, `/v1beta/…`, `/api/…`: `ingress.path_family`) take part; the
console has its own guard and never carries CORS headers. A preflight from a listed origin is
answered 204 before the key gate (browsers send no key on it) and allows the headers it asks
for, once they are checked to be header names: the SDKs send more every release
(`x-stainless-*`), and the origin is trusted already. A preflight from any other origin is
answered 403 with no CORS headers, so the browser refuses the request. Actual requests from a
listed origin get `Access-Control-Allow-Origin` on every answer, errors and streams included
(`on_response_prepare`). No `Access-Control-Allow-Credentials` is ever sent: the API
authenticates by header, not by cookie.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from kirod.errors import ApiError, ErrorKind
from kirod.http.ingress import Handler, path_family

ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
# Response headers a page's script may read beyond the safelisted ones: what kirod sets and the
# SDKs read (request ids, when to retry) and kirod's own opt-in headers.
EXPOSED_HEADERS = (
    "request-id, x-request-id, retry-after, x-should-retry, x-kirod-cache, x-kirod-credits"
)
MAX_AGE_S = 7200  # Chromium's ceiling; a preflight per two hours per URL
MAX_REQUESTED_HEADERS = 64
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")  # RFC 9110 token, lower case as browsers send it

CORS_ORIGIN = web.RequestKey("cors_origin", str)  # a listed Origin: its answer carries CORS headers


def is_api_request(request: web.Request) -> bool:
    return path_family(request.method, request.path) is not None


def _requested_headers(request: web.Request) -> str:
    """The preflight's `Access-Control-Request-Headers`, checked, as the list to allow."""
    raw = request.headers.get(hdrs.ACCESS_CONTROL_REQUEST_HEADERS, "")
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    if len(names) > MAX_REQUESTED_HEADERS or not all(_TOKEN.fullmatch(name) for name in names):
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"Access-Control-Request-Headers must list at most {MAX_REQUESTED_HEADERS} header "
            "names",
            code="invalid_preflight",
        )
    return ", ".join(names)


def _preflight(request: web.Request, origin: str) -> web.Response:
    headers: dict[str, str] = {
        hdrs.ACCESS_CONTROL_ALLOW_METHODS: ALLOWED_METHODS,
        hdrs.ACCESS_CONTROL_MAX_AGE: str(MAX_AGE_S),
    }
    allowed = _requested_headers(request)
    if allowed:
        headers[hdrs.ACCESS_CONTROL_ALLOW_HEADERS] = allowed
    # Chromium's Private Network Access: a public page asking for a loopback service.
    if request.headers.get("Access-Control-Request-Private-Network") == "true":
        headers["Access-Control-Allow-Private-Network"] = "true"
    request[CORS_ORIGIN] = origin
    return web.Response(status=204, headers=headers)


def make_cors(origins: Iterable[str]) -> Middleware:
    """Between the ingress (ids, log, envelopes) and the key gate, which a preflight skips."""
    listed = frozenset(origins)

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is None or not is_api_request(request):
            return await handler(request)
        preflight = (
            request.method == hdrs.METH_OPTIONS
            and hdrs.ACCESS_CONTROL_REQUEST_METHOD in request.headers
        )
        if origin not in listed:
            if preflight:
                raise ApiError(
                    ErrorKind.PERMISSION,
                    "this origin may not call kirod from a browser; add it to cors_origins",
                    code="origin_not_allowed",
                )
            # Not refused: a non-browser client may send any Origin, and without CORS headers
            # a browser keeps the answer from the page anyway.
            return await handler(request)
        if preflight:
            return _preflight(request, origin)
        request[CORS_ORIGIN] = origin
        return await handler(request)

    return cors


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Runs on every response before its headers go out, streamed ones and errors included."""
    if not is_api_request(request):
        return
    vary = response.headers.get(hdrs.VARY)
    if vary is None:
        response.headers[hdrs.VARY] = "Origin"
    elif "origin" not in vary.lower():
        response.headers[hdrs.VARY] = f"{vary}, Origin"
    origin = request.get(CORS_ORIGIN)
    if origin is not None:
        response.headers[hdrs.ACCESS_CONTROL_ALLOW_ORIGIN] = origin
        response.headers[hdrs.ACCESS_CONTROL_EXPOSE_HEADERS] = EXPOSED_HEADERS
