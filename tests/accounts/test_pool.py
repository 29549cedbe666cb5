"""The pool: capacity slots, the wait queue, eligibility, and why no account can serve."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.accounts.pool import AccountPool, Lease
from kirod.accounts.strategy import Strategy
from kirod.errors import ApiError, ErrorKind
from kirod.storage.accounts import AccountRecord, AccountState, AccountStore
from kirod.storage.db import Database
from kirod.upstream.errors import Failure
from kirod.upstream.usage import UsageSnapshot
from tests.support.pool_env import Clock


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AccountStore]:
    async with Database(tmp_path / "kirod.db") as db:
        yield AccountStore(db)


def make_pool(
    store: AccountStore,
    clock: Clock,
    *,
    concurrency: int = 2,
    queue_timeout_s: float = 2.0,
    strategy: Strategy = Strategy.STICKY,
) -> AccountPool:
    return AccountPool(
        store,
        concurrency=concurrency,
        strategy=strategy,
        queue_timeout_s=queue_timeout_s,
        clock=clock,
    )


async def add(store: AccountStore, n: int = 1) -> list[AccountRecord]:
    return [
        await store.insert(
            label=f"a{i}",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials={"access_token": f"token-{i}"},
        )
        for i in range(n)
    ]


async def test_a_full_account_queues_requests_first_come_first_served(
    store: AccountStore,
) -> None:
    [account] = await add(store)
    pool = make_pool(store, Clock(), concurrency=2)
    first, second = await pool.lease(), await pool.lease()
    waiting = [asyncio.create_task(pool.lease()) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in waiting)
    assert (await pool.status()).queued == 3
    first.release()
    first.release()  # idempotent
    await asyncio.sleep(0.02)
    assert [task.done() for task in waiting] == [True, False, False]
    second.release()
    await asyncio.sleep(0.02)
    assert [task.done() for task in waiting] == [True, True, False]
    for task in waiting[:2]:
        (await task).release()
    third = await waiting[2]
    assert third.account_id == account.id
    third.release()
    status = await pool.status()
    assert (status.queued, status.accounts[0].in_flight) == (0, 0)


async def test_queue_timeout_is_429_with_retry_after(store: AccountStore) -> None:
    await add(store)
    pool = make_pool(store, Clock(), concurrency=1, queue_timeout_s=0.2)
    held = await pool.lease()
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert error.value.kind is ErrorKind.RATE_LIMIT
    assert error.value.code == "accounts_busy"
    assert error.value.headers["Retry-After"] == "2"
    held.release()
    (await pool.lease()).release()
    assert (await pool.status()).accounts[0].in_flight == 0


async def test_a_waiter_cancelled_after_its_grant_gives_the_slot_back(store: AccountStore) -> None:
    await add(store)
    pool = make_pool(store, Clock(), concurrency=1)
    held = await pool.lease()
    waiter = asyncio.create_task(pool.lease())
    await asyncio.sleep(0.01)
    held.release()  # grants the slot to the waiter synchronously...
    waiter.cancel()  # ...which is cancelled before it ran
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (await pool.status()).accounts[0].in_flight == 0
    (await pool.lease()).release()


async def test_waiting_on_one_account_does_not_block_another(store: AccountStore) -> None:
    first, second = await add(store, 2)
    pool = make_pool(store, Clock(), concurrency=1, strategy=Strategy.ROUND_ROBIN)
    held = await pool.lease()
    assert held.account_id == first.id
    other = await asyncio.wait_for(pool.lease(), 1.0)
    assert other.account_id == second.id
    held.release()
    other.release()


async def test_why_no_account_can_serve(store: AccountStore) -> None:
    clock = Clock()
    pool = make_pool(store, clock)
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert (error.value.kind, error.value.code) == (ErrorKind.UNAVAILABLE, "no_accounts")
    assert "kiroctl accounts login" in error.value.message
    assert error.value.final  # nothing comes back by itself: clients must not retry

    one, two = await add(store, 2)
    await pool.sync()
    await pool.failed(one.id, Failure.THROTTLED, detail="HTTP 429")  # 60 s
    await pool.failed(two.id, Failure.THROTTLED, detail="HTTP 429", retry_after_s=30)
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert (error.value.kind, error.value.code) == (ErrorKind.RATE_LIMIT, "accounts_cooling_down")
    assert error.value.headers["Retry-After"] in ("29", "30")
    assert "cooling down" in error.value.message
    assert not error.value.final

    for account in (one, two):
        await store.update_state(account.id, lambda r: AccountState("exhausted", "used up"))
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert (error.value.kind, error.value.code) == (ErrorKind.UNAVAILABLE, "accounts_exhausted")

    for account in (one, two):
        await store.update_state(account.id, lambda r: AccountState("needs_login", "expired"))
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert error.value.code == "accounts_need_login"
    assert error.value.final

    await store.update_state(one.id, lambda r: AccountState("disabled", "by the user"))
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert error.value.code == "no_available_accounts"
    assert "1 disabled, 1 needs login" in error.value.message
    assert "kiroctl accounts login" in error.value.message
    assert error.value.final

    await store.update_state(two.id, lambda r: AccountState("disabled", "by the user"))
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert error.value.code == "accounts_disabled"
    assert "kiroctl accounts enable" in error.value.message
    assert error.value.final

    await store.update_state(
        one.id, lambda r: AccountState("exhausted", "used up", until=clock() + 3600)
    )
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert error.value.kind is ErrorKind.RATE_LIMIT
    assert error.value.code == "no_available_accounts"
    assert "1 disabled, 1 exhausted" in error.value.message
    assert int(error.value.headers["Retry-After"]) > 3500
    assert not error.value.final


async def test_half_open_lets_one_trial_through_and_success_closes(store: AccountStore) -> None:
    clock = Clock()
    [account] = await add(store)
    pool = make_pool(store, clock)
    await pool.sync()
    await pool.failed(account.id, Failure.THROTTLED, detail="HTTP 429")
    with pytest.raises(ApiError):
        await pool.lease()
    clock.advance(61)
    trial = await pool.lease()
    assert trial.trial
    assert (await pool.status()).accounts[0].half_open
    queued = asyncio.create_task(pool.lease())  # waits for the trial's verdict
    await asyncio.sleep(0.05)
    assert not queued.done()
    await pool.succeeded(trial)
    after: Lease = await asyncio.wait_for(queued, 1.0)
    assert not after.trial
    record = await store.get(account.id)
    assert record is not None
    assert (record.status, record.failures) == ("active", 0)
    revision = store.revision
    await pool.succeeded(after)  # a healthy account: nothing to write, nothing to re-read
    assert store.revision == revision
    trial.release()
    after.release()


async def test_a_failed_trial_doubles_the_cool_down(store: AccountStore) -> None:
    clock = Clock()
    [account] = await add(store)
    pool = make_pool(store, clock)
    await pool.sync()
    await pool.failed(account.id, Failure.THROTTLED, detail="HTTP 429")
    clock.advance(61)
    trial = await pool.lease()
    queued = asyncio.create_task(pool.lease())
    await asyncio.sleep(0.01)
    await pool.failed(account.id, Failure.THROTTLED, detail="HTTP 429")
    trial.release()
    with pytest.raises(ApiError) as error:
        await queued  # the trial failed: back to cooling, 120 s this time
    assert error.value.code == "accounts_cooling_down"
    record = await store.get(account.id)
    assert record is not None
    assert record.failures == 2
    assert record.status_until is not None
    assert record.status_until - clock() == pytest.approx(120, abs=2)


async def test_state_survives_a_restart_and_a_removed_account_vanishes(
    store: AccountStore,
) -> None:
    clock = Clock()
    one, two = await add(store, 2)
    pool = make_pool(store, clock)
    await pool.sync()
    await pool.failed(one.id, Failure.THROTTLED, detail="HTTP 429")
    restarted = make_pool(store, clock)
    lease = await restarted.lease()
    assert lease.account_id == two.id  # one is still cooling down
    lease.release()
    await store.remove(two.id)
    with pytest.raises(ApiError) as error:
        await restarted.lease()
    assert error.value.code == "accounts_cooling_down"
    assert [a.id for a in (await restarted.status()).accounts] == [one.id]


async def test_enable_disable_and_the_status_snapshot(store: AccountStore) -> None:
    clock = Clock()
    [account] = await add(store)
    pool = make_pool(store, clock, concurrency=3)
    disabled = await pool.disable(account.id)
    assert disabled is not None
    assert (disabled.status, disabled.status_reason) == ("disabled", "disabled by the user")
    with pytest.raises(ApiError):
        await pool.lease()
    assert await pool.enable("missing") is None
    await pool.enable(account.id)
    usage = UsageSnapshot(
        remaining=40.0, limit=50.0, used=10.0, resets_at=2e9, subscription="KIRO FREE", email=None
    )
    await pool.usage_probed(account.id, usage)
    lease = await pool.lease()
    await pool.spent(account.id, 2.5)
    [row] = (await pool.status()).accounts
    assert (row.status, row.in_flight, row.capacity) == ("active", 1, 3)
    assert (row.remaining_credits, row.usage_limit, row.resets_at) == (37.5, 50.0, 2e9)
    assert row.subscription == "KIRO FREE"
    assert row.since is not None
    status = (await pool.status()).to_json()
    assert status["strategy"] == "sticky"
    assert status["accounts"][0]["in_flight"] == 1
    lease.release()
    # a new usage reading replaces the estimate
    await pool.usage_probed(account.id, usage)
    assert (await pool.status()).accounts[0].remaining_credits == 40.0
    await pool.usage_probed(
        account.id,
        UsageSnapshot(remaining=0, limit=50, used=50, resets_at=2e9, subscription=None, email=None),
    )
    exhausted = await store.get(account.id)
    assert exhausted is not None
    assert (exhausted.status, exhausted.status_until) == ("exhausted", 2e9)


async def _open_transient(pool: AccountPool, account_id: str) -> None:
    for _ in range(3):  # the default threshold
        await pool.failed(account_id, Failure.SERVER, detail="HTTP 500")


async def test_panic_mode_tries_the_soonest_back_when_all_are_out_for_transient_reasons(
    store: AccountStore,
) -> None:
    clock = Clock()
    first, second = await add(store, 2)
    pool = make_pool(store, clock)
    await pool.sync()
    await _open_transient(pool, first.id)
    clock.advance(10)
    await _open_transient(pool, second.id)  # back 10 s after the first
    trial = await pool.lease()
    assert (trial.account_id, trial.trial) == (first.id, True)
    queued = asyncio.create_task(pool.lease())  # one trial at a time: waits for its verdict
    await asyncio.sleep(0.05)
    assert not queued.done()
    await pool.succeeded(trial)
    after = await asyncio.wait_for(queued, 1.0)
    assert (after.account_id, after.trial) == (first.id, False)
    trial.release()
    after.release()


async def test_no_panic_while_one_account_is_out_for_its_own_reason(store: AccountStore) -> None:
    clock = Clock()
    first, second = await add(store, 2)
    pool = make_pool(store, clock)
    await pool.sync()
    await _open_transient(pool, first.id)
    await pool.failed(second.id, Failure.QUOTA, detail="402")
    with pytest.raises(ApiError):
        await pool.lease()


async def test_a_thousand_waiters_are_served_in_order_as_slots_free(store: AccountStore) -> None:
    [account] = await add(store)
    pool = make_pool(store, Clock(), concurrency=1, queue_timeout_s=30.0)
    await pool.sync()
    current = await pool.lease()
    waiters = [asyncio.create_task(pool.lease()) for _ in range(1000)]
    await asyncio.sleep(0.05)
    for index, waiter in enumerate(waiters):  # each freed slot goes to the next in line
        current.release()
        current = await asyncio.wait_for(waiter, 1.0)
        assert not any(w.done() for w in waiters[index + 1 : index + 3])
    current.release()
    assert current.account_id == account.id
