"""Responses over WebSocket: `GET /v1/responses` upgraded, one turn per `response.create` frame.

The wire is the one Codex speaks (`OpenAI-Beta: responses_websockets=2026-02-06`) and OpenAI
documents as WebSocket mode. The upgrade passes the ingress and the key gate like any request (a
bad key is the usual 401, nothing upgrades); a `GET` without `Upgrade: websocket` is answered 405
as before. permessage-deflate is accepted when the client offers it and `websocket_compression`
is on (off by default: on loopback it costs CPU on both ends and saves nothing).

Turns. Each text frame `{"type": "response.create", ...}` is a `POST /v1/responses` body with
`stream` implied, and runs the same pipeline (`routes/responses.py`: key scope, affinity, pool,
stored responses). Each Responses event goes back as one text frame holding the event's JSON (what
SSE carries after `data:`), ending at `response.completed`, `response.incomplete` or
`response.failed`; a mid-stream `error` event also nests its fields in `error`, the shape the
openai SDK's WebSocket client parses.

- Turns run one at a time. A `response.create` arriving while one runs waits for it; only one
  may wait: one more is a protocol error.
- The connection remembers its last response, so a `previous_response_id` naming it continues
  with `store: false` too (Codex sends only the items after its previous response); any other id
  is read from the store, as over HTTP.
- `generate: false` (Codex's warm-up) answers a completed response with no output and no call to
  Kiro; its id can be continued like any other.
- `response.processed` (Codex's acknowledgement of a response) is accepted and ignored.
- Each turn has its own request id (carried by its operation-log row and its error frames) and
  its own access-log line, `request method=WS`, naming the connection's request id; the upgrade's
  own line (status 101) lasts as long as the connection and counts its `turns`. The first turn
  uses the upgrade's admission; every later one passes the key gate again (rate, revocation).

Errors. A turn refused before its stream starts (validation, no account, unknown model, rate…)
is one frame `{"type": "error", "status", "error": {type, code, message, param}, "request_id"}`
(with `headers` when the HTTP answer would carry some) and the connection stays open. Frames that
break the protocol get an error frame, then the socket closes (any running turn is aborted):
binary data 1003; text that is not UTF-8 1007; not a JSON object, or an unknown `type`, 1008;
too many waiting turns 1008. A message above `max_request_body_bytes` is closed 1009 by aiohttp's
reader before kirod sees it, so it gets the close code alone.

Bounds. With no turn running or waiting for `websocket_idle_timeout_s`, the socket closes 1000.
After `websocket_max_age_s` the next `response.create` (or the next idle moment) is answered with
error `websocket_connection_limit_reached`, on which Codex reconnects, and the socket closes 1000.
A client that goes away mid-turn cancels the turn, which aborts the upstream exchange and frees
the account slot exactly as an HTTP client disconnecting does.

Shutdown. The public app's `on_shutdown` drains every socket: an idle one closes 1001 at once; a
running turn may finish for `shutdown_drain_s`, after which it is cut off; then the socket closes
1001. Turns that were only waiting are not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import WSMsgType, web

from kirod import log
from kirod.canonical import wirejson
from kirod.canonical.events import CanonicalEvent
from kirod.errors import ApiError, DatabaseDamaged, ErrorKind
from kirod.http.body import parse_json
from kirod.http.ingress import (
    API_KEY_ID,
    CLIENT_CLOSED,
    DATABASE_DAMAGED,
    REQUEST_ID,
    _fingerprint,
    new_request_id,
)
from kirod.http.routes import responses
from kirod.http.services import SERVICES, Services
from kirod.protocols.envelopes import openai_error
from kirod.protocols.responses import ResponsesStreamEncoder
from kirod.tasks import TaskOwner

logger = logging.getLogger(__name__)
access_log = logging.getLogger(log.ACCESS)

MAX_WAITING: Final = 1
"""`response.create` frames that may wait behind the running turn."""
CLOSE_TIMEOUT_S: Final = 2.0
"""How long a close waits for the client's closing frame before dropping the connection."""
LIMIT_REACHED: Final = "websocket_connection_limit_reached"

CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_UNSUPPORTED_DATA: Final = 1003
CLOSE_INVALID_DATA: Final = 1007
CLOSE_POLICY_VIOLATION: Final = 1008
CLOSE_INTERNAL_ERROR: Final = 1011


