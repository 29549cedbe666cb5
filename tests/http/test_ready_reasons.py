"""`/ready`'s reasons from the services it asks, including `model_catalog_unavailable`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kirod.http.ingress import REQUEST_ID
from kirod.http.routes.health import ready
from kirod.http.services import SERVICES, Services


class _Stub:
    def __init__(self, **answers: Any) -> None:
        self._answers = answers

    def __getattr__(self, name: str) -> Any:
        answer = self._answers[name]
        if name == "damaged":  # an attribute, not a call
            return answer

        async def call(*_: object) -> Any:
            return answer

        def plain(*_: object) -> Any:
            return answer

        return call if name != "catalog_unavailable" else plain


def _services(*, catalog_unavailable: bool, active: int = 1) -> Services:
    return cast(
        Services,
        type(
            "S",
            (),
            {
                "db": _Stub(ping=True, damaged=None),
                "accounts": _Stub(count_active=active),
                "responses": _Stub(available=True),
                "models": _Stub(catalog_unavailable=catalog_unavailable),
            },
        )(),
    )


@web.middleware
async def _request_id(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    request[REQUEST_ID] = "req_test"
    return await handler(request)


@pytest.mark.parametrize(
    ("unavailable", "active", "status", "reasons"),
    [
        (False, 1, 200, None),
        (True, 1, 503, ["model_catalog_unavailable"]),
        (True, 0, 503, ["no_active_accounts", "model_catalog_unavailable"]),
    ],
)
async def test_ready_names_an_unreadable_model_catalog(
    unavailable: bool, active: int, status: int, reasons: list[str] | None
) -> None:
    app = web.Application(middlewares=[_request_id])
    app[SERVICES] = _services(catalog_unavailable=unavailable, active=active)
    app.router.add_get("/ready", ready)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        answer = await client.get("/ready")
        assert answer.status == status
        body = await answer.json()
        assert body.get("reasons") == reasons
