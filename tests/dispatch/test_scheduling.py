"""Capacity slots, the branch queue, and slots coming back when clients go away."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from kirod.canonical.events import TextDelta
from kirod.dispatch.branches import BranchQueue
from kirod.errors import ApiError
from kirod.testing.fake_kiro import Reply, Script
from tests.support.pool_env import TENANT, Env, drain, pool_env, request


async def test_branch_turns_run_in_arrival_order_and_other_branches_pass() -> None:
    branches = BranchQueue()
    order: list[str] = []
    gate = asyncio.Event()

    async def hold(key: str, name: str) -> None:
        async with branches.turn(key, timeout_s=5):
            order.append(f"{name} in")
            if name == "a1":
                await gate.wait()
            order.append(f"{name} out")

    tasks = [asyncio.create_task(hold("a", "a1"))]
    await asyncio.sleep(0.01)
    tasks += [asyncio.create_task(hold("a", name)) for name in ("a2", "a3")]
    tasks.append(asyncio.create_task(hold("b", "b1")))
    await asyncio.sleep(0.05)
    assert order == ["a1 in", "b1 in", "b1 out"]  # b never waited on a
    gate.set()
    await asyncio.gather(*tasks)
    assert order[3:] == ["a1 out", "a2 in", "a2 out", "a3 in", "a3 out"]
    assert len(branches) == 0


async def test_a_branch_wait_is_bounded() -> None:
    branches = BranchQueue()
    async with branches.turn("a", timeout_s=5):
        with pytest.raises(ApiError) as error:
            async with branches.turn("a", timeout_s=0.05):
                pass
    assert error.value.code == "conversation_busy"
    assert len(branches) == 0


async def test_turns_of_one_conversation_reach_kiro_one_after_the_other(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        await env.add_accounts(2)
        slow = Script(reply=Reply(text="first turn, slowly"), delay_between_s=0.05, chunk_size=4)
        env.fake.enqueue(slow)
        ends: list[str] = []

        async def turn(key: str, name: str) -> None:
            async with env.dispatcher.open(request(key=key), tenant=TENANT) as dispatch:
                await drain(dispatch)
                ends.append(name)

        first = asyncio.create_task(turn("conversation-a", "a1"))
        await asyncio.sleep(0.1)  # a1 is streaming
        second = asyncio.create_task(turn("conversation-a", "a2"))
        other = asyncio.create_task(turn("conversation-b", "b1"))
        await asyncio.gather(first, second, other)
        assert ends == ["b1", "a1", "a2"]
        assert len(env.fake.requests("chat")) == 3


async def test_the_eleventh_request_on_a_ten_slot_account_waits_then_proceeds(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path, concurrency=10) as env:
        [account] = await env.add_accounts(1)
        async with contextlib.AsyncExitStack() as held:
            for _ in range(10):
                await held.enter_async_context(env.dispatcher.open(request(), tenant=TENANT))
            assert await env.in_flight() == {account.id: 10}
            eleventh = asyncio.create_task(env.complete())
            await asyncio.sleep(0.2)
            assert not eleventh.done()
            assert len(env.fake.requests("chat")) == 10
            assert (await env.pool.status()).queued == 1
        events = await asyncio.wait_for(eleventh, 5)  # the ten ended: a slot came free
        assert any(isinstance(e, TextDelta) for e in events)
        assert await env.in_flight() == {account.id: 0}


async def cancel_mid_stream(env: Env) -> None:
    """A client that goes away after the first text: its handler is cancelled."""
    started = asyncio.Event()

    async def client() -> None:
        async with env.dispatcher.open(request(), tenant=TENANT) as dispatch:
            async for batch in dispatch.events:
                if any(isinstance(event, TextDelta) for event in batch):
                    started.set()

    task = asyncio.create_task(client())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_slots_come_back_when_clients_go_away_mid_stream(tmp_path: Path) -> None:
    async with pool_env(tmp_path, concurrency=2) as env:
        [account] = await env.add_accounts(1)
        for _ in range(4):
            env.fake.enqueue(
                Script(reply=Reply(text="x" * 400), chunk_size=2, delay_between_s=0.02)
            )
        await asyncio.gather(*(cancel_mid_stream(env) for _ in range(4)))
        assert await env.in_flight() == {account.id: 0}
        rows = await env.oplog.entries()
        assert [(row.status, row.error) for row in rows] == [(499, "client_closed")] * 4
        assert all(row.ttfb_ms is not None for row in rows)
        # both slots serve again at once
        await asyncio.wait_for(asyncio.gather(env.complete(), env.complete()), 5)
        assert (await env.state(account.id)).status == "active"


async def test_a_burst_on_a_cold_catalog_fetches_it_once(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        await env.add_account()
        for _ in range(8):
            env.fake.enqueue(Reply(text="hi"))
        results = await asyncio.gather(*(env.complete() for _ in range(8)))
        assert all(any(isinstance(e, TextDelta) for e in events) for events in results)
        assert len(env.fake.requests("chat")) == 8
        pages = [r.query.get("nextToken") for r in env.fake.requests("models")]
        assert pages
        assert len(pages) == len(set(pages))  # the catalog's pages walked once, not per request
