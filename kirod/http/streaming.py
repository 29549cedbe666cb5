"""Writing a canonical event stream to a client as SSE (or NDJSON, Ollama's framing), and folding
it for non-streaming replies.

The stream arrives in batches, one per upstream network chunk (one Kiro chunk often carries a
block start and its first delta, or the last block's stop, the usage and the end). Each batch is
rendered and written at once, in one write: no event waits for a later one, and a chunk costs
one syscall and one TCP segment rather than one per event.

The handler iterates the stream itself: nothing but the client's disconnect (aiohttp then cancels
the handler) ever cancels a step of it, because cancelling an async generator mid-step aborts the
upstream exchange. One timer per stream, re-armed from the time of the last write, sends the
protocol's keep-alive when the upstream has been silent for `heartbeat_s`, so clients and proxies
keep the connection.

Once the headers are out, every stream ends with its protocol's terminal event: a failure after
them (an `ApiError` of a step after the events, such as storing a Responses answer on a full
disk, or a bug) is sent as the protocol's error event, never as a second answer written into
this one, which is what a client would see as a stream cut without an end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from kirod import log
from kirod.canonical.assemble import Assembler, CanonicalCompletion
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.errors import ApiError, ErrorKind
from kirod.tasks import TaskOwner

DEFAULT_HEARTBEAT_S = 10.0

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
NDJSON_HEADERS = {**SSE_HEADERS, "Content-Type": "application/x-ndjson"}


class SSEResponse(web.StreamResponse):
    """A stream whose headers leave with its first events, in one write.

    aiohttp's StreamResponse sends the headers as soon as it is prepared: one more syscall and
    one more client wake-up per stream, just before the first events (which are ready by then:
    the exchange opened on them). `web.Response` buffers its headers the same way.
    """

    # aiohttp's own switch (web.Response turns it off); should a release drop it, the test of
    # this in tests/http/test_streaming.py fails instead of the gain going unnoticed.
    _send_headers_immediately = False


class _Heartbeat:
    """Writes `payload` whenever nothing was written for `interval_s`; `touch()` on each write."""

    def __init__(self, response: web.StreamResponse, payload: bytes, interval_s: float) -> None:
        self._response = response
        self._payload = payload
        self._interval_s = interval_s
        self._loop = asyncio.get_running_loop()
        self._tasks: TaskOwner | None = None  # made at the first beat: most streams need none
        self._beating: asyncio.Task[Any] | None = None
        self.last_write = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(
            self.last_write + interval_s, self._due
        )

    def touch(self) -> None:
        self.last_write = self._loop.time()

    def _due(self) -> None:
        now = self._loop.time()
        quiet_until = self.last_write + self._interval_s
        if now >= quiet_until and (self._beating is None or self._beating.done()):
            self.last_write = now
            if self._tasks is None:
                self._tasks = TaskOwner("sse")
            self._beating = self._tasks.spawn(self._beat(), name="heartbeat")
            quiet_until = now + self._interval_s
        self._timer = self._loop.call_at(quiet_until, self._due)

    async def _beat(self) -> None:
        # A client that went away is noticed by the handler (aiohttp cancels it), not here.
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._response.write(self._payload)

    async def stop(self) -> None:
        """Stop the timer and finish (or cancel) a heartbeat still being written."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._tasks is not None:
            await self._tasks.close()


CUT_AT_SHUTDOWN = ErrorEvent(
    ErrorKind.UNAVAILABLE,
    "kirod is shutting down and this answer was cut short; send the request again",
    code="server_shutting_down",
)
logger = logging.getLogger(__name__)

STREAM_FAILED = ErrorEvent(
    ErrorKind.INTERNAL,
    "kirod failed while sending this answer (its log says why); send the request again",
    code="internal_error",
)
CUT_MARGIN_S = 0.5  # before the drain deadline: the cut streams need a moment to end cleanly


