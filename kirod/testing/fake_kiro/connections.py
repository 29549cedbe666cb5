"""The fake's connections: which one each request came on, and faults played on kept-alive ones.

A server or a proxy closes a kept-alive connection once it has been idle for its own timeout. A
client that reuses the connection at that moment sends its request across the close: the server
never takes the request, and the client sees the connection closed (FIN), reset (RST) or shut on
the server's side only (a half-close) instead of an answer. `Connections.fail_next` plays that:
the next requests arriving on a connection that already served one meet the fault before the
fake records them, as the server never read them. `Connections.fail_now` plays the close at
another moment: while the client is idle (it may notice before reusing the connection), or in
the middle of an answer.

Every method is thread-safe; `fail_now` runs on the fake's loop and waits for it.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import itertools
import socket
import struct
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

HALF_CLOSE_HOLD_S = 5.0
"""How long a half-closed connection waits for the client to close it before it is reset."""
FAIL_NOW_TIMEOUT_S = 5.0


class ConnectionFault(enum.Enum):
    """What the server does to a connection; the value says what the client receives."""

    CLOSE = "FIN: the connection closed, no answer"
    RESET = "RST: the connection reset, no answer"
    HALF_CLOSE = "FIN from the server's side only, the connection left open, no answer"


@dataclass
class _Connection:
    serial: int
    served: int = 0  # requests it carried
    busy: int = 0  # requests in progress on it


_KEY = web.RequestKey("fake_kiro.connection", _Connection)  # a request's, `admit` to `done`


@dataclass(frozen=True)
class _Armed:
    fault: ConnectionFault
    operation: str | None
    reused_only: bool


def strike(transport: asyncio.Transport, fault: ConnectionFault) -> None:
    """Apply `fault` to one connection (on the fake's loop)."""
    if fault is ConnectionFault.RESET:
        sock = transport.get_extra_info("socket")
        if sock is not None:  # SO_LINGER 0: close() sends RST, not FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    elif fault is ConnectionFault.CLOSE:
        transport.close()
    else:
        transport.write_eof()


class Connections:
    """The connections the fake is serving, and the faults armed against them."""

    def __init__(self, count: Callable[[str], None]) -> None:
        self._count = count  # FakeKiro's counters: `connection_fault:<name>`
        self._lock = threading.Lock()
        self._open: weakref.WeakKeyDictionary[asyncio.Transport, _Connection] = (
            weakref.WeakKeyDictionary()
        )
        self._serials = itertools.count(1)
        self._armed: collections.deque[_Armed] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    def fail_next(
        self,
        fault: ConnectionFault,
        count: int = 1,
        *,
        operation: str | None = "chat",
        reused_only: bool = True,
    ) -> None:
        """Meet the next `count` requests of `operation` (None: any) that arrive on a kept-alive
        connection (or on any, if not `reused_only`) with `fault`, unrecorded."""
        with self._lock:
            self._armed.extend([_Armed(fault, operation, reused_only)] * count)

    def armed(self) -> int:
        """How many `fail_next` faults are still waiting for their request."""
        with self._lock:
            return len(self._armed)

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def open_serials(self) -> set[int]:
        """The serials of the connections still open."""
        with self._lock:
            return {c.serial for t, c in self._open.items() if not t.is_closing()}

    def fail_now(self, fault: ConnectionFault, *, busy: bool = False) -> int:
        """Apply `fault` at once to every open connection that served a request and is idle (or,
        if `busy`, is answering one); return how many."""
        loop = self._loop
        if loop is None:
            return 0
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return self._fail_now(fault, busy)

        async def on_loop() -> int:
            return self._fail_now(fault, busy)

        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(FAIL_NOW_TIMEOUT_S)

    def _fail_now(self, fault: ConnectionFault, busy: bool) -> int:
        with self._lock:
            chosen = [
                transport
                for transport, connection in self._open.items()
                if connection.served
                and bool(connection.busy) == busy
                and not transport.is_closing()
            ]
        for transport in chosen:
            self._count(f"connection_fault:{fault.name}")
            strike(transport, fault)
        return len(chosen)

    async def admit(self, request: web.BaseRequest, operation: str) -> int | None:
        """The serial of the connection `request` came on, counted busy until `done`; or None
        when an armed fault met it (the connection is gone, the request never taken)."""
        transport = request.transport
        if transport is None:
            return None
        with self._lock:
            self._loop = asyncio.get_running_loop()
            connection = self._open.get(transport)
            if connection is None:
                connection = self._open[transport] = _Connection(next(self._serials))
            armed = next(
                (
                    armed
                    for armed in self._armed
                    if armed.operation in (None, operation)
                    and (connection.served or not armed.reused_only)
                ),
                None,
            )
            if armed is None:
                connection.served += 1
                connection.busy += 1
                request[_KEY] = connection
                return connection.serial
            self._armed.remove(armed)
        self._count(f"connection_fault:{armed.fault.name}")
        strike(transport, armed.fault)
        if armed.fault is ConnectionFault.HALF_CLOSE:
            # Left open, the connection ends when the client closes it (aiohttp then cancels
            # this handler); one that does not is reset.
            await asyncio.sleep(HALF_CLOSE_HOLD_S)
            strike(transport, ConnectionFault.RESET)
        return None

    def done(self, request: web.BaseRequest) -> None:
        """`request`, admitted, is answered (or given up)."""
        connection = request.get(_KEY)
        if connection is not None:
            with self._lock:
                connection.busy -= 1
