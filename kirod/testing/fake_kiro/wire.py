"""The Q API's wire conventions, shared by its handlers: the bearer token (with the
`TokenType` header of external-IdP logins) checked before a handler runs (`signed_in`), AWS-JSON
errors named in `x-amzn-errortype`, and JSON bodies read leniently (anything but a JSON object
reads as `{}`).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from kirod.testing.fake_kiro.script import BEARER_INVALID_BODY
from kirod.testing.fake_kiro.state import FakeKiro, RecordedRequest
from kirod.testing.fake_kiro.tokens import Account, TokenRegistry

R = TypeVar("R", bound=web.StreamResponse)


def authenticate(tokens: TokenRegistry, request: web.Request) -> Account | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return tokens.authenticate(token.strip(), request.headers.get("tokentype"))


def bearer_invalid() -> web.Response:
    return error(403, BEARER_INVALID_BODY, "AccessDeniedException")


def signed_in(
    handler: Callable[[FakeKiro, web.Request, RecordedRequest, Account], Awaitable[R]],
) -> Callable[[FakeKiro, web.Request, RecordedRequest], Awaitable[R | web.Response]]:
    """`handler`, given the account whose bearer token the request carries (noted on its
    record); a request without a valid one is answered Kiro's 403 instead."""

    @functools.wraps(handler)
    async def checked(
        fake: FakeKiro, request: web.Request, record: RecordedRequest
    ) -> R | web.Response:
        account = authenticate(fake.tokens, request)
        if account is None:
            return bearer_invalid()
        record.account_id = account.account_id
        return await handler(fake, request, record, account)

    return checked


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body) if body else {}
    except (ValueError, RecursionError):
        return {}
    return as_dict(value)


def error(
    status: int,
    body: Mapping[str, Any],
    error_type: str,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """An AWS-JSON error: the code in `x-amzn-errortype`, `message`/`reason` in the body."""
    return web.json_response(
        dict(body),
        status=status,
        headers={
            "x-amzn-errortype": error_type,
            "x-amzn-RequestId": str(uuid.uuid4()),
            **(headers or {}),
        },
    )
