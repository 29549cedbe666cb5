"""Listening sockets, created by us so that modes and addresses are right from the first instant,
and the servers that serve them with a cap on open connections.

Descriptors are budgeted: at start the soft `RLIMIT_NOFILE` is raised to the hard limit, and the
public listener's cap (`max_connections`) is lowered to what that limit leaves room for, so a
flood of idle connections on the public port can never take the descriptors the control socket,
the store and the upstream connections need. At its cap a listener first asks its connections to
make room (the public one closes the connection idle longest, `kirod/http/slots.py`; the control
one never does); when they cannot, the new connection is answered 503 at once and closed.
Descriptor exhaustion is logged at most every ten seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import resource
import socket
import stat
from asyncio.trsock import TransportSocket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from aiohttp import web

from kirod import log
from kirod.errors import AlreadyRunning, StartupError
from kirod.paths import ensure_private_dir, private_umask

logger = logging.getLogger(__name__)

_ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]

BACKLOG = 128
"""The listen queue, and also how many connections asyncio accepts per wake-up: a bound on the
descriptors a burst holds before the cap can refuse them."""
CONTROL_MAX_CONNECTIONS = 64
RESERVED_FDS = 64 + CONTROL_MAX_CONNECTIONS
"""Descriptors kept for everything but public connections: the control socket's connections,
the store and its WAL files, the lock, logs, the event loop's own."""
FDS_PER_CONNECTION = 2  # the client's, and the upstream connection serving its request
MACOS_OPEN_MAX = 10240  # macOS refuses a soft limit above OPEN_MAX even when the hard one is higher
REFUSAL_LINGER_S = 0.5
MAX_LINGERING = 32
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# sun_path is 108 bytes on Linux and 104 on macOS, including the terminating NUL.
MAX_UNIX_PATH = 103


@dataclass(frozen=True)
class UnixListener:
    sock: socket.socket
    path: Path
    inode: tuple[int, int]

    def close(self) -> None:
        """Close the socket and remove its path, unless another process has replaced it."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            current = os.stat(self.path)
            if (current.st_dev, current.st_ino) == self.inode:
                os.unlink(self.path)


def _socket_is_live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_unix(path: Path) -> UnixListener:
    """Listen on `path` with mode 0600 inside a 0700 directory.

    The socket is bound under a 0077 umask so it is never world-accessible, even for an instant.
    A leftover socket file is removed only when nothing answers on it.
    """
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise StartupError(f"socket path {path} is too long for a Unix socket; set socket_path")
    ensure_private_dir(
        path.parent,
        tighten=False,
        fix="set socket_path to a path in another directory (by default it is under "
        "$XDG_RUNTIME_DIR)",
    )
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        if not stat.S_ISSOCK(mode):
            raise StartupError(f"{path} exists and is not a socket; remove it or set socket_path")
        if _socket_is_live(path):
            raise AlreadyRunning(f"kirod is already running: its control socket {path} answers")
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with private_umask(0o177):
            sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind control socket {path}: {exc.strerror}") from None
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    sock.setblocking(False)
    info = os.stat(path)
    return UnixListener(sock=sock, path=path, inode=(info.st_dev, info.st_ino))


def bind_tcp(host: str, port: int) -> socket.socket:
    """Listen on host:port (port 0 picks a free one); errors name the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot resolve listen host {host!r}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        in_use = exc.errno == errno.EADDRINUSE
        hint = " (is another kirod or program using it? set port)" if in_use else ""
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    sock.setblocking(False)
    return sock


