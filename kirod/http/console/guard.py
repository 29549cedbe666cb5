"""The console's gate: every request is checked here before a handler sees it.

- `Host` must name the listener as the browser reached it on loopback (defeats DNS rebinding:
  a page on evil.example resolved to 127.0.0.1 still sends `Host: evil.example`).
- A request that changes anything needs the session's CSRF token in a header and an `Origin`
  of this very listener; a cross-site form can send neither.
- Every answer carries a strict Content-Security-Policy and refuses framing; none carries CORS
  headers, so no other origin may read an answer.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from kirod import log
from kirod.errors import ControlError
from kirod.http.console.sessions import ConsoleSessions, Session

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSRF_HEADER = "X-Kirod-Console-CSRF"
SESSION = web.RequestKey("console_session", Session)
SAFE_METHODS = frozenset({"GET", "HEAD"})

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def error(status: int, code: str, message: str) -> web.Response:
    """The control API's error shape, which the page's script shows as is."""
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class Guard:
    """`hosts`: the `Host` values the listener answers to; `cookie`: the session cookie's name
    (it names the port: browsers share cookies between ports of one host)."""

    def __init__(self, sessions: ConsoleSessions, hosts: frozenset[str], cookie: str) -> None:
        self.sessions = sessions
        self.hosts = hosts
        self.cookie = cookie

    def session_of(self, request: web.Request) -> Session | None:
        session_id = request.cookies.get(self.cookie)
        return self.sessions.find(session_id) if session_id else None

    def same_origin(self, request: web.Request) -> bool:
        return request.headers.get("Origin") == f"http://{request.host}"

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.host.lower() not in self.hosts:
            log.event(logger, "console_refused", reason="host", method=request.method)
            return error(403, "forbidden", "the console answers only on its loopback address")
        if request.method not in SAFE_METHODS and not self.same_origin(request):
            log.event(logger, "console_refused", reason="origin", method=request.method)
            return error(403, "forbidden", "cross-origin requests are refused")
        try:
            return await handler(request)
        except ControlError as exc:
            return error(exc.status, exc.code, exc.message)
        except web.HTTPNotFound:
            return error(404, "not_found", "no such console page")
        except web.HTTPMethodNotAllowed:
            return error(405, "method_not_allowed", "that method is not allowed here")
        except web.HTTPRequestEntityTooLarge:
            return error(413, "too_large", "the request body is too large")

    def signed_in(self, handler: Handler) -> Handler:
        """`handler` for a session only; one that changes state also needs the CSRF header."""

        async def checked(request: web.Request) -> web.StreamResponse:
            session = self.session_of(request)
            if session is None:
                raise ControlError(401, "signed_out", "sign in again with `kiroctl console`")
            if request.method not in SAFE_METHODS and not hmac.compare_digest(
                request.headers.get(CSRF_HEADER, ""), session.csrf
            ):
                log.event(logger, "console_refused", reason="csrf", method=request.method)
                raise ControlError(403, "forbidden", "the request lacks the console's CSRF token")
            request[SESSION] = session
            return await handler(request)

        return checked


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
