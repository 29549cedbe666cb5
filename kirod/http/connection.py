"""The public listener's connections: aiohttp's request handler, telling the listener's slots
(`kirod/http/slots.py`) where each connection stands, and answering what its parser refuses in
JSON (`kirod/http/malformed.py`).

aiohttp's `RequestHandler` is the connection's protocol: `connection_made`, `data_received` and
`connection_lost` come from the transport, and `handle_error` is its hook for a request it
could not serve, a parser failure included. Whether a request is in flight is not public, so two
internals are used, both exercised by tests/http/test_connection_slots.py: the queue of parsed
requests (`_messages`: a complete head waits there until its handler starts, a turn of the loop
later, when a new connection may already have asked for a slot) and `_handle_request`, which
runs from a handler's start to its answer's last byte, a stream's or a WebSocket's included.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from kirod import log
from kirod.errors import ErrorKind
from kirod.http import malformed
from kirod.http.ingress import new_request_id
from kirod.http.slots import Slots

logger = logging.getLogger(__name__)

_Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class PublicConnection(web.RequestHandler):
    __slots__ = ("_head", "_in_flight", "_listener")

    def __init__(self, manager: web.Server, listener: PublicConnections, **options: Any) -> None:
        super().__init__(manager, **options)
        self._listener = listener
        self._in_flight = False
        self._head = b""  # the start of the request head arriving, for a parser failure's answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._listener.slots.opened(self)

    def data_received(self, data: bytes) -> None:
        if not self._in_flight and data:
            if not self._head:
                self._listener.slots.heard(self)
            if len(self._head) < malformed.REQUEST_LINE_KEPT:
                self._head += data[: malformed.REQUEST_LINE_KEPT - len(self._head)]
        super().data_received(data)
        if self._messages and not self._in_flight:
            self._start()

    async def _handle_request(
        self, request: web.BaseRequest, start_time: float | None, request_handler: _Handler
    ) -> tuple[web.StreamResponse, bool]:
        self._start()
        try:
            return await super()._handle_request(request, start_time, request_handler)
        finally:
            if not self._messages:  # else a pipelined request is next: still in flight
                self._in_flight = False
                self._head = b""
                self._listener.slots.rested(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._listener.slots.closed(self)
        super().connection_lost(exc)

    def drop(self) -> None:
        transport = self.transport
        self.force_close()
        if transport is not None:
            transport.abort()  # an idle connection's unsent bytes are not worth its slot

    def _start(self) -> None:
        self._in_flight = True
        self._listener.slots.busy(self)

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """A body that breaks off or will not inflate, found while aiohttp reads what the handler
        left unread (the handler has answered 400 already): a throttled warning like any other
        malformed request, not an error with a traceback that anyone could repeat."""
        if isinstance(kw.get("exc_info"), RequestPayloadError):
            self._listener.refused.event("malformed_request", error="RequestPayloadError")
            return
        super().log_exception(*args, **kw)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp's parser refused: a JSON answer in the family its path names, in
        place of aiohttp's text, logged as a warning at most every ten seconds instead of an
        error with a traceback each. Other failures reach here only if they escape the app's
        middleware, which answers every other: aiohttp's answer stands for those."""
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:  # as aiohttp: the answer has begun, nothing to add
            raise ConnectionError("the answer has begun; cannot send an error instead")
        self._listener.refused.event("malformed_request", error=type(exc).__name__)
        request_id = new_request_id()
        text = malformed.describe(
            exc, self._head, max_line=self.max_line_size, max_headers=self.max_headers
        )
        document = malformed.document(malformed.family_of(self._head), text, request_id)
        response = web.Response(
            status=ErrorKind.INVALID_REQUEST.status,
            body=json.dumps(document).encode(),
            content_type="application/json",
            headers={"x-request-id": request_id, "request-id": request_id, "Server": "kirod"},
        )
        response.force_close()
        return response


class PublicConnections:
    """The public listener's connections, as `kirod.daemon.sockets.Acceptor` counts them: each
    a `PublicConnection` of `server`."""

    def __init__(self, server: web.Server, *, first_byte_s: float, header_s: float) -> None:
        self._server = server
        self.slots = Slots(first_byte_s)
        self.refused = log.Throttle(logger)
        # keepalive_timeout also bounds how long a new connection may take to send its headers:
        # aiohttp arms it when the connection is made and does not re-arm it as bytes trickle in.
        self._options: dict[str, Any] = {"keepalive_timeout": header_s, "access_log": None}

    def __len__(self) -> int:
        return len(self.slots)

    def new(self) -> PublicConnection:
        return PublicConnection(
            self._server, self, loop=asyncio.get_running_loop(), **self._options
        )

    def make_room(self) -> bool:
        return self.slots.make_room()