def tcp_address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# -- descriptors --------------------------------------------------------------------------------


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return (soft before, soft now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    for target in (hard, min(hard, MACOS_OPEN_MAX)):
        if target == resource.RLIM_INFINITY or (soft != resource.RLIM_INFINITY and soft >= target):
            continue
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        break
    return before, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connection_cap(configured: int, open_files: int) -> int:
    """`max_connections`, lowered to what `open_files` descriptors leave room for."""
    if open_files == resource.RLIM_INFINITY:
        return configured
    room = (open_files - RESERVED_FDS) // FDS_PER_CONNECTION
    return max(1, min(configured, room))


# -- accepting ----------------------------------------------------------------------------------


def _http_answer(status: str, document: object, headers: dict[str, str]) -> bytes:
    body = json.dumps(document, separators=(",", ":")).encode()
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def public_refusal(request_id: str) -> bytes:
    """503 for a public connection beyond the cap, read the same by the Anthropic and OpenAI
    SDKs: the Anthropic envelope with OpenAI's `code` and `param` beside its `type` and
    `message`."""
    document = {
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": "kirod has too many open connections; retry shortly",
            "code": "too_many_connections",
            "param": None,
        },
    }
    headers = {"x-request-id": request_id, "Retry-After": "1"}
    return _http_answer("503 Service Unavailable", document, headers)


def control_refusal() -> bytes:
    """503 for a control connection beyond the cap, in the control API's error shape."""
    document = {
        "error": {
            "code": "too_many_connections",
            "message": "kirod's control socket has too many open connections; retry shortly",
        }
    }
    return _http_answer("503 Service Unavailable", document, {})


def _refuse(conn: socket.socket, answer: bytes) -> None:
    """Answer and close at once, without waiting for the client. What the client has sent is
    read first, so that closing sends a FIN after the answer rather than a reset."""
    try:
        conn.setblocking(False)
        with contextlib.suppress(OSError):
            conn.send(answer)
        with contextlib.suppress(OSError):
            for _ in range(4):
                if not conn.recv(65536):
                    break
    finally:
        conn.close()


class _Refusal(asyncio.Protocol):
    """A connection beyond the cap: answered at once, closed once the client's request is read
    (so that the close sends a FIN after the answer, not a reset that can make the client drop
    it unread), or after REFUSAL_LINGER_S. At most MAX_LINGERING wait like that; the rest are
    closed straight after the answer, so a flood of idle connections holds no descriptors."""

    def __init__(self, answer: bytes, lingering: set[_Refusal]) -> None:
        self._answer = answer
        self._lingering = lingering
        self._transport: asyncio.BaseTransport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self._answer)
        if len(self._lingering) >= MAX_LINGERING:
            transport.close()
            return
        self._transport = transport
        self._lingering.add(self)
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lingering.discard(self)
        if self._timer is not None:
            self._timer.cancel()


def _spare_descriptor() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


class Connections(Protocol):
    """A listener's open connections, as its `Acceptor` counts and adds to them."""

    def __len__(self) -> int:
        """How many are open."""
        ...

    def new(self) -> asyncio.BaseProtocol:
        """The request handler of a connection just accepted."""
        ...

    def make_room(self) -> bool:
        """Close one to make room for a new one, if one may be closed; whether one was."""
        ...


class Served:
    """An aiohttp server's connections, none of which is ever closed to make room."""

    def __init__(self, server: web.Server) -> None:
        self._server = server

    def __len__(self) -> int:
        return len(self._server.connections)

    def new(self) -> asyncio.BaseProtocol:
        return self._server()

    def make_room(self) -> bool:
        return False


