"""Ollama's API under /api/ (`enable_ollama_api = true`): version, tags, show and chat.

For clients that speak only Ollama, such as VS Code Copilot's Ollama provider, which discovers
models here (`/api/version` at least 0.6.4, `/api/tags`, `/api/show`) and then chats over
`/v1/chat/completions`. The models are /v1/models' (the same catalog and key scope); chat goes
through the same pipeline as every other codec. When the API is off, every /api/ path is a 404
naming the setting, before any key is asked for. Errors use Ollama's `{"error": "…"}`
(`kirod.http.ingress.family_for`).
"""

from __future__ import annotations

import time

from aiohttp import web

from kirod.config import Settings
from kirod.errors import ApiError, ErrorKind
from kirod.http.body import read_json
from kirod.http.caching import asks_cache, cache_headers
from kirod.http.credits import credits_headers
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.routes.models import offered_catalog, visible_models
from kirod.http.services import SERVICES
from kirod.http.streaming import NDJSON_HEADERS, collect, stream_sse
from kirod.protocols.ollama import (
    VERSION,
    OllamaStreamEncoder,
    Timing,
    decode_ollama_chat,
    decode_show,
    ollama_chat_json,
    requested_model,
    show_json,
    tags_entry,
)


def require_enabled(settings: Settings) -> None:
    if not settings.enable_ollama_api:
        raise ApiError(
            ErrorKind.NOT_FOUND,
            "the Ollama API (/api/*) is off; set enable_ollama_api = true to serve it",
            code="not_found",
        )


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION})


async def tags(request: web.Request) -> web.Response:
    rows = visible_models(request, await offered_catalog(request))
    return web.json_response({"models": [tags_entry(listed) for listed in rows]})


async def show(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    name = decode_show(body)
    info = services.models.lookup(name, await offered_catalog(request)).info
    if not services.gate.allows(request[API_KEY_ID], info):
        raise ApiError(
            ErrorKind.NOT_FOUND,
            f"model '{info.public_id}' is not available to this API key",
            code="model_not_found",
        )
    return web.json_response(show_json(info))


async def chat(request: web.Request) -> web.StreamResponse:
    started_ns = time.monotonic_ns()
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    canonical = await decode_model_first(
        services,
        body,
        lambda: decode_ollama_chat(body, request_id=request[REQUEST_ID]),
        requested_model,
    )
    async with services.dispatcher.open(
        canonical, tenant=request[API_KEY_ID], cache=asks_cache(request)
    ) as dispatch:
        model = dispatch.model_name
        if canonical.stream:
            encoder = OllamaStreamEncoder(model=model, started_ns=started_ns)
            return await stream_sse(
                request,
                dispatch.events,
                encoder.feed,
                heartbeat=encoder.keepalive(),
                headers=NDJSON_HEADERS,
            )
        completion = await collect(dispatch.events)
    timing = Timing(started_ns, dispatch.first_ns, time.monotonic_ns())
    return web.json_response(
        ollama_chat_json(completion, model=model, timing=timing),
        headers={
            **credits_headers(request.headers, completion.usage),
            **cache_headers(request, dispatch),
        },
    )
