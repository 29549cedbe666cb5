"""Serving the fake on loopback: inside the test's event loop, or on a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from types import TracebackType

from aiohttp import web

from kirod.testing.fake_kiro.server import build_app
from kirod.testing.fake_kiro.state import FakeKiro
from kirod.testing.listeners import stop_accepting

SHUTDOWN_TIMEOUT_S = 1.0
"""How long a stopping fake lets in-flight streams (a STALL, say) finish before cancelling them."""


@contextlib.asynccontextmanager
async def running_fake(
    fake: FakeKiro | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[tuple[FakeKiro, str]]:
    """Serve `fake` (a new one if None) until the block exits; yield it and its base URL."""
    fake = fake if fake is not None else FakeKiro()
    runner = web.AppRunner(build_app(fake), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    # The listening socket is ours, so that stopping can end its accepting before the site
    # closes it (`stop_accepting`).
    listening = socket.create_server((host, port))
    try:
        await web.SockSite(runner, listening).start()
        bound_port = listening.getsockname()[1]
        yield fake, f"http://{host}:{bound_port}"
    finally:
        await stop_accepting([listening])
        await runner.cleanup()
        listening.close()


class ThreadedFake:
    """The fake on its own event loop in a background thread, for synchronous tests and tools.

    `fake` is thread-safe, so the caller scripts and inspects it directly.
    """

    def __init__(
        self,
        fake: FakeKiro | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout_s: float = 10.0,
    ) -> None:
        self.fake = fake if fake is not None else FakeKiro()
        self._host = host
        self._port = port
        self._timeout_s = timeout_s
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._base_url: str | None = None
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the fake is not running")
        return self._base_url

    def start(self) -> ThreadedFake:
        """Start serving; return once the port is bound (or raise why it could not be)."""
        if self._thread is not None:
            raise RuntimeError("the fake was already started")
        self._thread = threading.Thread(target=self._run, name="fake-kiro", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._timeout_s):
            raise RuntimeError(f"the fake did not start within {self._timeout_s} s")
        if self._error is not None:
            raise RuntimeError("the fake failed to start") from self._error
        return self

    def stop(self) -> None:
        """Stop serving and join the thread; idempotent."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or not thread.is_alive():
            return
        if loop is not None and stopping is not None:
            loop.call_soon_threadsafe(stopping.set)
        thread.join(self._timeout_s)
        if thread.is_alive():
            raise RuntimeError(f"the fake did not stop within {self._timeout_s} s")
        self._base_url = None

    def __enter__(self) -> ThreadedFake:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except Exception as exc:  # reported by start(); a thread must not die noisily
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        async with running_fake(self.fake, host=self._host, port=self._port) as (_, base_url):
            self._base_url = base_url
            self._ready.set()
            await self._stopping.wait()
