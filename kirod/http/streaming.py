"""Writing a canonical event stream to a client as SSE, and folding it for non-streaming replies.

Heartbeats go out while the upstream is silent, so clients and proxies keep the connection. The
next event is awaited in one persistent task rather than with a timeout that would cancel it:
cancelling an async generator mid-step would abort the upstream exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

from aiohttp import web

from kirod.canonical.assemble import Assembler, CanonicalCompletion
from kirod.canonical.events import CanonicalEvent

DEFAULT_HEARTBEAT_S = 10.0

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


async def _next(events: AsyncIterator[CanonicalEvent]) -> CanonicalEvent:
    return await anext(events)


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
    cancelled with it; the caller's context then aborts the upstream response.
    """
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    response.enable_chunked_encoding()
    await response.prepare(request)
    if start:
        await response.write(b"".join(start))
    pending: asyncio.Task[CanonicalEvent] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(_next(events))
            while True:
                done, _ = await asyncio.wait({pending}, timeout=heartbeat_s)
                if done:
                    break
                await response.write(heartbeat)
            try:
                event = pending.result()
            except StopAsyncIteration:
                break
            finally:
                pending = None
            chunks = encode(event)
            if chunks:
                await response.write(b"".join(chunks))
        if finish is not None:
            tail = finish()
            if tail:
                await response.write(b"".join(tail))
        await response.write_eof()
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await pending
    return response


async def collect(events: AsyncIterator[CanonicalEvent]) -> CanonicalCompletion:
    """Fold a stream into a completion; a terminal error raises its `ApiError`."""
    assembler = Assembler()
    async for event in events:
        assembler.feed(event)
    return assembler.result()