class Acceptor:
    """Serves a listening socket to an aiohttp server through the event loop's own server
    (`loop.create_server`, which accepts in batches), at most `limit` connections at once.

    Its protocol factory counts live connections; at the cap it asks them to make room, and
    hands a connection they cannot make room for a `_Refusal` instead of a request handler.

    Out of descriptors, asyncio's accept loop reports the failure to the loop's exception
    handler, stops watching the listener and schedules a retry a second later, and does so for
    each of the `BACKLOG` accepts of its batch (hundreds of log lines a second, and retries
    that multiply). For this listener the report becomes one `accept_failed` line at most
    every ten seconds, and the queue is emptied through a spare descriptor held for that
    (libuv's EMFILE trick): each waiting connection is accepted in its place, answered 503 and
    closed, and asyncio's next accept ends the batch. One failure a second remains.

    Leaving the context stops accepting and closes the listening socket; open connections are
    the runner's to drain.
    """

    def __init__(
        self,
        sock: socket.socket,
        connections: Connections,
        *,
        name: str,
        limit: int,
        refusal: Callable[[], bytes],
    ) -> None:
        self._sock = sock
        self._connections = connections
        self._name = name
        self.limit = limit
        self._refusal = refusal
        self._pending: set[asyncio.BaseProtocol] = set()
        self._lingering: set[_Refusal] = set()
        self._exhausted = log.Throttle(logger)
        self._refused = log.Throttle(logger)
        self._evicted = log.Throttle(logger)
        self._spare: int | None = None
        self._listener: asyncio.Server | None = None
        self._previous_handler: _ExceptionHandler | None = None

    async def __aenter__(self) -> Acceptor:
        loop = asyncio.get_running_loop()
        self._spare = _spare_descriptor()
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._on_loop_exception)
        self._listener = await loop.create_server(self._protocol, sock=self._sock, backlog=BACKLOG)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Closing the server closes the listening socket: connections arriving while the open
        # ones drain are refused by the kernel at once rather than left waiting in the backlog.
        # Not `wait_closed()`: the open connections are the runner's to drain.
        if self._listener is not None:
            self._listener.close()
        loop = asyncio.get_running_loop()
        if loop.get_exception_handler() == self._on_loop_exception:
            loop.set_exception_handler(self._previous_handler)
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    def _protocol(self) -> asyncio.BaseProtocol:
        loop = asyncio.get_running_loop()
        if len(self._connections) + len(self._pending) >= self.limit:
            if not self._connections.make_room():
                self._refused.event(
                    "connection_limit_reached", listener=self._name, limit=self.limit
                )
                return _Refusal(self._refusal(), self._lingering)
            # The connection closed frees its descriptor a turn of the loop later. An idle one
            # holds no upstream descriptor, so the second one budgeted per connection covers a
            # batch of them.
            self._evicted.event("idle_connection_closed", listener=self._name, limit=self.limit)
        handler = self._connections.new()
        # A handler is counted only from its connection_made, which the transport
        # schedules right after this factory returns; until then it counts as pending. This
        # callback, scheduled first, runs just before that connection_made, with nothing in
        # between, so a batch of accepts can never overshoot the cap.
        self._pending.add(handler)
        loop.call_soon(self._pending.discard, handler)
        return handler

    def _on_loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        failure = context.get("exception")
        listener = context.get("socket")
        ours = isinstance(listener, TransportSocket) and listener.fileno() == self._sock.fileno()
        if ours and isinstance(failure, OSError) and failure.errno in _RESOURCE_ERRNOS:
            refused = self._empty_queue()
            self._exhausted.event(
                "accept_failed",
                listener=self._name,
                error=errno.errorcode.get(failure.errno or 0, type(failure).__name__),
                refused=refused,
                hint="out of file descriptors; raise LimitNOFILE or lower max_connections",
            )
        elif self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    def _empty_queue(self) -> int:
        """Accept, answer and close the connections waiting in the listen queue, in the spare
        descriptor's place; how many. The place is left free until the loop's next turn, so that
        asyncio's next accept (Linux takes a descriptor before looking at the queue) finds the
        queue empty and ends the batch instead of failing once more per connection."""
        if self._spare is None:
            return 0
        os.close(self._spare)
        self._spare = None
        asyncio.get_running_loop().call_soon(self._reserve_spare)
        refused = 0
        for _ in range(BACKLOG):
            try:
                conn, _ = self._sock.accept()
            except OSError:  # the queue is empty (or another thread took the place)
                break
            _refuse(conn, self._refusal())
            refused += 1
        return refused

    def _reserve_spare(self) -> None:
        if self._spare is None and self._listener is not None and self._listener.is_serving():
            self._spare = _spare_descriptor()
