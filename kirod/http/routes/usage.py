"""`GET /v1/usage`: the calling API key's Kiro credits, and the pool's remaining quota.

Gated by the API key like every `/v1` route; the document names the key by its id and the
accounts by their opaque ids (`kirod.control.spending`), never a token or an email.
"""

from __future__ import annotations

from aiohttp import web

from kirod.http.ingress import API_KEY_ID
from kirod.http.services import SERVICES


async def get_usage(request: web.Request) -> web.Response:
    spending = request.app[SERVICES].spending
    return web.json_response(await spending.report(request[API_KEY_ID]))
