"""TaskOwner and SingleFlight: owned, named tasks, and one shared task per key."""

from __future__ import annotations

import asyncio

import pytest

from kirod.tasks import SingleFlight, TaskOwner


class Work:
    """A piece of work that runs until released, counting how often it was started."""

    def __init__(self, result: str | Exception = "done") -> None:
        self.result = result
        self.started = 0
        self.running = asyncio.Event()
        self.release = asyncio.Event()
        self.names: list[str] = []

    async def __call__(self) -> str:
        self.started += 1
        task = asyncio.current_task()
        assert task is not None
        self.names.append(task.get_name())
        self.running.set()
        await self.release.wait()
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


async def test_concurrent_callers_share_one_run() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        work = Work()
        callers = [asyncio.create_task(flight.do("a", work)) for _ in range(5)]
        await work.running.wait()
        work.release.set()
        assert await asyncio.gather(*callers) == ["done"] * 5
        assert work.started == 1
        assert work.names == ["test:job:a"]


async def test_the_key_is_free_again_once_done() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        work = Work()
        work.release.set()
        assert await flight.do("a", work) == "done"
        assert await flight.do("a", work) == "done"
        assert work.started == 2


async def test_keys_run_independently() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        first, second = Work("one"), Work("two")
        a = asyncio.create_task(flight.do("a", first))
        b = asyncio.create_task(flight.do("b", second))
        await asyncio.gather(first.running.wait(), second.running.wait())
        second.release.set()
        assert await b == "two"
        assert not a.done()
        first.release.set()
        assert await a == "one"


async def test_do_fresh_waits_out_the_run_in_flight_and_starts_its_own() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        stale, fresh = Work("read before the change"), Work("read after it")
        joined = asyncio.create_task(flight.do("a", stale))
        await stale.running.wait()
        asker = asyncio.create_task(flight.do_fresh("a", fresh))
        await asyncio.sleep(0.01)
        assert fresh.started == 0  # not while the earlier run may hold the old state
        stale.release.set()
        fresh.release.set()
        assert await asker == "read after it"
        assert await joined == "read before the change"
        assert (stale.started, fresh.started) == (1, 1)


async def test_a_cancelled_caller_leaves_the_work_to_the_others() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        work = Work()
        leaving = asyncio.create_task(flight.do("a", work))
        staying = asyncio.create_task(flight.do("a", work))
        await work.running.wait()
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        work.release.set()
        assert await staying == "done"
        assert work.started == 1


async def test_the_work_finishes_when_every_caller_has_gone() -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        finished = asyncio.Event()

        async def work() -> str:
            await asyncio.sleep(0.01)
            finished.set()
            return "done"

        caller = asyncio.create_task(flight.do("a", work))
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.wait_for(finished.wait(), 5)


async def test_a_failure_reaches_every_caller_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with TaskOwner("test") as tasks:
        flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
        work = Work(ValueError("no"))
        callers = [asyncio.create_task(flight.do("a", work)) for _ in range(3)]
        await work.running.wait()
        work.release.set()
        results = await asyncio.gather(*callers, return_exceptions=True)
        assert all(isinstance(r, ValueError) for r in results)
        assert caplog.text.count("background_task_failed") == 1
        work.result = "again"
        assert await flight.do("a", work) == "again"


async def test_closing_the_owner_cancels_the_shared_task() -> None:
    tasks = TaskOwner("test")
    flight: SingleFlight[str, str] = SingleFlight(tasks, "job")
    work = Work()
    caller = asyncio.create_task(flight.do("a", work))
    await work.running.wait()
    await tasks.close()
    with pytest.raises(asyncio.CancelledError):
        await caller
    with pytest.raises(RuntimeError, match="closed"):
        await flight.do("b", work)


async def test_join_waits_without_cancelling_and_awaited_failures_are_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with TaskOwner("test") as tasks:

        async def fails() -> None:
            await asyncio.sleep(0.01)
            raise ValueError("the caller reads this")

        task = tasks.spawn(fails(), name="write", awaited=True)
        await tasks.join()
        assert isinstance(task.exception(), ValueError)
        assert "background_task_failed" not in caplog.text