@dataclass(frozen=True)
class _Refusal:
    """A frame that breaks the protocol: the error to answer and the close code that follows."""

    error: ApiError
    close_code: int


def _invalid(message: str, code: str, close_code: int = CLOSE_POLICY_VIOLATION) -> _Refusal:
    return _Refusal(ApiError(ErrorKind.INVALID_REQUEST, message, code=code), close_code)


_BINARY = _invalid(
    "binary frames are not accepted: send each client event as a JSON text frame",
    "unsupported_frame",
    CLOSE_UNSUPPORTED_DATA,
)
_NOT_AN_EVENT = _invalid(
    "each frame must be a JSON object with a 'type', such as 'response.create'",
    "invalid_event",
)
_NOT_UTF8 = _invalid("a text frame must be UTF-8", "invalid_event", CLOSE_INVALID_DATA)
_TOO_MANY = _invalid(
    f"a response.create arrived while one response runs and {MAX_WAITING} already waits; "
    "send the next one after response.completed, or open another connection",
    "too_many_pending_responses",
)


def _limit_reached(max_age_s: float) -> ApiError:
    return ApiError(
        ErrorKind.INVALID_REQUEST,
        f"this WebSocket connection reached its limit of {max_age_s:g} s; "
        "open a new connection to continue",
        code=LIMIT_REACHED,
    )


def _error_frame(error: ApiError, request_id: str) -> bytes:
    """A refused request: OpenAI's error envelope in the WebSocket error event, with the HTTP
    status it would have had. Headers the HTTP answer would carry go both inside `error` (the
    openai SDK's `ResponseWsError`) and beside it (where Codex reads them)."""
    document: dict[str, Any] = {
        "type": "error",
        "status": error.status,
        **openai_error(error, request_id),
    }
    headers = dict(error.headers)
    if error.final:
        headers["x-should-retry"] = "false"
    if headers:
        document["error"]["headers"] = headers
        document["headers"] = headers
    return wirejson.dumps(document)


def _render(event: dict[str, Any], kind: str) -> bytes:
    """One event as its frame: the JSON SSE carries after `data:`. A mid-stream `error` event
    also nests its fields in `error`, the shape WebSocket clients parse (`ResponseWsError`)."""
    if kind == "error":
        nested = {"type": "server_error", **{k: event.get(k) for k in ("code", "message", "param")}}
        event = {**event, "error": nested}
    return wirejson.dumps(event)


_DRAIN: Final[Any] = object()


