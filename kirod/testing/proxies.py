"""Small real proxies on loopback for tests: HTTP (CONNECT and plain forwarding) and SOCKS5.

Each listens on 127.0.0.1, relays only to loopback targets, and records the target of every
connection it made (`targets`) and the credentials it was offered (`offered`), so a test can
assert whose traffic went where. Bounded: a handshake must arrive within `HANDSHAKE_TIMEOUT_S`
and fit in `MAX_HEAD_BYTES`; at most `MAX_CONNECTIONS` relays at once.

    async with HttpProxy() as proxy: ...      # proxy.url == "http://127.0.0.1:PORT"
    async with HttpProxy(tls=context) as proxy: ...  # "https://…": TLS to the proxy itself
    with ThreadedProxy(Socks5Proxy(username="u", password="p")) as proxy: ...  # for a subprocess
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import ipaddress
import socket
import struct
import threading
from dataclasses import dataclass, field
from ssl import SSLContext
from urllib.parse import urlsplit

from kirod.tasks import TaskOwner
from kirod.testing.listeners import stop_accepting

_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
HANDSHAKE_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
MAX_CONNECTIONS = 64
_LOOPBACK_NAMES = {"localhost"}


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class _Base(abc.ABC):
    """What both proxies share: the listener, the relay, the records."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    targets: list[tuple[str, int]] = field(default_factory=list)
    offered: list[tuple[str, str] | None] = field(default_factory=list)
    # What each relayed connection began with (at most MAX_HEAD_BYTES): the request head, for a
    # test to tell whose request it was (the fake Kiro is plain HTTP).
    seen: list[bytes] = field(default_factory=list)
    refused: int = 0
    # A server context (kirod.testing.tls): clients speak TLS to the proxy, which relays what is
    # inside it as it would in the clear (an https:// proxy). HttpProxy only.
    tls: SSLContext | None = field(default=None, repr=False)
    _server: asyncio.Server | None = None
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CONNECTIONS))
    _relays: TaskOwner = field(default_factory=lambda: TaskOwner("test-proxy"))
    # Every stream the proxy accepted or opened and has not closed yet: `close` closes what a
    # handler cut short (or one that never got to run) left open.
    _open_writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _closing: bool = False

    scheme = "http"

    def __post_init__(self) -> None:
        if self.tls is not None:
            self.scheme = "https"

    @property
    def port(self) -> int:
        assert self._server is not None, "start the proxy first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The proxy's URL, with its credentials when it has any."""
        auth = f"{self.username}:{self.password}@" if self.username is not None else ""
        return f"{self.scheme}://{auth}127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._closing = False
        self._relays = TaskOwner("test-proxy")
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.tls)

    async def close(self) -> None:
        if self._server is not None:
            # A connection accepted just before reaches `_accept`, which aborts it now.
            self._closing = True
            await stop_accepting(self._server.sockets)
            self._server.close()
            await self._relays.close()
            for writer in list(self._open_writers):
                writer.transport.abort()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            self._open_writers.clear()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> _Base:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _accepts(self, offered: tuple[str, str] | None) -> bool:
        self.offered.append(offered)
        return self.username is None or offered == (self.username, self.password or "")

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Called as the connection is made (a plain function, not a coroutine), so the stream is
        # on record before its handler runs, and `close` shuts it even if the handler never ran.
        if self._closing:
            writer.transport.abort()
            return
        self._open_writers.add(writer)
        self._relays.spawn(self._handle(reader, writer), name="relay", awaited=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A client that breaks off or speaks garbage ends only its own connection; `close`
        # cancels the relays, and a handler ending cancelled would be logged by asyncio.
        ended = (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError)
        try:
            with contextlib.suppress(*ended, asyncio.CancelledError):
                async with self._slots:
                    await self._serve(reader, writer)
        finally:
            await self._shut(writer)

    async def _shut(self, writer: asyncio.StreamWriter) -> None:
        # Off the record only once closed: a close cut short (or waiting on a peer that reads
        # nothing) is aborted by `close`.
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        self._open_writers.discard(writer)

    @abc.abstractmethod
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Speak the proxy's protocol with one client."""

    async def _open(self, host: str, port: int) -> _Streams:
        """Connect to a loopback target (and record it); refuse any other."""
        if not _loopback(host):
            self.refused += 1
            raise ValueError(f"{host} is not a loopback host")
        self.targets.append((host, port))
        streams = await asyncio.open_connection(host, port)
        self._open_writers.add(streams[1])
        return streams

    async def _pipe(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        target: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        *,
        record: bool = True,
    ) -> None:
        async def copy(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, record: list[bytes] | None
        ) -> None:
            try:
                while chunk := await source.read(65536):
                    if record is not None:
                        record.append(chunk[:MAX_HEAD_BYTES])
                        record = None
                    sink.write(chunk)
                    await sink.drain()
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    if sink.can_write_eof():
                        sink.write_eof()

        try:
            await asyncio.gather(
                copy(client[0], target[1], self.seen if record else None),
                copy(target[0], client[1], None),
            )
        finally:
            await self._shut(target[1])


class HttpProxy(_Base):
    """An HTTP proxy: `CONNECT host:port` tunnels, and absolute-URI requests forwarded plainly
    (how aiohttp sends an `http://` target through an HTTP proxy). Basic auth when given
    credentials (407 without them)."""

    scheme = "http"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANDSHAKE_TIMEOUT_S)
        if len(head) > MAX_HEAD_BYTES:
            raise ValueError("request head too large")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = [line for line in lines[1:] if line]
        offered = None
        for line in headers:
            name, _, value = line.partition(":")
            if name.strip().lower() == "proxy-authorization":
                kind, _, encoded = value.strip().partition(" ")
                if kind.lower() == "basic":
                    user, _, password = base64.b64decode(encoded).decode().partition(":")
                    offered = (user, password)
        if not self._accepts(offered):
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
            writer.write(b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n')
            await writer.drain()
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = await self._open(host.strip("[]"), int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await self._pipe((reader, writer), upstream)
            return
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        upstream = await self._open(parts.hostname, parts.port or 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        kept = [
            line
            for line in headers
            if line.partition(":")[0].strip().lower()
            not in ("proxy-authorization", "proxy-connection")
        ]
        forwarded = "\r\n".join([f"{method} {path} {version}", *kept, "", ""]).encode("latin-1")
        self.seen.append(forwarded)
        upstream[1].write(forwarded)
        await upstream[1].drain()
        await self._pipe((reader, writer), upstream, record=False)


class Socks5Proxy(_Base):
    """A SOCKS5 proxy (RFC 1928, CONNECT only) with RFC 1929 username/password when given
    credentials. `names` records the host names clients asked it to resolve (`socks5h`)."""

    scheme = "socks5"

    def __init__(self, username: str | None = None, password: str | None = None) -> None:
        super().__init__(username=username, password=password)
        self.names: list[str] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def read(n: int) -> bytes:
            return await asyncio.wait_for(reader.readexactly(n), HANDSHAKE_TIMEOUT_S)

        version, count = await read(2)
        if version != 5:
            raise ValueError("not SOCKS5")
        methods = await read(count)
        wanted = 0x02 if self.username is not None else 0x00
        if wanted not in methods:
            writer.write(b"\x05\xff")
            await writer.drain()
            self._accepts(None)
            return
        writer.write(bytes([5, wanted]))
        await writer.drain()
        offered = None
        if wanted == 0x02:
            _, user_len = await read(2)
            user = (await read(user_len)).decode()
            (password_len,) = await read(1)
            offered = (user, (await read(password_len)).decode())
        if not self._accepts(offered):
            writer.write(b"\x01\x01")
            await writer.drain()
            return
        if wanted == 0x02:
            writer.write(b"\x01\x00")
            await writer.drain()
        _, command, _, address_type = await read(4)
        if address_type == 1:
            host = socket.inet_ntop(socket.AF_INET, await read(4))
        elif address_type == 4:
            host = socket.inet_ntop(socket.AF_INET6, await read(16))
        elif address_type == 3:
            (length,) = await read(1)
            host = (await read(length)).decode()
            self.names.append(host)
        else:
            raise ValueError("unknown address type")
        (port,) = struct.unpack("!H", await read(2))
        if command != 1:
            writer.write(b"\x05\x07\x00\x01" + bytes(6))  # command not supported
            await writer.drain()
            return
        try:
            upstream = await self._open(host, port)
        except (OSError, ValueError):
            writer.write(b"\x05\x02\x00\x01" + bytes(6))  # not allowed by the ruleset
            await writer.drain()
            return
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        await writer.drain()
        await self._pipe((reader, writer), upstream)


class ThreadedProxy:
    """Run a proxy on its own event loop in a thread, for tests that drive a daemon process."""

    def __init__(self, proxy: _Base) -> None:
        self.proxy = proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> _Base:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._started(), self._loop).result(10)
        return self.proxy

    async def _started(self) -> None:
        # The proxy's semaphore and tasks belong to this loop.
        self.proxy._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        await self.proxy.start()

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
