"""The aiohttp application that serves the fake's state (`state.py`'s `FakeKiro`).

One server answers every host kirod talks to (Q API, Kiro auth, SSO OIDC), so tests point all
three base URLs at it. `routing.py` names the operation a request asks for
(docs/KIRO-PROTOCOL.md §1.3); its handler is `chat.py`'s, `qapi.py`'s or `auth.py`'s, and every
request is recorded here first. Test controls live under `/__fake__/` (see `admin.py`) so another
process can drive the fake.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kirod.testing.fake_kiro import admin, auth, chat, qapi
from kirod.testing.fake_kiro.routing import host_region, operation_of
from kirod.testing.fake_kiro.state import FakeKiro, RecordedRequest
from kirod.testing.fake_kiro.tokens import TokenRegistry
from kirod.testing.fake_kiro.wire import error, json_object

Handler = Callable[[FakeKiro, web.Request, RecordedRequest], Awaitable[web.StreamResponse]]

_GET_POST = frozenset({"GET", "POST"})
_POST = frozenset({"POST"})
_GET = frozenset({"GET"})


def build_app(fake: FakeKiro) -> web.Application:
    """The fake service: admin routes first, then every other path through `_dispatch`."""
    app = web.Application(
        client_max_size=16 * 1024 * 1024, handler_args={"handler_cancellation": True}
    )
    app.add_routes(admin.routes(fake))

    async def dispatch(request: web.Request) -> web.StreamResponse:
        return await _dispatch(fake, request)

    app.router.add_route("*", "/{path:.*}", dispatch)
    return app


async def _dispatch(fake: FakeKiro, request: web.Request) -> web.StreamResponse:
    region, path = host_region(request.path)
    operation = operation_of(request, path)
    if operation is None:
        return error(404, {"message": "Unknown operation."}, "UnknownOperationException")
    handler, methods = _HANDLERS[operation]
    if request.method not in methods:
        return error(405, {"message": "Method not allowed."}, "MethodNotAllowedException")
    connection = await fake.connections.admit(request, operation)
    if connection is None:  # a connection fault met it: never sent, the connection is gone
        return web.Response(status=499)
    record = RecordedRequest(
        operation=operation,
        method=request.method,
        path=request.path,
        query=dict(request.query),
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.read(),
        region=region,
        connection=connection,
    )
    fake.record_request(record)
    status = 499  # the client went away before the answer was complete
    try:
        response = await handler(fake, request, record)
        padding = fake.oversized(operation)
        if padding and isinstance(response, web.Response) and response.body is not None:
            fake.count(f"oversized:{operation}")
            response = await _padded(request, response, padding)
        status = response.status
        return response
    finally:
        fake.finish_request(record, status)
        fake.connections.done(request)


PAD_CHUNK = 64 * 1024


async def _padded(request: web.Request, answer: web.Response, nbytes: int) -> web.StreamResponse:
    """`answer`'s JSON object with a leading `"padding"` member of about `nbytes`, chunked and
    without Content-Length, so the client can only find the size by reading."""
    assert isinstance(answer.body, bytes)
    body = answer.body
    response = web.StreamResponse(status=answer.status, headers={"x-amzn-RequestId": "padded"})
    response.content_type = "application/json"
    chunk = b"x" * PAD_CHUNK
    with contextlib.suppress(ConnectionError):  # the client stopped reading: that is the test
        await response.prepare(request)
        await response.write(b'{"padding":"')
        for _ in range(max(1, nbytes // PAD_CHUNK)):
            await response.write(chunk)
        await response.write(b'"' + (b"," + body[1:] if body.strip() != b"{}" else b"}"))
        await response.write_eof()
    return response


def _auth_handler(
    handler: Callable[[TokenRegistry, web.Request, dict[str, Any]], Awaitable[web.Response]],
) -> Handler:
    async def bound(
        fake: FakeKiro, request: web.Request, record: RecordedRequest
    ) -> web.StreamResponse:
        return await handler(fake.tokens, request, json_object(record.body))

    return bound


def _form_handler(
    handler: Callable[[TokenRegistry, web.Request, dict[str, Any]], Awaitable[web.Response]],
) -> Handler:
    """`_auth_handler` for a form-encoded body (an OAuth token endpoint)."""

    async def bound(
        fake: FakeKiro, request: web.Request, record: RecordedRequest
    ) -> web.StreamResponse:
        fields = urllib.parse.parse_qs(record.body.decode("utf-8", "replace"))
        return await handler(fake.tokens, request, {k: v[0] for k, v in fields.items()})

    return bound


_HANDLERS: dict[str, tuple[Handler, frozenset[str]]] = {
    "chat": (chat.generate_assistant_response, _POST),
    "usage": (qapi.get_usage_limits, _GET_POST),
    "models": (qapi.list_available_models, _GET_POST),
    "profiles": (qapi.list_available_profiles, _GET_POST),
    "profile": (qapi.get_profile, _POST),
    "mcp": (qapi.invoke_mcp, _POST),
    "preference": (qapi.set_user_preference, _POST),
    "social_refresh": (_auth_handler(auth.social_refresh), _POST),
    "social_login": (_auth_handler(auth.social_login), _GET),
    "social_token": (_auth_handler(auth.social_token), _POST),
    "oidc_register": (_auth_handler(auth.oidc_register), _POST),
    "oidc_device": (_auth_handler(auth.oidc_device_authorization), _POST),
    "oidc_token": (_auth_handler(auth.oidc_token), _POST),
    "external_idp_token": (_form_handler(auth.external_idp_token), _POST),
}
