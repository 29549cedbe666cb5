"""Legacy OpenAI Chat Completions, served only with `enable_chat_completions = true`."""

from __future__ import annotations

import secrets

from aiohttp import web

from kirod.errors import ApiError, ErrorKind
from kirod.http.body import read_json
from kirod.http.caching import asks_cache, cache_headers
from kirod.http.credits import credits_headers
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.services import SERVICES
from kirod.http.streaming import collect, stream_sse
from kirod.protocols.chat import ChatStreamEncoder, chat_completion_json, decode_chat
from kirod.protocols.sse import COMMENT_KEEPALIVE


async def create_chat_completion(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    if not services.settings.enable_chat_completions:
        raise ApiError(
            ErrorKind.NOT_FOUND,
            "/v1/chat/completions is off; set enable_chat_completions = true to serve it, or "
            "use /v1/responses",
            code="not_found",
        )
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    decoded = await decode_model_first(
        services, body, lambda: decode_chat(body, request.headers, request_id=request[REQUEST_ID])
    )
    completion_id = "chatcmpl-" + secrets.token_hex(12)
    async with services.dispatcher.open(
        decoded.request, tenant=request[API_KEY_ID], cache=asks_cache(request)
    ) as dispatch:
        model = dispatch.model_name
        if decoded.request.stream:
            encoder = ChatStreamEncoder(
                completion_id=completion_id,
                model=model,
                request_id=request[REQUEST_ID],
                include_usage=decoded.include_usage,
            )
            return await stream_sse(
                request,
                dispatch.events,
                encoder.feed,
                start=encoder.start(),
                heartbeat=COMMENT_KEEPALIVE,
            )
        completion = await collect(dispatch.events)
    return web.json_response(
        chat_completion_json(completion, completion_id=completion_id, model=model),
        headers={
            **credits_headers(request.headers, completion.usage),
            **cache_headers(request, dispatch),
        },
    )
