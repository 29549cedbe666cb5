"""Closing a test server's listening sockets without leaking the connection it was accepting.

On Python 3.11, `asyncio.Server.close()` while a connection's accept is under way (the socket
accepted, its transport not yet made, a loop turn later) makes that transport's `Server._attach`
fail its assertion: asyncio swallows the error and the accepted socket stays open until some
later garbage collection warns of it, in whichever test runs then. Python 3.12 waits for such
connections instead. Stopping the accepting first, and letting the accepts under way finish while
the server is still open, leaves every accepted connection a transport its server can close.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

LATE_TURNS = 3
"""Loop turns an accepted connection takes to get its transport, and that transport to reach its
protocol's `connection_made`."""


class _Listening(Protocol):
    def fileno(self) -> int: ...


async def stop_accepting(sockets: Iterable[_Listening]) -> None:
    """Accept nothing more on `sockets`, then let the accepts already under way finish."""
    loop = asyncio.get_running_loop()
    for sock in sockets:
        loop.remove_reader(sock.fileno())
    for _ in range(LATE_TURNS):
        await asyncio.sleep(0)
