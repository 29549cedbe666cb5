"""The capped server of `kirod.daemon.sockets` on real loopback sockets, with a real aiohttp
server behind it: the cap holds for a burst accepted in one batch, the excess is answered 503
and closed, and running out of descriptors is one log line, not one per wake-up."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from kirod.daemon.sockets import Acceptor, Served, bind_tcp, control_refusal

LIMIT = 3


async def ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@contextlib.asynccontextmanager
async def serving(limit: int = LIMIT) -> AsyncIterator[tuple[int, web.Server]]:
    server = web.Server(ok)
    sock = bind_tcp("127.0.0.1", 0)
    try:
        async with Acceptor(
            sock, Served(server), name="test", limit=limit, refusal=control_refusal
        ):
            yield sock.getsockname()[1], server
    finally:
        await server.shutdown(1.0)
        sock.close()


async def get(port: int) -> bytes:
    """One `GET /` on a new connection; the whole answer (until the server closes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def idle(port: int, count: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(count):
        writers.append((await asyncio.open_connection("127.0.0.1", port))[1])
    return writers


async def wait_for_connections(server: web.Server, count: int) -> None:
    for _ in range(200):
        if len(server.connections) == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(server.connections)} connections, not {count}")


async def test_a_connection_beyond_the_cap_is_answered_503_and_closed() -> None:
    async with serving() as (port, server):
        held = await idle(port, LIMIT)
        await wait_for_connections(server, LIMIT)
        answer = await get(port)
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"Connection: close" in answer
        assert b'"code":"too_many_connections"' in answer
        held.pop().close()
        await wait_for_connections(server, LIMIT - 1)
        assert (await get(port)).startswith(b"HTTP/1.1 200 ")
        for writer in held:
            writer.close()


async def test_a_burst_accepted_in_one_batch_does_not_overshoot_the_cap() -> None:
    async with serving() as (port, server):
        # Connected before the loop runs again: the kernel queues them all, and asyncio accepts
        # them in one wake-up.
        clients = []
        for _ in range(LIMIT * 4):
            client = socket.create_connection(("127.0.0.1", port))
            clients.append(client)
        try:
            await asyncio.sleep(0.2)
            assert len(server.connections) == LIMIT
        finally:
            for client in clients:
                client.close()


@contextlib.contextmanager
def descriptors_exhausted() -> Iterator[None]:
    """Hold every descriptor the soft limit allows, for the duration."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 16, hard))
    held: list[int] = []
    try:
        for _ in range(highest + 16):
            try:
                held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                if exc.errno != errno.EMFILE:
                    raise
                break
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_out_of_descriptors_the_queue_is_answered_503_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    async with serving() as (port, _):
        # Made now: while descriptors are exhausted, connecting needs none but creating does.
        clients = [socket.socket() for _ in range(3)]
        try:
            with descriptors_exhausted():
                for client in clients:
                    # Each one fails an accept: asyncio stops watching the listener and retries
                    # a second later, when the next one is waiting.
                    client.connect(("127.0.0.1", port))
                    await asyncio.sleep(1.05)
            for client in clients:
                client.settimeout(5)
                assert client.recv(65536).startswith(b"HTTP/1.1 503 ")
            # Once descriptors are free again, the listener serves.
            assert (await get(port)).startswith(b"HTTP/1.1 200 ")
        finally:
            for client in clients:
                client.close()
    assert loop.get_exception_handler() is before
    messages = [record.getMessage() for record in caplog.records]
    assert messages.count("accept_failed") == 1, messages
    assert not [record for record in caplog.records if record.name == "asyncio"]
