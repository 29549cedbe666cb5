"""The response cache at the edge: whether a request asks for it, and what its answer says.

A request asks with `x-kirod-cache: use`; only a key created with the cache permission is heard
(configured keys never). The dispatcher decides hit or miss (`kirod.dispatch.cache`); the answer
carries `x-kirod-cache: hit|miss`, and a hit's rpm admission is given back to its key.
"""

from __future__ import annotations

from aiohttp import web

from kirod.dispatch.pipeline import Dispatch
from kirod.http.ingress import API_KEY_ID
from kirod.http.services import SERVICES

HEADER = "x-kirod-cache"


def asks_cache(request: web.Request) -> bool:
    """The request asked for the cache and its key may use it."""
    asked = request.headers.get(HEADER, "").strip().lower() == "use"
    return asked and request.app[SERVICES].gate.caches(request[API_KEY_ID])


def cache_headers(request: web.Request, dispatch: Dispatch) -> dict[str, str]:
    """The answer's `x-kirod-cache` header, if the cache was asked; a hit is not counted."""
    if dispatch.cache is None:
        return {}
    if dispatch.cache == "hit":
        request.app[SERVICES].gate.refund(request[API_KEY_ID])
    return {HEADER: dispatch.cache}