class _Socket:
    """One upgraded connection. The handler's task reads frames; a worker task runs the turns,
    one at a time, and owns the idle, age and drain decisions. Either may close the socket."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse, services: Services) -> None:
        self._request = request
        self._ws = ws
        self._services = services
        self._settings = services.settings
        self._loop = asyncio.get_running_loop()
        self._id = request[REQUEST_ID]
        self._admitted: str | None = request[API_KEY_ID]  # the first turn's admission
        self._tasks = TaskOwner("websocket")
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()
        self._pending = 0  # turns waiting or running
        self._expires_at = self._loop.time() + self._settings.websocket_max_age_s
        self._drain_at: float | None = None
        self._turn_limit: asyncio.Timeout | None = None
        self._closing = False
        self._last: tuple[str, responses.Items] | None = None
        self.turns = 0
        self.close_code: int | None = None  # sent by kirod; None when the client closed

    # -- reading (the handler's task) -------------------------------------------------------------

    async def serve(self) -> None:
        worker = self._tasks.spawn(self._work(), name="turns")
        try:
            async for message in self._ws:
                if message.type is WSMsgType.TEXT:
                    refusal = self._accept(message.data)
                elif message.type is WSMsgType.BINARY:
                    refusal = _BINARY
                else:  # ERROR: aiohttp has closed it (message too big, a protocol error)
                    break
                if refusal is not None:
                    await self._refuse(refusal, worker)
                    break
        finally:
            # The worker is cancelled (a running turn aborted) unless it is the one closing the
            # socket, and finishes on its own: once the socket is closed aiohttp cancels this
            # handler at its next await, which would turn a clean close into a disconnect.
            if not self._closing:
                worker.cancel()

    def _accept(self, data: bytes) -> _Refusal | None:
        try:
            event = parse_json(data)
        except ApiError:
            try:
                data.decode()
            except UnicodeDecodeError:
                return _NOT_UTF8
            return _NOT_AN_EVENT
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "response.create":
            if self._drain_at is not None:
                return None  # not started: the socket closes once the running turn ends
            if self._pending > MAX_WAITING:  # one runs, MAX_WAITING wait
                return _TOO_MANY
            self._pending += 1
            self._inbox.put_nowait(event)
            return None
        if kind == "response.processed":
            return None
        if not isinstance(kind, str):
            return _NOT_AN_EVENT
        shown = kind if len(kind) <= 64 and kind.isprintable() else kind[:64].encode().hex()
        return _invalid(
            f"unsupported client event type {shown!r}; this endpoint accepts response.create",
            "unknown_event_type",
        )

    async def _refuse(self, refusal: _Refusal, worker: asyncio.Task[Any]) -> None:
        worker.cancel()  # a turn still running is aborted: nothing can follow a protocol error
        await asyncio.wait([worker])
        log.event(
            logger,
            "websocket_refused",
            level=logging.WARNING,
            code=refusal.error.code,
            close_code=refusal.close_code,
        )
        await self._send(_error_frame(refusal.error, self._id))
        await self._close(refusal.close_code, refusal.error.code or "")

    # -- turns (the worker task) ------------------------------------------------------------------

    async def _work(self) -> None:
        try:
            await self._turns()
        except Exception:  # a bug: never leave a socket open that nobody answers
            await self._close(CLOSE_INTERNAL_ERROR, "internal error")
            raise

    async def _turns(self) -> None:
        while True:
            now = self._loop.time()
            wait_s = min(self._settings.websocket_idle_timeout_s, self._expires_at - now)
            try:
                async with asyncio.timeout(max(0.0, wait_s)):
                    event = await self._inbox.get()
            except TimeoutError:
                if self._loop.time() >= self._expires_at:
                    await self._limit()
                else:
                    await self._close(CLOSE_NORMAL, "idle timeout")
                return
            if event is _DRAIN or self._drain_at is not None:
                await self._close(CLOSE_GOING_AWAY, "server shutting down")
                return
            if self._loop.time() >= self._expires_at:
                await self._limit()
                return
            try:
                await self._turn(event)
            finally:
                self._pending -= 1

    async def _limit(self) -> None:
        error = _limit_reached(self._settings.websocket_max_age_s)
        await self._send(_error_frame(error, self._id))
        await self._close(CLOSE_NORMAL, LIMIT_REACHED)

    async def _turn(self, event: dict[str, Any]) -> None:
        """One `response.create`, bounded by the drain deadline once shutdown begins."""
        self.turns += 1
        request_id = new_request_id()
        id_token = log.request_id_var.set(request_id)
        annotations: dict[str, Any] = {}
        fields_token = log.request_fields_var.set(annotations)
        started = self._loop.time()
        status = 500
        try:
            async with asyncio.timeout_at(self._drain_at) as limit:
                self._turn_limit = limit
                status = await self._run(event, request_id)
        except TimeoutError:  # cut off at the end of the shutdown drain
            status = CLIENT_CLOSED
        except asyncio.CancelledError:
            status = CLIENT_CLOSED
            raise
        finally:
            self._turn_limit = None
            if status == CLIENT_CLOSED:
                annotations["error"] = "client_closed"
            fields: dict[str, Any] = {
                "method": "WS",
                "path": self._request.path,
                "status": status,
                "duration_ms": round((self._loop.time() - started) * 1000, 1),
                "connection": self._id,
                "turn": self.turns,
            }
            for key, value in annotations.items():
                fields.setdefault(key, value)
            log.event(access_log, "request", **fields)
            log.request_fields_var.reset(fields_token)
            log.request_id_var.reset(id_token)

    async def _run(self, event: dict[str, Any], request_id: str) -> int:
        """The turn's pipeline; returns the status it ends with (200 once streamed)."""
        services = self._services
        try:
            tenant = self._admitted
            self._admitted = None
            if tenant is None:
                tenant = await services.gate.admit(self._request)
            body = {key: value for key, value in event.items() if key != "type"}
            body["stream"] = True
            decoded, history = await responses.prepare(
                services,
                body,
                self._request.headers,
                request_id=request_id,
                tenant=tenant,
                earlier=self._earlier,
            )
            if not decoded.generate:
                log.annotate(generate=False)
            run = responses.stream_turn if decoded.generate else responses.warm_turn
            turn = await run(services, tenant, decoded, history, self._stream, render=_render)
            if turn.response is not None and turn.conversation is not None:
                self._last = (turn.response["id"], turn.conversation)
            return 200
        except ApiError as error:
            await self._send(_error_frame(error, request_id))
            return error.status
        except DatabaseDamaged:  # the store went read-only (kirod.storage.db), as ingress says
            await self._send(_error_frame(DATABASE_DAMAGED, request_id))
            return DATABASE_DAMAGED.status
        except ConnectionError:  # the client went away while its answer was written
            return CLIENT_CLOSED
        except Exception as exc:
            digest, where = _fingerprint(exc)
            log.event(
                logger,
                "unhandled_error",
                level=logging.ERROR,
                error=type(exc).__name__,
                where=where,
                detail_hash=digest,
            )
            internal = ApiError(
                ErrorKind.INTERNAL,
                f"internal error (request {request_id}, ref {digest})",
                code="internal_error",
            )
            await self._send(_error_frame(internal, request_id))
            return internal.status

    def _earlier(self, response_id: str) -> responses.Items | None:
        if self._last is not None and self._last[0] == response_id:
            return self._last[1]
        return None

    async def _stream(
        self, batches: AsyncIterator[list[CanonicalEvent]], encoder: ResponsesStreamEncoder
    ) -> None:
        """Each event as one text frame. A client that goes away cancels the handler, which
        cancels this turn in the step of `batches` it waits in, and so aborts the upstream."""
        send = self._ws.send_frame
        for frame in encoder.start():
            await send(frame, WSMsgType.TEXT)
        async for batch in batches:
            for event in batch:
                for frame in encoder.feed(event):
                    await send(frame, WSMsgType.TEXT)

    # -- either task ------------------------------------------------------------------------------

    async def _send(self, frame: bytes) -> None:
        with contextlib.suppress(ConnectionError):
            await self._ws.send_frame(frame, WSMsgType.TEXT)

    async def _close(self, code: int, reason: str) -> None:
        if self._closing:
            return
        self._closing = True
        self.close_code = code
        await self._ws.close(code=code, message=reason.encode())

    def drain(self, grace_s: float) -> None:
        """Shutdown: let a running turn finish for `grace_s`, start no other, then close 1001."""
        if self._drain_at is not None:
            return
        self._drain_at = self._loop.time() + grace_s
        if self._turn_limit is not None:
            self._turn_limit.reschedule(self._drain_at)
        self._inbox.put_nowait(_DRAIN)


