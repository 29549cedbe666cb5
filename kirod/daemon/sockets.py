"""Listening sockets, created by us so that modes and addresses are right from the first instant,
and the accept loops that serve them with a cap on open connections.

Descriptors are budgeted: at start the soft `RLIMIT_NOFILE` is raised to the hard limit, and the
public listener's cap (`max_connections`) is lowered to what that limit leaves room for, so a
flood of idle connections on the public port can never take the descriptors the control socket,
the store and the upstream connections need. A connection beyond its listener's cap is answered
503 at once and closed; descriptor exhaustion is logged at most every ten seconds.
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from aiohttp import web

from kirod import log
from kirod.errors import AlreadyRunning, StartupError
from kirod.paths import ensure_private_dir
from kirod.tasks import TaskOwner

logger = logging.getLogger("kirod.daemon")

BACKLOG = 512
CONTROL_MAX_CONNECTIONS = 64
RESERVED_FDS = 64 + CONTROL_MAX_CONNECTIONS
"""Descriptors kept for everything but public connections: the control socket's connections,
the store and its WAL files, the lock, logs, the event loop's own."""
FDS_PER_CONNECTION = 2  # the client's, and the upstream connection serving its request
MACOS_OPEN_MAX = 10240  # macOS refuses a soft limit above OPEN_MAX even when the hard one is higher
ACCEPT_RETRY_S = 0.1
LOG_INTERVAL_S = 10.0
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_CLIENT_GONE_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EINTR})
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
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind control socket {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
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


class Throttle:
    """Lets an event through at most once per interval; counts the ones it held back."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._next = 0.0
        self._held = 0

    def event(self, name: str, *, level: int = logging.WARNING, **fields: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        held, self._held, self._next = self._held, 0, now + self._interval_s
        log.event(logger, name, level=level, **fields, suppressed=held or None)


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


class Acceptor:
    """Serves a listening socket to an aiohttp server, at most `limit` connections at once.

    Our own accept loop rather than the event loop's: asyncio logs every failed accept of a
    batch (hundreds of lines per wake-up when descriptors run out) and has no connection cap.
    Leaving the context stops accepting and closes the listening socket; open connections are
    the runner's to drain.
    """

    def __init__(
        self,
        sock: socket.socket,
        server: web.Server,
        *,
        name: str,
        limit: int,
        refusal: Callable[[], bytes],
    ) -> None:
        self._sock = sock
        self._server = server
        self._name = name
        self.limit = limit
        self._refusal = refusal
        self._tasks = TaskOwner(f"accept-{name}")
        self._exhausted = Throttle()
        self._refused = Throttle()

    async def __aenter__(self) -> Acceptor:
        self._tasks.spawn(self._run(), name="loop")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._tasks.close()
        # Connections arriving while the open ones drain are refused by the kernel at once
        # rather than left waiting in the backlog.
        with contextlib.suppress(OSError):
            self._sock.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:
                if exc.errno in _CLIENT_GONE_ERRNOS:
                    continue
                # Out of descriptors (or anything else): retry soon, say so at most every 10 s;
                # a listener must never stop accepting for good while the daemon serves.
                exhausted = exc.errno in _RESOURCE_ERRNOS
                self._exhausted.event(
                    "accept_failed",
                    level=logging.WARNING if exhausted else logging.ERROR,
                    listener=self._name,
                    error=errno.errorcode.get(exc.errno or 0, type(exc).__name__),
                    hint="out of file descriptors; raise LimitNOFILE or lower max_connections"
                    if exhausted
                    else None,
                )
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if len(self._server.connections) >= self.limit:
                self._refused.event(
                    "connection_limit_reached", listener=self._name, limit=self.limit
                )
                _refuse(conn, self._refusal())
                continue
            try:
                await loop.connect_accepted_socket(self._server, conn)
            except OSError:  # the client left before its transport was made
                conn.close()
            except asyncio.CancelledError:
                conn.close()
                raise
