"""The Gemini API (`enable_gemini_api = true`): models, generateContent, countTokens.

Under `/v1beta/models`, as Gemini CLI and the SDKs call it, and as `POST /v1/models/{model}:…`,
which google-genai calls when it is given only a base URL (a GET there stays kirod's own model
lookup). When the API is off, every such path is a 404 naming the setting, before any key is
asked for. The key comes as `x-goog-api-key` or Bearer (`kirod.http.auth`); errors use Google's
envelope (`kirod.http.ingress.family_for`). A Gemini model name is served by the model its
class maps to (`gemini_models`, applied by model resolution, so `kiroctl trace` shows the name
the client sent beside the Kiro model), whose public id is the answer's `modelVersion`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from kirod.canonical.token_count import estimate_request_tokens
from kirod.config import Settings
from kirod.errors import ApiError, ErrorKind
from kirod.http.body import read_json
from kirod.http.caching import asks_cache, cache_headers
from kirod.http.credits import credits_headers
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, REQUEST_ID
from kirod.http.routes.models import offered_catalog, visible_models
from kirod.http.services import SERVICES
from kirod.http.streaming import SSE_HEADERS, collect, stream_sse
from kirod.protocols.fields import invalid, model_name
from kirod.protocols.gemini import (
    ARRAY_END,
    GeminiStreamEncoder,
    array_frame,
    array_start,
    conversation_key,
    decode_count_tokens,
    decode_generate,
    generate_json,
    model_json,
    sse_frame,
)

ARRAY_HEADERS: Final = {
    "Content-Type": "application/json; charset=utf-8",
    "Cache-Control": "no-cache",
}
_PAGE_SIZE: Final = 50  # Google's default
_MAX_PAGE_SIZE: Final = 1000
_AFFINITY_HEADERS: Final = ("x-session-affinity", "x-session-id")


def require_enabled(settings: Settings) -> None:
    if not settings.enable_gemini_api:
        raise ApiError(
            ErrorKind.NOT_FOUND,
            "the Gemini API (/v1beta/models) is off; set enable_gemini_api = true to serve it",
            code="not_found",
        )


def _affinity(request: web.Request, body: object, *, stream: bool) -> str | None:
    """An explicit conversation key (`x-session-affinity`, `x-session-id`), else for a streamed
    call the digest of Gemini CLI's first turn, which stands for the session it does not name
    (`conversation_key`)."""
    explicit = next((v for h in _AFFINITY_HEADERS if (v := request.headers.get(h))), None)
    return explicit or (conversation_key(body) if stream else None)


async def list_models(request: web.Request) -> web.Response:
    rows = visible_models(request, await offered_catalog(request))
    try:
        size = int(request.query.get("pageSize", _PAGE_SIZE))
        start = int(request.query.get("pageToken") or 0)
    except ValueError:
        raise invalid("pageSize", "pageSize and pageToken must be integers") from None
    size = min(max(size, 1), _MAX_PAGE_SIZE)
    page = rows[max(start, 0) : max(start, 0) + size]
    body: dict[str, object] = {"models": [model_json(row.id, row.info) for row in page]}
    if start + size < len(rows):
        body["nextPageToken"] = str(start + size)
    return web.json_response(body)


async def get_model(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    name = request.match_info["model_id"]
    info = services.models.lookup(model_name(name), await offered_catalog(request)).info
    if not services.gate.allows(request[API_KEY_ID], info):
        raise ApiError(
            ErrorKind.NOT_FOUND,
            f"model '{info.public_id}' is not available to this API key",
            code="model_not_found",
            param="model",
        )
    return web.json_response(model_json(name, info))


async def call(request: web.Request) -> web.StreamResponse:
    """`POST models/{model}:{method}`."""
    name, _, method = request.match_info["model_id"].rpartition(":")
    handler = _METHODS.get(method)
    if handler is None or not name:
        raise ApiError(
            ErrorKind.NOT_FOUND,
            f"no such method: models/{{model}}:{method[:64]}; kirod serves " + ", ".join(_METHODS),
            code="not_found",
        )
    return await handler(request, name)


async def _generate(request: web.Request, name: str, *, stream: bool) -> web.StreamResponse:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    target = model_name(name)  # as the client named it: resolution serves a Gemini name's class
    decoded = await decode_model_first(
        services,
        body,
        lambda: decode_generate(
            body,
            model=target,
            request_id=request[REQUEST_ID],
            signer=services.signer,
            stream=stream,
            affinity_key=_affinity(request, body, stream=stream),
        ),
        lambda _body: target,
    )
    async with services.dispatcher.open(
        decoded.request, tenant=request[API_KEY_ID], cache=asks_cache(request)
    ) as dispatch:
        model, response_id = dispatch.model_name, dispatch.message_id
        if stream:
            sse = request.query.get("alt") == "sse"
            encoder = GeminiStreamEncoder(
                model=model,
                response_id=response_id,
                request_id=request[REQUEST_ID],
                signer=services.signer,
                show_thoughts=decoded.show_thoughts,
                frame=sse_frame if sse else array_frame,
            )
            return await stream_sse(
                request,
                dispatch.events,
                encoder.feed,
                start=() if sse else (array_start(model, response_id),),
                finish=None if sse else (lambda: (ARRAY_END,)),
                heartbeat=encoder.keepalive(),
                headers=SSE_HEADERS if sse else ARRAY_HEADERS,
            )
        completion = await collect(dispatch.events)
    answer = generate_json(
        completion,
        model=model,
        response_id=response_id,
        signer=services.signer,
        show_thoughts=decoded.show_thoughts,
    )
    return web.json_response(
        answer,
        headers={
            **credits_headers(request.headers, completion.usage),
            **cache_headers(request, dispatch),
        },
    )


async def _generate_content(request: web.Request, name: str) -> web.StreamResponse:
    return await _generate(request, name, stream=False)


async def _stream_generate_content(request: web.Request, name: str) -> web.StreamResponse:
    return await _generate(request, name, stream=True)


async def _count_tokens(request: web.Request, name: str) -> web.StreamResponse:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    target = model_name(name)
    canonical = await decode_model_first(
        services,
        body,
        lambda: decode_count_tokens(
            body, model=target, request_id=request[REQUEST_ID], signer=services.signer
        ),
        lambda _body: target,
    )
    # No upstream call, but the model and the key's scope are judged as for generateContent.
    model = (await services.models.resolve_known(canonical.model)).info
    services.gate.authorize_model(request[API_KEY_ID], model)
    return web.json_response({"totalTokens": estimate_request_tokens(canonical)})


_METHODS: Final[dict[str, Callable[[web.Request, str], Awaitable[web.StreamResponse]]]] = {
    "generateContent": _generate_content,
    "streamGenerateContent": _stream_generate_content,
    "countTokens": _count_tokens,
}
