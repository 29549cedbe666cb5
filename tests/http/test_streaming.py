"""`stream_sse` on a real loopback server: order, writing before waits, heartbeats, disconnects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kirod.canonical.events import BlockStop, CanonicalEvent, ErrorEvent, MessageStart, TextDelta
from kirod.errors import ApiError, ErrorKind
from kirod.http.streaming import stream_sse

Source = Callable[[], AsyncIterator[CanonicalEvent]]


def encode(event: CanonicalEvent) -> Sequence[bytes]:
    match event:
        case TextDelta():
            return [f"data: {event.text}\n\n".encode()]
        case MessageStart():
            return [b"data: start\n\n"]
        case ErrorEvent():
            return [f"data: error {event.code}\n\n".encode()]
        case _:
            return []


async def one_per_batch(
    events: AsyncIterator[CanonicalEvent],
) -> AsyncIterator[list[CanonicalEvent]]:
    async for event in events:
        yield [event]


async def serve(
    source: Source, *, heartbeat_s: float = 10.0, done: asyncio.Event | None = None
) -> TestClient[web.Request, web.Application]:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            return await stream_sse(
                request,
                one_per_batch(source()),
                encode,
                start=[b"data: hello\n\n"],
                finish=lambda: [b"data: bye\n\n"],
                heartbeat=b": ping\n\n",
                heartbeat_s=heartbeat_s,
            )
        finally:
            if done is not None:
                done.set()

    app = web.Application(handler_args={"handler_cancellation": True})
    app.router.add_get("/", handler)
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    return client


async def read_until(response: aiohttp.ClientResponse, marker: bytes, timeout_s: float) -> bytes:
    seen = b""
    async with asyncio.timeout(timeout_s):
        while marker not in seen:
            chunk = await response.content.readany()
            if not chunk:
                break
            seen += chunk
    return seen


async def with_client(
    source: Source,
    body: Callable[[TestClient[web.Request, web.Application]], Awaitable[None]],
    **options: float,
) -> None:
    client = await serve(source, **options)
    try:
        await body(client)
    finally:
        await client.close()


async def test_events_in_order_between_start_and_finish() -> None:
    async def source() -> AsyncIterator[CanonicalEvent]:
        yield MessageStart("m", "model", 1)
        for text in ("a", "b", "c"):
            yield TextDelta(0, text)
            await asyncio.sleep(0)
        yield BlockStop(0)  # renders to nothing

    async def body(client: TestClient[web.Request, web.Application]) -> None:
        response = await client.get("/")
        assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        assert await response.read() == (
            b"data: hello\n\ndata: start\n\ndata: a\n\ndata: b\n\ndata: c\n\ndata: bye\n\n"
        )

    await with_client(source, body)


async def test_gathered_events_are_sent_before_the_stream_waits() -> None:
    release = asyncio.Event()

    async def source() -> AsyncIterator[CanonicalEvent]:
        yield MessageStart("m", "model", 1)
        yield TextDelta(0, "first")  # produced without waiting: gathered with the start
        await release.wait()  # the client must already have both before this returns
        yield TextDelta(0, "second")

    async def body(client: TestClient[web.Request, web.Application]) -> None:
        response = await client.get("/")
        seen = await read_until(response, b"data: first\n\n", timeout_s=5)
        assert seen == b"data: hello\n\ndata: start\n\ndata: first\n\n"
        release.set()
        assert await read_until(response, b"bye", timeout_s=5) == (b"data: second\n\ndata: bye\n\n")

    await with_client(source, body)


async def test_the_headers_leave_with_the_first_events_in_one_write() -> None:
    """Nothing is written at `prepare`: the status line and headers go out with the first batch,
    one send and one client wake-up fewer per stream (issue 16's measured gain)."""
    release = asyncio.Event()

    async def source() -> AsyncIterator[CanonicalEvent]:
        await release.wait()
        yield MessageStart("m", "model", 1)

    async def body(client: TestClient[web.Request, web.Application]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            try:
                early = await asyncio.wait_for(reader.read(65536), timeout=0.3)
            except TimeoutError:
                early = b""
            assert early == b""  # prepared, but no headers sent on their own
            release.set()
            first = await asyncio.wait_for(reader.read(65536), timeout=5)
            assert first.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"data: hello\n\n" in first
            assert b"data: start\n\n" in first
        finally:
            writer.close()

    await with_client(source, body)


async def test_heartbeats_fill_silences_only() -> None:
    loop = asyncio.get_running_loop()
    silences: list[float] = []  # the busy stream's gaps between events, on the loop's clock

    async def source() -> AsyncIterator[CanonicalEvent]:
        yield TextDelta(0, "a")
        await asyncio.sleep(0.45)
        last = loop.time()
        for _ in range(10):  # a busy stream: an event every 20 ms, never silent for 100 ms
            yield TextDelta(0, "b")
            await asyncio.sleep(0.02)
            silences.append(loop.time() - last)
            last = loop.time()

    async def body(client: TestClient[web.Request, web.Application]) -> None:
        response = await client.get("/")
        data = await response.read()
        before_b, _, after_b = data.partition(b"data: b\n\n")
        assert before_b.count(b": ping\n\n") >= 3
        # A loaded machine may stretch a 20 ms sleep past the heartbeat's 100 ms: that gap is a
        # real silence, and may carry its ping; none comes while events keep flowing.
        assert after_b.count(b": ping\n\n") <= sum(gap >= 0.08 for gap in silences)
        assert data.endswith(b"data: bye\n\n")

    await with_client(source, body, heartbeat_s=0.1)


async def test_a_client_disconnect_cancels_the_waiting_step() -> None:
    step_cancelled = asyncio.Event()
    handler_done = asyncio.Event()

    async def source() -> AsyncIterator[CanonicalEvent]:
        yield TextDelta(0, "a")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            step_cancelled.set()
            raise
        yield TextDelta(0, "never")

    client = await serve(source, done=handler_done)
    try:
        response = await client.get("/")
        await read_until(response, b"data: a\n\n", timeout_s=5)
        started = time.monotonic()
        response.close()  # the client goes away mid-stream
        async with asyncio.timeout(5):
            await step_cancelled.wait()
            await handler_done.wait()
        assert time.monotonic() - started < 5
    finally:
        await client.close()


async def test_an_error_in_the_stream_ends_it_with_the_protocols_error_event() -> None:
    """Once the headers are out, a failure is the stream's last event, not a cut connection (a
    second answer the ingress would write into this one): a bug as an internal error, an
    `ApiError` of a step after the events (a response the full disk could not store) as itself."""
    failures: list[Exception] = [
        RuntimeError("boom"),
        ApiError(ErrorKind.INSUFFICIENT_STORAGE, "disk full", code="insufficient_storage"),
    ]
    for failure, code in zip(failures, ("internal_error", "insufficient_storage"), strict=True):

        async def source(failure: Exception = failure) -> AsyncIterator[CanonicalEvent]:
            yield TextDelta(0, "a")
            await asyncio.sleep(0)
            raise failure

        async def body(client: TestClient[web.Request, web.Application], code: str = code) -> None:
            response = await client.get("/")
            data = await response.read()  # ends cleanly: no ClientPayloadError
            assert data == f"data: hello\n\ndata: a\n\ndata: error {code}\n\n".encode()

        await with_client(source, body)
