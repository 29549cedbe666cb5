"""Pacing and eligibility in the pool: per-account spacing of request starts, a login's shared
back-off after Kiro throttled one of its entries, and leases limited to the accounts a request
may use (those whose catalog lists its model). The clock is the test's; nothing sleeps in a loop
and every wait is bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.accounts.health import PENALTY_REST_S, next_utc_midnight
from kirod.accounts.pacing import MAX_SHARED_BACKOFF_S, SHARED_BACKOFF_S, Pacer, login_key
from kirod.accounts.pool import AccountPool
from kirod.accounts.strategy import Strategy
from kirod.errors import ApiError, ErrorKind
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.storage.db import Database
from kirod.upstream.errors import Failure
from tests.support.pool_env import Clock


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AccountStore]:
    async with Database(tmp_path / "kirod.db") as db:
        yield AccountStore(db)


def make_pool(
    store: AccountStore,
    clock: Clock,
    *,
    rpm: float = 0.0,
    min_interval_s: float = 0.0,
    queue_timeout_s: float = 2.0,
    concurrency: int = 5,
    strategy: Strategy = Strategy.STICKY,
) -> AccountPool:
    return AccountPool(
        store,
        concurrency=concurrency,
        strategy=strategy,
        queue_timeout_s=queue_timeout_s,
        clock=clock,
        rpm=rpm,
        min_interval_s=min_interval_s,
    )


async def add(
    store: AccountStore, n: int = 1, *, profile_arn: str | None = None
) -> list[AccountRecord]:
    return [
        await store.insert(
            label=f"a{i}",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials={"access_token": f"token-{i}"},
            profile_arn=profile_arn,
        )
        for i in range(n)
    ]


# -- the pacer alone -----------------------------------------------------------------------------


def test_spacing_is_the_longer_of_rpm_and_min_interval() -> None:
    clock = Clock()
    assert Pacer(clock=clock).spacing_s == 0
    assert not Pacer(clock=clock).active
    assert Pacer(rpm=30, clock=clock).spacing_s == 2.0
    assert Pacer(min_interval_s=0.5, clock=clock).spacing_s == 0.5
    assert Pacer(rpm=30, min_interval_s=5, clock=clock).spacing_s == 5
    assert Pacer(rpm=600, min_interval_s=0.01, clock=clock).spacing_s == pytest.approx(0.1)
    with pytest.raises(ValueError, match=">= 0"):
        Pacer(rpm=-1, clock=clock)


def test_starts_are_spaced_evenly_without_a_burst() -> None:
    clock = Clock()
    pacer = Pacer(rpm=60, clock=clock)
    now = clock()
    assert pacer.ready("a", "id:a", now)
    pacer.started("a", now)
    assert not pacer.ready("a", "id:a", now + 0.5)
    assert pacer.ready_at("a", "id:a") == pytest.approx(now + 1.0)
    assert pacer.ready("b", "id:b", now)  # per account
    assert pacer.soonest(now) == pytest.approx(now + 1.0)
    # A start that waited its turn pushes the next one a full spacing on, not from "now".
    pacer.started("a", now + 1.0)
    assert pacer.ready_at("a", "id:a") == pytest.approx(now + 2.0)
    assert pacer.soonest(now + 5) is None
    pacer.forget("a")
    assert pacer.ready_at("a", "id:a") == 0.0


def test_a_back_off_holds_every_entry_of_the_login() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    now = clock()
    login = login_key("a", "arn:aws:codewhisperer:us-east-1:1:profile/X")
    assert login == login_key("b", "arn:aws:codewhisperer:us-east-1:1:profile/X")
    assert login_key("a", None) != login_key("b", None)  # no ARN: each entry is its own login
    until = pacer.back_off(login, 30.0, now)
    assert until == pytest.approx(now + 30)
    assert pacer.active
    assert not pacer.ready("b", login, now + 29)
    assert pacer.ready("b", login, now + 30)
    assert pacer.ready("c", "id:c", now)
    assert pacer.back_off(login, None, now) == pytest.approx(now + 30)  # never shortened
    assert pacer.back_off("id:x", None, now) == pytest.approx(now + SHARED_BACKOFF_S)
    assert pacer.back_off("id:y", 10**6, now) == pytest.approx(now + MAX_SHARED_BACKOFF_S)
    assert pacer.soonest(now + MAX_SHARED_BACKOFF_S) is None
    assert not pacer.active  # every hold is over


# -- the pool ------------------------------------------------------------------------------------


async def test_a_paced_account_makes_the_next_request_wait_not_fail(store: AccountStore) -> None:
    [account] = await add(store)
    clock = Clock()
    pool = make_pool(store, clock, rpm=1)  # one start a minute
    first = await pool.lease()
    first.release()  # a free slot does not matter: the account is paced
    waiting = asyncio.create_task(pool.lease())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert (await pool.status()).queued == 1
    clock.advance(59)
    await pool.sync()  # anything that looks at the queue again
    assert not waiting.done()
    clock.advance(1)
    await pool.sync()
    second = await asyncio.wait_for(waiting, 1.0)
    assert second.account_id == account.id
    second.release()


async def test_the_queue_wakes_by_itself_when_the_spacing_ends(store: AccountStore) -> None:
    await add(store)
    loop = asyncio.get_running_loop()
    pool = make_pool(store, Clock(), min_interval_s=0.15)
    (await pool.lease()).release()
    started = loop.time()
    second = await asyncio.wait_for(pool.lease(), 1.0)  # well under the 1 s recheck
    assert 0.1 <= loop.time() - started < 0.9
    second.release()


async def test_pacing_moves_requests_to_another_account_before_waiting(
    store: AccountStore,
) -> None:
    first, second = await add(store, 2)
    pool = make_pool(store, Clock(), rpm=1)
    one = await pool.lease()
    two = await asyncio.wait_for(pool.lease(), 0.5)  # the sticky account is paced: the other
    assert (one.account_id, two.account_id) == (first.id, second.id)
    one.release()
    two.release()


async def test_a_paced_queue_times_out_with_429(store: AccountStore) -> None:
    await add(store)
    pool = make_pool(store, Clock(), rpm=1, queue_timeout_s=0.1)
    (await pool.lease()).release()
    with pytest.raises(ApiError) as error:
        await pool.lease()
    assert (error.value.kind, error.value.code) == (ErrorKind.RATE_LIMIT, "accounts_busy")
    assert "paced" in error.value.message


async def test_throttling_one_entry_holds_the_others_of_its_login(store: AccountStore) -> None:
    arn = "arn:aws:codewhisperer:us-east-1:111:profile/SHARED"
    throttled, sibling = await add(store, 2, profile_arn=arn)
    [other] = await add(store, 1, profile_arn="arn:aws:codewhisperer:us-east-1:222:profile/OWN")
    clock = Clock()
    pool = make_pool(store, clock, strategy=Strategy.ROUND_ROBIN)
    await pool.sync()
    await pool.failed(throttled.id, Failure.THROTTLED, detail="slow down", retry_after_s=30)
    assert (await pool.status()).accounts[0].status == "cooling_down"
    # The sibling is held (not failed, not written), the unrelated account serves meanwhile.
    leases = [await asyncio.wait_for(pool.lease(), 0.5) for _ in range(2)]
    assert {lease.account_id for lease in leases} == {other.id}
    stored = await store.get(sibling.id)
    assert stored is not None
    assert stored.status == "active"
    for lease in leases:
        lease.release()
    clock.advance(31)
    await pool.sync()
    served = {(await asyncio.wait_for(pool.lease(), 0.5)).account_id for _ in range(4)}
    assert sibling.id in served


@pytest.mark.parametrize("failure", [Failure.PENALTY, Failure.DAILY_LIMIT])
async def test_a_penalty_or_the_daily_limit_holds_the_login_for_the_account_s_rest(
    store: AccountStore, failure: Failure
) -> None:
    """Kiro's limits on the user: its other entries are held for the entry's rest (the
    penalty's 120 s without a hint, the day's to the 300 s cap), not the 10 s default."""
    arn = "arn:aws:codewhisperer:us-east-1:111:profile/SHARED"
    limited, sibling = await add(store, 2, profile_arn=arn)
    [other] = await add(store, 1, profile_arn="arn:aws:codewhisperer:us-east-1:222:profile/OWN")
    clock = Clock()
    pool = make_pool(store, clock, strategy=Strategy.ROUND_ROBIN)
    await pool.sync()
    start = clock()
    await pool.failed(limited.id, failure, detail="HTTP 429", retry_after_s=None)
    clock.advance(60)  # past the default hold, inside the rest
    await pool.sync()
    leases = [await asyncio.wait_for(pool.lease(), 0.5) for _ in range(2)]
    assert {lease.account_id for lease in leases} == {other.id}
    for lease in leases:
        lease.release()
    held = {paced.account_id: paced.held_until for paced in pool.pacing().accounts}
    day = min(MAX_SHARED_BACKOFF_S, next_utc_midnight(start) - start)
    rest = PENALTY_REST_S if failure is Failure.PENALTY else day
    assert held[sibling.id] == pytest.approx(start + rest, abs=2)


async def test_throttling_an_entry_with_no_sibling_holds_nothing_else(store: AccountStore) -> None:
    first, second = await add(store, 2)  # no profile ARN: two separate logins
    pool = make_pool(store, Clock())
    await pool.sync()
    await pool.failed(first.id, Failure.THROTTLED, detail="slow down", retry_after_s=30)
    lease = await asyncio.wait_for(pool.lease(), 0.5)
    assert lease.account_id == second.id
    lease.release()


async def test_only_eligible_accounts_are_leased(store: AccountStore) -> None:
    first, second, third = await add(store, 3)
    pool = make_pool(store, Clock(), concurrency=1)
    only_third = await pool.lease(eligible=lambda record: record.id == third.id)
    assert only_third.account_id == third.id
    # Sticky keeps the third for requests it is eligible for, but not for one it is not.
    other = await pool.lease(eligible=lambda record: record.id != third.id)
    assert other.account_id == first.id
    # The eligible account is full: the request waits for it, never takes an ineligible one.
    waiting = asyncio.create_task(pool.lease(eligible=lambda record: record.id == third.id))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    only_third.release()
    again = await asyncio.wait_for(waiting, 1.0)
    assert again.account_id == third.id
    assert second.id not in {again.account_id, other.account_id}
    again.release()
    other.release()


async def test_no_eligible_account_at_all_is_an_error_not_a_wait(store: AccountStore) -> None:
    await add(store, 2)
    pool = make_pool(store, Clock(), queue_timeout_s=30.0)
    with pytest.raises(ApiError) as error:
        await asyncio.wait_for(pool.lease(eligible=lambda record: False), 1.0)
    assert error.value.code == "no_available_accounts"
