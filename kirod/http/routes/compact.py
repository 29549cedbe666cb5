"""`POST /v1/responses/compact`: Codex's remote compaction, v1 wire (unary JSON).

The body is a Responses request; the answer is `{"output": [items]}`: the newest user messages
verbatim, then exactly one `compaction` item sealing the summary of the whole conversation (see
`protocols/responses/compaction.py`), `previous_response_id`'s stored turns included. Codex
replaces its history with these items.
"""

from __future__ import annotations

import secrets
import time

from aiohttp import web

from kirod.http.body import read_json
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.routes.responses import prepare
from kirod.http.services import SERVICES
from kirod.http.streaming import collect
from kirod.protocols.responses import response_items
from kirod.protocols.responses.compaction import retained_user_messages
from kirod.protocols.responses.response import usage_json


async def compact_response(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    if isinstance(body, dict):
        body = {**body, "stream": False, "store": False}
    decoded, history = await prepare(
        services,
        body,
        request.headers,
        request_id=request[REQUEST_ID],
        tenant=request[API_KEY_ID],
        compact=True,
    )
    response_id = "resp_" + secrets.token_hex(12)
    async with services.dispatcher.open(decoded.request, tenant=request[API_KEY_ID]) as dispatch:
        completion = await collect(dispatch.events)
    compacted = response_items(
        completion, response_id=response_id, echo=decoded.echo, reasoning_box=services.reasoning_box
    )
    return web.json_response(
        {
            "id": response_id,
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*retained_user_messages([*history, *decoded.input_items]), *compacted],
            "usage": usage_json(completion.usage, ""),
        }
    )
