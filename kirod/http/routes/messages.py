"""Anthropic Messages: `POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

from aiohttp import web

from kirod.canonical.token_count import estimate_request_tokens
from kirod.http.body import read_json
from kirod.http.caching import asks_cache, cache_headers
from kirod.http.credits import credits_headers
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.services import SERVICES
from kirod.http.streaming import collect, stream_sse
from kirod.protocols.anthropic import (
    MessagesStreamEncoder,
    decode_count_tokens,
    decode_messages,
    message_json,
)


async def create_message(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    canonical = await decode_model_first(
        services,
        body,
        lambda: decode_messages(
            body, request.headers, request_id=request[REQUEST_ID], signer=services.signer
        ),
    )
    async with services.dispatcher.open(
        canonical, tenant=request[API_KEY_ID], cache=asks_cache(request)
    ) as dispatch:
        if canonical.stream:
            encoder = MessagesStreamEncoder(
                message_id=dispatch.message_id,
                model=dispatch.model_name,
                signer=services.signer,
                request_id=request[REQUEST_ID],
            )
            return await stream_sse(
                request, dispatch.events, encoder.feed, heartbeat=encoder.ping()
            )
        completion = await collect(dispatch.events)
    return web.json_response(
        message_json(
            completion,
            message_id=dispatch.message_id,
            model=dispatch.model_name,
            signer=services.signer,
        ),
        headers={
            **credits_headers(request.headers, completion.usage),
            **cache_headers(request, dispatch),
        },
    )


async def count_tokens(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    canonical = await decode_model_first(
        services,
        body,
        lambda: decode_count_tokens(body, request.headers, request[REQUEST_ID], services.signer),
    )
    # Counting needs no upstream call, but the model and the key's scope are judged as for
    # /v1/messages: a count for a model the request could not use would mislead.
    model = (await services.models.resolve_known(canonical.model)).info
    services.gate.authorize_model(request[API_KEY_ID], model)
    return web.json_response({"input_tokens": estimate_request_tokens(canonical)})
