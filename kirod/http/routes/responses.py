"""OpenAI Responses: `POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`, input items.

With `store` (OpenAI's default) the response and its conversation are kept, so a later request
can continue it with `previous_response_id`; stored responses belong to the API key that made them.

A create runs one pipeline whichever transport carries it (HTTP here, WebSocket frames in
`kirod/http/websocket.py`): `prepare` loads the conversation `previous_response_id` names and
decodes the body, `stream_turn` dispatches it and feeds the events through the encoder to the
transport's `send`, storing the response before the event that completes it is sent, so that
whatever a client saw it can continue (a kill right after leaves it stored). Both return what
the next turn continues from.

Storing is the purpose of a `store: true` turn, so a full disk fails it: before the request
goes upstream when the store already knows it is full (`prepare`), else at the store, as a 507
`insufficient_storage`; a stream then ends with `error` and `response.failed` instead of
`response.completed`, since the client could not continue a response nobody kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiohttp import web

from kirod import log
from kirod.canonical.events import CanonicalEvent, ErrorEvent, MessageStop, StopReason
from kirod.dispatch.pipeline import Dispatch
from kirod.errors import ApiError, ErrorKind, StoreError, StoreFull, insufficient_storage
from kirod.http.body import read_json
from kirod.http.caching import asks_cache, cache_headers
from kirod.http.credits import credits_headers
from kirod.http.decoding import decode_model_first
from kirod.http.ingress import API_KEY_ID, DATABASE_DAMAGED, REQUEST_ID
from kirod.http.services import SERVICES, Services
from kirod.http.streaming import collect, stream_sse
from kirod.protocols.responses import (
    DecodedResponses,
    ResponsesStreamEncoder,
    decode_responses,
    response_items,
    response_json,
)
from kirod.protocols.sse import COMMENT_KEEPALIVE, encode_event
from kirod.storage.responses import StoredResponse

logger = logging.getLogger(__name__)

T = TypeVar("T")
Items = list[dict[str, Any]]
Earlier = Callable[[str], Items | None]
"""A transport's own memory of a response it served: its conversation, or None to ask the store."""
Send = Callable[[AsyncIterator[list[CanonicalEvent]], ResponsesStreamEncoder], Awaitable[T]]
"""Writes a turn's events through the encoder to the client; returns what the transport needs."""
Render = Callable[[dict[str, Any], str], bytes]


@dataclass(frozen=True)
class Turn(Generic[T]):
    """What a streamed turn left: `send`'s result, the final Response object (None if the stream
    never ended) and the conversation a next turn continues from (None if it failed)."""

    sent: T
    response: dict[str, Any] | None
    conversation: Items | None


def new_response_id() -> str:
    return "resp_" + secrets.token_hex(12)


def _not_found(response_id: str, param: str | None = None) -> ApiError:
    return ApiError(
        ErrorKind.NOT_FOUND if param is None else ErrorKind.INVALID_REQUEST,
        f"no stored response with id {response_id!r}",
        code="response_not_found" if param is None else "previous_response_not_found",
        param=param,
    )


async def prepare(
    services: Services,
    body: Any,
    headers: Mapping[str, str],
    *,
    request_id: str,
    tenant: str,
    earlier: Earlier | None = None,
    compact: bool = False,
) -> tuple[DecodedResponses, Items]:
    """Decode a create (or, with `compact`, a compaction) body, with the conversation of its
    `previous_response_id` (from `earlier`, else the store) as history; raises the `ApiError` to
    answer."""
    history: Items = []
    previous = body.get("previous_response_id") if isinstance(body, dict) else None
    if isinstance(previous, str):
        found = earlier(previous) if earlier is not None else None
        if found is None:
            stored = await services.responses.get(previous, tenant)
            if stored is None:
                raise _not_found(previous, "previous_response_id")
            found = stored.history
        history = found
    decoded = await decode_model_first(
        services,
        body,
        lambda: decode_responses(
            body,
            headers,
            request_id=request_id,
            history=history,
            reasoning_box=services.reasoning_box,
            compact=compact,
        ),
    )
    if decoded.store:
        try:
            services.responses.check_room()
        except StoreFull as full:
            raise insufficient_storage(full) from None
    return decoded, history


@contextlib.asynccontextmanager
async def _dispatched(
    services: Services, decoded: DecodedResponses, tenant: str, *, cache: bool = False
) -> AsyncIterator[tuple[DecodedResponses, Dispatch]]:
    """The upstream exchange for `decoded`, whose echo now names the model that serves it."""
    if decoded.store and services.db.damaged is not None:
        raise DATABASE_DAMAGED  # it could not be stored: refused before Kiro is asked (and paid)
    async with services.dispatcher.open(decoded.request, tenant=tenant, cache=cache) as dispatch:
        decoded = dataclasses.replace(
            decoded, echo=dataclasses.replace(decoded.echo, model=dispatch.model_name)
        )
        yield decoded, dispatch


