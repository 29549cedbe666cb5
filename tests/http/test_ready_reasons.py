"""`/ready`'s reasons from the services it asks, including `model_catalog_unavailable` and
`kiro_unreachable`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kirod.http.ingress import REQUEST_ID
from kirod.http.routes.health import ready
from kirod.http.services import SERVICES, Services
from kirod.upstream.outages import Outages

_PROPERTIES = {"full", "damaged"}  # read as values, not called


class _Stub:
    def __init__(self, **answers: Any) -> None:
        self._answers = answers

    def __getattr__(self, name: str) -> Any:
        answer = self._answers[name]
        if name in _PROPERTIES:
            return answer

        async def call(*_: object) -> Any:
            return answer

        def plain(*_: object) -> Any:
            return answer

        return call if name != "catalog_unavailable" else plain


def _services(
    *, catalog_unavailable: bool, active: int = 1, outages: Outages | None = None
) -> Services:
    return cast(
        Services,
        type(
            "S",
            (),
            {
                "db": _Stub(ping=True, full=False, damaged=None),
                "accounts": _Stub(count_active=active),
                "responses": _Stub(available=True),
                "models": _Stub(catalog_unavailable=catalog_unavailable),
                "outages": outages or Outages(),
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


async def test_ready_names_the_kiro_host_this_machine_cannot_reach() -> None:
    outages = Outages()
    outages.failed("q.us-east-1.amazonaws.com", None, "ClientConnectorError: Connection refused")
    app = web.Application(middlewares=[_request_id])
    app[SERVICES] = _services(catalog_unavailable=False, outages=outages)
    app.router.add_get("/ready", ready)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        answer = await client.get("/ready")
        assert answer.status == 503
        body = await answer.json()
        assert (body["reason"], body["reasons"]) == ("kiro_unreachable", ["kiro_unreachable"])
        assert [o["host"] for o in body["unreachable"]] == ["q.us-east-1.amazonaws.com"]
        outages.connected("q.us-east-1.amazonaws.com", None)
        answer = await client.get("/ready")
        assert answer.status == 200