class Sockets:
    """The open sockets of one app, so that shutdown can drain them."""

    def __init__(self) -> None:
        self._open: set[_Socket] = set()
        self._grace_s: float | None = None

    def add(self, socket: _Socket) -> None:
        self._open.add(socket)
        if self._grace_s is not None:  # upgraded after the drain began
            socket.drain(self._grace_s)

    def discard(self, socket: _Socket) -> None:
        self._open.discard(socket)

    def drain(self, grace_s: float) -> None:
        self._grace_s = grace_s
        for socket in list(self._open):
            socket.drain(grace_s)


SOCKETS = web.AppKey("responses_websockets", Sockets)


async def _drain_sockets(app: web.Application) -> None:
    app[SOCKETS].drain(app[SERVICES].settings.shutdown_drain_s)


def install(app: web.Application) -> None:
    """Track the app's sockets and drain them when it shuts down."""
    app[SOCKETS] = Sockets()
    app.on_shutdown.append(_drain_sockets)


async def responses_socket(request: web.Request) -> web.StreamResponse:
    """`GET /v1/responses`: the WebSocket transport; without `Upgrade: websocket`, a 405."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise web.HTTPMethodNotAllowed(request.method, ["POST"])
    services = request.app[SERVICES]
    ws = web.WebSocketResponse(
        timeout=CLOSE_TIMEOUT_S,
        compress=services.settings.websocket_compression,
        max_msg_size=services.settings.max_request_body_bytes,
        decode_text=False,
    )
    await ws.prepare(request)  # a malformed handshake is aiohttp's 400
    socket = _Socket(request, ws, services)
    sockets = request.app[SOCKETS]
    sockets.add(socket)
    try:
        await socket.serve()
    finally:
        sockets.discard(socket)
        log.annotate(turns=socket.turns, close_code=socket.close_code or ws.close_code)
    return ws