async def _keep(
    services: Services,
    tenant: str,
    decoded: DecodedResponses,
    response: dict[str, Any] | None,
    output: Items,
    history: Items,
) -> Items | None:
    """Store the response if asked to; the conversation it ends, unless it failed."""
    if response is None or response.get("status") == "failed":
        return None
    conversation = [*history, *decoded.input_items, *output]
    if decoded.store:
        stored = StoredResponse(
            id=response["id"],
            tenant=tenant,
            created_at=time.time(),
            model=decoded.echo.model,
            previous_id=decoded.previous_response_id,
            response=response,
            input_items=list(decoded.input_items),
            history=conversation,
        )
        try:
            await services.responses.put(stored)
        except StoreFull as full:
            raise insufficient_storage(full) from None
        except StoreError as exc:
            log.event(logger, "response_not_stored", level=logging.ERROR, error=str(exc))
            raise ApiError(
                ErrorKind.INTERNAL,
                "kirod could not store this response (its log says why); send it again",
                code="store_failed",
            ) from None
    return conversation


class _Keeper:
    """Stores a streamed turn's response (`_keep`) once: before its terminal event is sent when
    `store` asks for it, else when the stream has ended."""

    def __init__(
        self,
        services: Services,
        tenant: str,
        decoded: DecodedResponses,
        history: Items,
        encoder: ResponsesStreamEncoder,
    ) -> None:
        self._services = services
        self._tenant = tenant
        self._decoded = decoded
        self._history = history
        self._encoder = encoder
        self._done = False
        self.conversation: Items | None = None

    def events(
        self, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """`batches` as `send` is to read them: stored first when the request stores."""
        return self._stored_first(batches) if self._decoded.store else batches

    async def _stored_first(
        self, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        async for batch in batches:
            stop = batch[-1] if batch else None
            if not isinstance(stop, MessageStop):  # a stop is the last event of its stream
                yield batch
                continue
            if len(batch) > 1:
                yield batch[:-1]  # what the response holds is encoded first
            self._encoder.end(stop)
            try:
                await self.keep()
            except ApiError as error:  # not stored: the stream ends failed, not completed
                yield [ErrorEvent.from_error(error)]
                return
            yield [stop]

    async def keep(self) -> None:
        if self._done:
            return
        self._done = True
        self.conversation = await _keep(
            self._services,
            self._tenant,
            self._decoded,
            self._encoder.response,
            self._encoder.history_items,
            self._history,
        )


async def stream_turn(
    services: Services,
    tenant: str,
    decoded: DecodedResponses,
    history: Items,
    send: Send[T],
    *,
    render: Render = encode_event,
) -> Turn[T]:
    """Dispatch `decoded`, hand its events and an encoder rendering with `render` to `send`;
    the response is stored before its terminal event is sent."""
    async with _dispatched(services, decoded, tenant) as (decoded, dispatch):
        encoder = ResponsesStreamEncoder(
            response_id=new_response_id(),
            echo=decoded.echo,
            reasoning_box=services.reasoning_box,
            render=render,
        )
        keeper = _Keeper(services, tenant, decoded, history, encoder)
        sent = await send(keeper.events(dispatch.events), encoder)
        await keeper.keep()
    return Turn(sent, encoder.response, keeper.conversation)


async def _no_output() -> AsyncIterator[list[CanonicalEvent]]:
    yield [MessageStop(StopReason.END_TURN)]


async def warm_turn(
    services: Services,
    tenant: str,
    decoded: DecodedResponses,
    history: Items,
    send: Send[T],
    *,
    render: Render = encode_event,
) -> Turn[T]:
    """`generate: false`: a completed response with no output and no upstream call, whose
    conversation (the history and this input) a later turn can continue."""
    await services.models.check(decoded.request.model)
    encoder = ResponsesStreamEncoder(
        response_id=new_response_id(),
        echo=decoded.echo,
        reasoning_box=services.reasoning_box,
        render=render,
    )
    keeper = _Keeper(services, tenant, decoded, history, encoder)
    sent = await send(keeper.events(_no_output()), encoder)
    await keeper.keep()
    return Turn(sent, encoder.response, keeper.conversation)


async def create_response(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    body = await read_json(
        request,
        services.settings.max_request_body_bytes,
        timeout_s=services.settings.client_body_timeout_s,
    )
    tenant = request[API_KEY_ID]
    decoded, history = await prepare(
        services, body, request.headers, request_id=request[REQUEST_ID], tenant=tenant
    )
    if decoded.request.stream:

        async def send(
            batches: AsyncIterator[list[CanonicalEvent]], encoder: ResponsesStreamEncoder
        ) -> web.StreamResponse:
            return await stream_sse(
                request, batches, encoder.feed, start=encoder.start(), heartbeat=COMMENT_KEEPALIVE
            )

        run = stream_turn if decoded.generate else warm_turn
        return (await run(services, tenant, decoded, history, send)).sent
    if not decoded.generate:

        async def fold(
            batches: AsyncIterator[list[CanonicalEvent]], encoder: ResponsesStreamEncoder
        ) -> None:
            async for batch in batches:
                for event in batch:
                    encoder.feed(event)

        warmed = await warm_turn(services, tenant, decoded, history, fold)
        return web.json_response(warmed.response)
    response_id = new_response_id()
    # A continuation's answer depends on a stored conversation: never from the cache.
    cache = asks_cache(request) and decoded.previous_response_id is None
    async with _dispatched(services, decoded, tenant, cache=cache) as (decoded, dispatch):
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
    await _keep(services, tenant, decoded, document, output, history)
    return web.json_response(
        document,
        headers={
            **credits_headers(request.headers, completion.usage),
            **cache_headers(request, dispatch),
        },
    )


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
