"""The one way kirod starts tasks: named and owned (`TaskOwner`), shared per key (`SingleFlight`).

Nothing else in `kirod/` calls `create_task` or `ensure_future` (ruff's banned-api and
`tests/test_rules.py` check it), so every task has an owner that cancels or waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Hashable
from types import TracebackType
from typing import Any, Generic, TypeVar

from kirod import log

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class TaskOwner:
    """Owns a set of named tasks; closing it cancels and awaits them all.

    A task that dies with an exception is logged by name (exception type only, since exception
    text may carry request data), so background failures are never silent.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str, awaited: bool = False
    ) -> asyncio.Task[T]:
        """Start `coro` as the task `<owner>:<name>`.

        `awaited`: a caller awaits the task and handles its failure, so it is not logged here
        (as the store's writes, whose failures go to the caller that asked for the write).
        """
        if self._closed:
            coro.close()
            raise RuntimeError(f"task owner {self._name} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard if awaited else self._done)
        return task

    async def join(self) -> None:
        """Wait for the tasks running now, cancelling none: for work that must finish (writes)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

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


class SingleFlight(Generic[K, T]):
    """At most one task per key: callers asking for a key already in flight share its result.

    The task belongs to `tasks`, not to any caller: a caller that is cancelled stops waiting,
    and the work goes on for the others and for its own side effects (a rotated refresh token
    must still be stored). The key is free again once its task is done.
    """

    def __init__(self, tasks: TaskOwner, name: str) -> None:
        self._tasks = tasks
        self._name = name
        self._running: dict[K, asyncio.Task[T]] = {}

    async def do(self, key: K, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """`work()`'s result, run now, or shared with the task already running for `key`."""
        task = self._running.get(key)
        if task is None:
            task = self._tasks.spawn(work(), name=f"{self._name}:{key}")
            self._running[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    async def do_fresh(self, key: K, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """`work()`'s result from a task started after this call: the one in flight for `key`
        may have read the state before the caller changed it, so it is waited out first (its
        outcome belongs to its own callers)."""
        task = self._running.get(key)
        if task is not None:
            await asyncio.wait({task})
        return await self.do(key, work)

    def _forget(self, key: K, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
