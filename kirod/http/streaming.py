"""Writing a canonical event stream to a client as SSE, and folding it for non-streaming replies.

The handler iterates the event stream itself: nothing but the client's disconnect (aiohttp then
cancels the handler) ever cancels a step of it, because cancelling an async generator mid-step
aborts the upstream exchange. Two things ride along without a task per event:

- **Coalescing.** One upstream frame often becomes several events (a block start and its first
  delta; the last block's stop, the usage and the end). Each step of the stream is first run
  synchronously; while steps complete without waiting, their bytes are gathered, and they go out
  in one write just before a step has to wait for the upstream. Every event still leaves as soon
  as the stream stops producing, so no latency is added; only syscalls and TCP segments are saved.
- **Heartbeats.** One timer per stream, re-armed from the time of the last write, sends the
  protocol's keep-alive when the upstream has been silent for `heartbeat_s`, so clients and
  proxies keep the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Sequence
from typing import Any, cast

from aiohttp import web

from kirod.canonical.assemble import Assembler, CanonicalCompletion
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.errors import ErrorKind
from kirod.tasks import TaskOwner

DEFAULT_HEARTBEAT_S = 10.0

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


class _Heartbeat:
    """Writes `payload` whenever nothing was written for `interval_s`; `touch()` on each write."""

    def __init__(self, response: web.StreamResponse, payload: bytes, interval_s: float) -> None:
        self._response = response
        self._payload = payload
        self._interval_s = interval_s
        self._loop = asyncio.get_running_loop()
        self._tasks = TaskOwner("sse")
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
        await self._tasks.close()


@types.coroutine
def _resume(step: Coroutine[Any, Any, Any], suspended_on: Any) -> Generator[Any, Any, Any]:
    """Finish awaiting `step`, whose first `send(None)` suspended on `suspended_on`.

    This is what `await` does (PEP 380 delegation) after its first step: values the step
    suspends on go to the running task, and what the task sends or throws goes back in.
    """
    while True:
        try:
            sent = yield suspended_on
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:
            try:
                suspended_on = step.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                suspended_on = step.send(sent)
            except StopIteration as stop:
                return stop.value


_END: Any = object()

CUT_AT_SHUTDOWN = ErrorEvent(
    ErrorKind.UNAVAILABLE,
    "kirod is shutting down and this answer was cut short; send the request again",
    code="server_shutting_down",
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


def _abandon(step: Coroutine[Any, Any, Any]) -> None:
    """Cancel a started step, as the task awaiting it would have been cancelled."""
    try:
        step.throw(asyncio.CancelledError())
    except BaseException:  # noqa: S110 - the step ends with the cancellation (or its own error)
        pass
    else:
        with contextlib.suppress(RuntimeError):  # it ignored the cancellation
            step.close()


async def stream_sse(
    request: web.Request,
    events: AsyncIterator[CanonicalEvent],
    encode: Callable[[CanonicalEvent], Sequence[bytes]],
    *,
    start: Sequence[bytes] = (),
    finish: Callable[[], Sequence[bytes]] | None = None,
    heartbeat: bytes,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
) -> web.StreamResponse:
    """Send `start`, then each event as `encode` renders it, then `finish()`.

    If the client goes away, the handler is cancelled here and the pending step of `events` is
    cancelled with it; the caller's context then aborts the upstream response. If the daemon is
    shutting down and its drain ran out, the stream still ends with its protocol's terminal error
    event, so the client knows the answer was cut rather than complete.
    """
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
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

    async def next_event() -> Any:
        """The next event (or `_END`), flushing what is gathered if the stream must wait."""
        step = cast("Coroutine[Any, Any, CanonicalEvent]", events.__anext__())
        try:
            suspended_on = step.send(None)
        except StopIteration as ready:
            return ready.value
        except StopAsyncIteration:
            return _END
        try:
            await flush()
        except BaseException:
            _abandon(step)
            raise
        try:
            return await _resume(step, suspended_on)
        except StopAsyncIteration:
            return _END

    try:
        while (event := await next_event()) is not _END:
            pending.extend(encode(event))
        if finish is not None:
            pending.extend(finish())
        await flush()
        await beat.stop()
        await response.write_eof()
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


async def collect(events: AsyncIterator[CanonicalEvent]) -> CanonicalCompletion:
    """Fold a stream into a completion; a terminal error raises its `ApiError`."""
    assembler = Assembler()
    async for event in events:
        assembler.feed(event)
    return assembler.result()
