"""The real kirod daemon, serving three extra routes that the lifecycle and ingress tests need.

/test/slow?s=N sleeps (an in-flight request to drain), /test/echo reads a JSON body through the
real bounded reader, /test/boom raises an exception whose text must never reach a client.
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web

from kirod.config import load_service_env, load_settings
from kirod.daemon import lifecycle
from kirod.daemon.logging import configure
from kirod.http.app import Route
from kirod.http.body import read_json
from kirod.http.services import SERVICES

BOOM_DETAIL = "kaboom: token=sk-secret-detail at /home/someone/private/path"


async def slow(request: web.Request) -> web.Response:
    seconds = float(request.query.get("s", "1"))
    await asyncio.sleep(seconds)
    return web.json_response({"slept": seconds})


async def echo(request: web.Request) -> web.Response:
    limit = request.app[SERVICES].settings.max_request_body_bytes
    return web.json_response({"received": await read_json(request, limit)})


async def boom(request: web.Request) -> web.Response:
    raise RuntimeError(BOOM_DETAIL)


ROUTES = (
    Route("/test/slow", {"GET": slow}),
    Route("/test/echo", {"POST": echo}),
    Route("/test/boom", {"GET": boom}),
    Route("/v1/messages/test-echo", {"POST": echo}),
)


def main() -> int:
    settings = load_settings()
    configure(settings.log_level, settings.log_format)
    return asyncio.run(lifecycle.run(settings, load_service_env(), extra_routes=ROUTES))


if __name__ == "__main__":
    sys.exit(main())
