"""The one way kirod starts background tasks: named, owned, and cancelled on close."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

from kirod import log

logger = logging.getLogger(__name__)


class TaskOwner:
    """Owns a set of named tasks; closing it cancels and awaits them all.

    A task that dies with an exception is logged by name (exception type only, since exception
    text may carry request data), so background failures are never silent.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"task owner {self._name} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.event(
                logger,
                "background_task_failed",
                level=logging.ERROR,
                task=task.get_name(),
                error=type(exc).__name__,
            )

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TaskOwner:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
