"""`/health` (liveness, unauthenticated) and `/ready` (can this daemon serve a model request?).

A full disk makes the daemon not ready (`disk_full`, with a sentence naming the file) until a
write commits again: requests still pass, but what they should store is refused.
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from kirod.http.ingress import REQUEST_ID
from kirod.http.services import SERVICES


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def ready(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    reasons: list[str] = []
    if services.db.damaged is not None:
        reasons.append("database_damaged")  # read-only: nothing that writes can be served
    if not await services.db.ping():
        reasons += ["authentication_store_unavailable", "reasoning_replay_store_unavailable"]
    else:
        if await services.accounts.count_active() == 0:
            reasons.append("no_active_accounts")
        if not await services.responses.available():
            reasons.append("reasoning_replay_store_unavailable")
    if services.models.catalog_unavailable():
        reasons.append("model_catalog_unavailable")
    body: dict[str, object] = {}
    if outages := services.outages.current():
        # The machine cannot reach Kiro: said first, as it explains the others.
        reasons.insert(0, "kiro_unreachable")
        body["unreachable"] = [dataclasses.asdict(outage) for outage in outages]
    if services.db.full:
        reasons.append("disk_full")
        body["message"] = (
            f"disk full: kirod cannot write to {services.db.path}; free space on its filesystem"
        )
    if not reasons:
        return web.json_response({"status": "ready"})
    return web.json_response(
        {
            "status": "unavailable",
            "reason": reasons[0],
            "reasons": reasons,
            **body,
            "request_id": request[REQUEST_ID],
        },
        status=503,
    )
