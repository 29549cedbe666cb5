"""OpenAI Responses: `POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`, input items.

With `store` (OpenAI's default) the response and its conversation are kept, so a later request
can continue it with `previous_response_id`; stored responses belong to the API key that made them.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import Any

from aiohttp import web

from kirod.errors import ApiError, ErrorKind
from kirod.http.body import read_json
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.services import SERVICES
from kirod.http.streaming import collect, stream_sse
from kirod.protocols.responses import (
    DecodedResponses,
    ResponsesStreamEncoder,
    decode_responses,
    response_items,
    response_json,
)
from kirod.protocols.sse import COMMENT_KEEPALIVE
from kirod.storage.responses import StoredResponse


def _not_found(response_id: str, param: str | None = None) -> ApiError:
    return ApiError(
        ErrorKind.NOT_FOUND if param is None else ErrorKind.INVALID_REQUEST,
        f"no stored response with id {response_id!r}",
        code="response_not_found" if param is None else "previous_response_not_found",
        param=param,
    )


async def _store(
    request: web.Request,
    decoded: DecodedResponses,
    response: dict[str, Any] | None,
    output: list[dict[str, Any]],
    history: list[dict[str, Any]],
) -> None:
    if not decoded.store or response is None or response.get("status") == "failed":
        return
    await request.app[SERVICES].responses.put(
        StoredResponse(
            id=response["id"],
            tenant=request[API_KEY_ID],
            created_at=time.time(),
            model=decoded.echo.model,
            previous_id=decoded.previous_response_id,
            response=response,
            input_items=list(decoded.input_items),
            history=[*history, *decoded.input_items, *output],
        )
    )


async def create_response(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    history: list[dict[str, Any]] = []
    previous = body.get("previous_response_id") if isinstance(body, dict) else None
    if isinstance(previous, str):
        stored = await services.responses.get(previous, request[API_KEY_ID])
        if stored is None:
            raise _not_found(previous, "previous_response_id")
        history = stored.history
    decoded = await decode_model_first(
        services,
        body,
        lambda: decode_responses(
            body,
            request.headers,
            request_id=request[REQUEST_ID],
            history=history,
            reasoning_box=services.reasoning_box,
        ),
    )
    response_id = "resp_" + secrets.token_hex(12)
    async with services.dispatcher.open(decoded.request, tenant=request[API_KEY_ID]) as dispatch:
        decoded = dataclasses.replace(
            decoded, echo=dataclasses.replace(decoded.echo, model=dispatch.model_name)
        )
        if decoded.request.stream:
            encoder = ResponsesStreamEncoder(
                response_id=response_id, echo=decoded.echo, reasoning_box=services.reasoning_box
            )
            streamed = await stream_sse(
                request,
                dispatch.events,
                encoder.feed,
                start=encoder.start(),
                heartbeat=COMMENT_KEEPALIVE,
            )
            await _store(request, decoded, encoder.response, encoder.history_items, history)
            return streamed
        completion = await collect(dispatch.events)
    document = response_json(
        completion,
        response_id=response_id,
        echo=decoded.echo,
        reasoning_box=services.reasoning_box,
    )
    output = response_items(
        completion, response_id=response_id, echo=decoded.echo, reasoning_box=services.reasoning_box
    )
    await _store(request, decoded, document, output, history)
    return web.json_response(document)


async def _stored(request: web.Request) -> StoredResponse:
    response_id = request.match_info["response_id"]
    stored = await request.app[SERVICES].responses.get(response_id, request[API_KEY_ID])
    if stored is None:
        raise _not_found(response_id)
    return stored


async def get_response(request: web.Request) -> web.Response:
    return web.json_response((await _stored(request)).response)


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not await request.app[SERVICES].responses.delete(response_id, request[API_KEY_ID]):
        raise _not_found(response_id)
    return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})


async def input_items(request: web.Request) -> web.Response:
    stored = await _stored(request)
    items = [
        {"id": item.get("id") or f"in_{stored.id.removeprefix('resp_')}_{index}", **item}
        for index, item in enumerate(stored.input_items)
    ]
    if request.query.get("order", "desc") == "desc":
        items.reverse()
    return web.json_response(
        {
            "object": "list",
            "data": items,
            "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None,
            "has_more": False,
        }
    )
