"""The public listener's connection slots on real loopback sockets: aiohttp's server, kirod's
`PublicConnections` and the daemon's `Acceptor`, as the daemon wires them. At the cap the
connection idle longest makes room (silent, part of a head, or between keep-alive requests); a
connection with a request in flight, a stream included, is never closed for another; a
connection that sends nothing is closed at the first-byte deadline."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from kirod.daemon.sockets import Acceptor, bind_tcp, public_refusal
from kirod.http.connection import PublicConnections

LIMIT = 4


def answering(release: asyncio.Event) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    async def answer(request: web.BaseRequest) -> web.StreamResponse:
        if request.path != "/stream":
            return web.Response(text="ok")
        # A stream that has begun and waits: its connection has a request in flight.
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first;")
        await release.wait()
        await response.write(b"last")
        await response.write_eof()
        return response

    return answer


@contextlib.asynccontextmanager
async def serving(
    *, first_byte_s: float = 30.0, header_s: float = 30.0
) -> AsyncIterator[tuple[int, PublicConnections, asyncio.Event]]:
    release = asyncio.Event()
    server = web.Server(answering(release), handler_cancellation=True)
    connections = PublicConnections(server, first_byte_s=first_byte_s, header_s=header_s)
    sock = bind_tcp("127.0.0.1", 0)
    try:
        async with Acceptor(
            sock, connections, name="public", limit=LIMIT, refusal=lambda: public_refusal("r")
        ):
            yield sock.getsockname()[1], connections, release
    finally:
        release.set()
        await server.shutdown(1.0)
        sock.close()


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def connect(port: int, connections: PublicConnections, sent: bytes = b"") -> socket.socket:
    """A client socket, once the server counts it, having sent `sent`."""
    before = len(connections)
    client = socket.create_connection(("127.0.0.1", port))
    client.setblocking(False)
    await until(lambda: len(connections) == min(before + 1, LIMIT), "the connection to count")
    if sent:
        client.sendall(sent)
    return client


async def read_answer(client: socket.socket) -> bytes:
    """One whole answer to a keep-alive request (its body is `ok`)."""
    loop = asyncio.get_running_loop()
    received = b""
    while not received.endswith(b"\r\n\r\nok"):
        chunk = await asyncio.wait_for(loop.sock_recv(client, 65536), 3)
        assert chunk, received
        received += chunk
    return received


async def is_closed(client: socket.socket, within_s: float = 1.0) -> bool:
    """Whether the server closes `client` within `within_s` (it sends it nothing else)."""
    loop = asyncio.get_running_loop()
    try:
        chunk = await asyncio.wait_for(loop.sock_recv(client, 65536), within_s)
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    assert chunk == b"", chunk
    return True


KEEP_ALIVE_GET = b"GET / HTTP/1.1\r\nHost: kirod\r\n\r\n"


async def test_at_the_cap_the_connection_idle_longest_makes_room() -> None:
    async with serving() as (port, connections, _):
        silent = await connect(port, connections)
        partial = await connect(port, connections, b"POST /v1/messages HTTP/1.1\r\nHost: k")
        kept = await connect(port, connections, KEEP_ALIVE_GET)
        await read_answer(kept)  # idle between keep-alive requests from now
        later = await connect(port, connections)
        clients = [silent, partial, kept, later]

        # Each new connection takes the place of the one idle longest, whatever it sent.
        for expected in (silent, partial, kept):
            clients.append(await connect(port, connections))
            assert await is_closed(expected)
            assert len(connections) == LIMIT
        # A request makes `later` the youngest idle connection: the next one closed is the
        # oldest of the rest, not it.
        later.sendall(KEEP_ALIVE_GET)
        await read_answer(later)
        clients.append(await connect(port, connections))
        assert await is_closed(clients[4])
        assert not await is_closed(later, within_s=0.2)
        # The survivors still serve.
        later.sendall(KEEP_ALIVE_GET)
        assert (await read_answer(later)).startswith(b"HTTP/1.1 200 ")
        for client in clients:
            client.close()


async def test_a_head_that_arrives_with_the_new_connection_is_in_flight_already() -> None:
    async with serving() as (port, connections, _):
        kept = await connect(port, connections, KEEP_ALIVE_GET)
        await read_answer(kept)
        others = [await connect(port, connections) for _ in range(LIMIT - 1)]
        # `kept` is the connection idle longest. Its next request and a new connection reach
        # the server in the same turn of its loop: aiohttp parses the head at once but starts
        # its handler a turn later, after the new connection asks for a slot.
        kept.sendall(KEEP_ALIVE_GET)
        others.append(socket.create_connection(("127.0.0.1", port)))
        assert (await read_answer(kept)).startswith(b"HTTP/1.1 200 ")
        assert await is_closed(others[0])
        for client in [kept, *others]:
            client.close()


async def test_a_connection_with_a_stream_in_flight_is_never_closed_for_another() -> None:
    loop = asyncio.get_running_loop()
    async with serving() as (port, connections, release):
        streams = []
        for _ in range(LIMIT - 1):
            stream = await connect(port, connections, b"GET /stream HTTP/1.1\r\nHost: k\r\n\r\n")
            head = await asyncio.wait_for(loop.sock_recv(stream, 65536), 3)
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"first;" in head
            streams.append(stream)
        # Twice the cap of idle connections: each takes the one slot not in flight in turn.
        idle = [await connect(port, connections)]
        for _ in range(2 * LIMIT - 1):
            idle.append(await connect(port, connections))
            assert await is_closed(idle[-2])
        assert not await is_closed(idle[-1], within_s=0.05)
        for stream in streams:
            assert not await is_closed(stream, within_s=0.05)
        release.set()
        for stream in streams:
            received = b""
            while not received.endswith(b"0\r\n\r\n"):
                chunk = await asyncio.wait_for(loop.sock_recv(stream, 65536), 3)
                assert chunk, received
                received += chunk
            assert b"last" in received
            stream.close()
        for client in idle:
            client.close()


async def test_when_every_connection_has_a_request_in_flight_a_new_one_is_refused() -> None:
    loop = asyncio.get_running_loop()
    async with serving() as (port, connections, _):
        streams = []
        for _ in range(LIMIT):
            stream = await connect(port, connections, b"GET /stream HTTP/1.1\r\nHost: k\r\n\r\n")
            await asyncio.wait_for(loop.sock_recv(stream, 65536), 3)
            streams.append(stream)
        refused = socket.create_connection(("127.0.0.1", port))
        refused.setblocking(False)
        answer = await asyncio.wait_for(loop.sock_recv(refused, 65536), 3)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b'"code":"too_many_connections"' in answer
        refused.close()
        for stream in streams:
            stream.close()


async def test_a_silent_connection_is_closed_at_the_first_byte_deadline() -> None:
    async with serving(first_byte_s=0.5, header_s=5.0) as (port, connections, _):
        opened = time.monotonic()
        silent = await connect(port, connections)
        spoke = await connect(port, connections, b"G")
        assert await is_closed(silent, within_s=2.0)
        assert 0.4 < time.monotonic() - opened < 1.5
        # One byte was enough: the header deadline (5 s) bounds it from then on.
        assert not await is_closed(spoke, within_s=0.5)
        assert len(connections) == 1
        silent.close()
        spoke.close()