class Streams:
    """The SSE streams being written, so that the drain can end them in their protocol.

    aiohttp cancels what is still running when the drain time is up and closes the connection
    in the same breath, too late to write anything. So just before that, `cut_after` cancels
    each stream itself: the stream writes its terminal error event and ends, and the client
    knows its answer was cut short rather than complete.
    """

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self.cutting = False

    def add(self, task: asyncio.Task[Any]) -> None:
        self._running.add(task)

    def discard(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)

    def cut_after(self, drain_s: float) -> None:
        asyncio.get_running_loop().call_later(max(0.0, drain_s - CUT_MARGIN_S), self._cut)

    def _cut(self) -> None:
        self.cutting = True
        for task in list(self._running):
            task.cancel()


STREAMS = web.AppKey("sse_streams", Streams)


async def stream_sse(
    request: web.Request,
    batches: AsyncIterator[Sequence[CanonicalEvent]],
    encode: Callable[[CanonicalEvent], Sequence[bytes]],
    *,
    start: Sequence[bytes] = (),
    finish: Callable[[], Sequence[bytes]] | None = None,
    heartbeat: bytes,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    headers: Mapping[str, str] = SSE_HEADERS,
) -> web.StreamResponse:
    """Send `start`, then each batch of events as `encode` renders them, then `finish()`.

    `headers` name the framing `encode` writes: SSE unless told otherwise (`NDJSON_HEADERS`).

    If the client goes away, the handler is cancelled here and the pending step of `batches` is
    cancelled with it; the caller's context then aborts the upstream response. If the daemon is
    shutting down and its drain ran out, the stream still ends with its protocol's terminal error
    event, so the client knows the answer was cut rather than complete.
    """
    response = SSEResponse(status=200, headers=headers)
    response.enable_chunked_encoding()
    await response.prepare(request)
    streams, task = request.app.get(STREAMS), asyncio.current_task()
    if streams is not None and task is not None:
        streams.add(task)
    beat = _Heartbeat(response, heartbeat, heartbeat_s)
    pending: list[bytes] = list(start)

    async def flush() -> None:
        if pending:
            data = b"".join(pending)
            pending.clear()
            beat.touch()
            await response.write(data)

    try:
        async for batch in batches:
            for event in batch:
                pending.extend(encode(event))
            await flush()
        if finish is not None:
            pending.extend(finish())
        await flush()
        await beat.stop()
        await response.write_eof()
    except ApiError as error:  # raised by a step after the events (storing the response, …)
        await _end_failed(response, pending, encode, ErrorEvent.from_error(error))
    except ConnectionError:
        raise  # the client went away: the ingress logs it as a 499
    except Exception as exc:
        # The headers are out: an error answer of the ingress would be written into this one
        # and cut it for the client, so the stream ends with its protocol's error event instead.
        log.event(logger, "stream_failed", level=logging.ERROR, error=type(exc).__name__)
        await _end_failed(response, pending, encode, STREAM_FAILED)
    except asyncio.CancelledError:
        if streams is None or not streams.cutting or task is None:
            raise  # the client went away: nobody to tell
        task.uncancel()
        pending.extend(encode(CUT_AT_SHUTDOWN))
        await flush()
        await response.write_eof()
    finally:
        if streams is not None and task is not None:
            streams.discard(task)
        await beat.stop()
    return response


async def _end_failed(
    response: web.StreamResponse,
    pending: list[bytes],
    encode: Callable[[CanonicalEvent], Sequence[bytes]],
    error: ErrorEvent,
) -> None:
    pending.extend(encode(error))
    await response.write(b"".join(pending))
    await response.write_eof()


async def collect(batches: AsyncIterator[Sequence[CanonicalEvent]]) -> CanonicalCompletion:
    """Fold a stream into a completion; a terminal error raises its `ApiError`."""
    assembler = Assembler()
    async for batch in batches:
        for event in batch:
            assembler.feed(event)
    return assembler.result()
