"""The maintenance loop: refresh near expiry, usage probes, exhausted accounts coming back,
single-flight probes, deadlines, pruning and the status it reports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kirod.storage.oplog import OpEntry
from kirod.upstream.errors import RefreshError
from tests.support.pool_env import TENANT, Gate, pool_env, request


async def test_a_pass_refreshes_expiring_tokens_and_reads_stale_usage(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        expiring = await env.add_account(expires_in_s=60)
        fresh = await env.add_account()
        await env.maintenance.run_pass()
        assert len(env.fake.requests("social_refresh")) == 1
        assert (await env.state(expiring.id)).generation == expiring.generation + 1
        assert len(env.fake.requests("usage")) == 2
        usage = (await env.state(fresh.id)).usage
        assert usage is not None
        assert usage["remaining"] == 1000.0
        status = env.maintenance.status()
        assert status.last_pass_finished is not None
        assert status.last_pass_error is None
        results = {r.account_id: r for r in status.results}
        assert results[expiring.id].actions == ("refresh", "usage", "catalog")
        assert results[fresh.id].actions == ("usage", "catalog")  # the catalog: once, at start
        assert len(env.fake.requests("models")) >= 2
        assert all(r.error is None for r in results.values())
        # nothing is due on the next pass
        env.fake.clear_requests()
        await env.maintenance.run_pass()
        assert env.fake.requests() == []
        env.clock.advance(601)  # usage_refresh_interval_s
        await env.maintenance.run_pass()
        assert len(env.fake.requests("usage")) == 2


async def test_an_exhausted_account_returns_when_its_window_resets(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        [account] = await env.add_accounts(1)
        fake_id = env.fake_ids[account.id]
        reset = env.clock() + 3600
        env.fake.set_usage(fake_id, current=999.99, next_date_reset=reset)
        await env.complete()  # spends the last credits
        with pytest.raises(Exception, match="usage limit"):
            await env.complete()  # 402, confirmed by a probe
        state = await env.state(account.id)
        assert (state.status, state.status_until) == ("exhausted", reset)
        env.fake.clear_requests()
        await env.maintenance.run_pass()
        assert env.fake.requests("usage") == []  # not due before the reset
        env.fake.set_usage(fake_id, current=0.0, next_date_reset=reset + 30 * 86400)
        env.clock.advance(3601)
        await env.maintenance.run_pass()
        assert len(env.fake.requests("usage")) == 1
        assert (await env.state(account.id)).status == "active"
        await env.complete()


async def test_a_reset_is_scheduled_from_next_date_reset_not_days_until_reset(
    tmp_path: Path,
) -> None:
    """Kiro may say `daysUntilReset: 0` while `nextDateReset` is weeks away (docs/KIRO-PROTOCOL.md
    §6.1): the exhausted account is neither probed nor back in service before that date."""
    async with pool_env(tmp_path) as env:
        [account] = await env.add_accounts(1)
        fake_id = env.fake_ids[account.id]
        start = env.clock()
        reset = start + 20 * 86400
        usage = env.fake.set_usage(
            fake_id, current=999.99, next_date_reset=reset, days_until_reset=0
        )
        assert usage.to_json(email=None, user_id="u", now=start)["daysUntilReset"] == 0
        await env.complete()  # spends the last credits
        with pytest.raises(Exception, match="usage limit"):
            await env.complete()  # 402, confirmed by a probe
        state = await env.state(account.id)
        assert (state.status, state.status_until) == ("exhausted", reset)
        env.fake.set_usage(fake_id, current=0.0)  # credits back early: kirod must not look yet
        env.fake.clear_requests()
        for day in (1, 2, 10, 19):
            env.clock.advance(start + day * 86400 - env.clock())
            await env.maintenance.run_pass()
            assert env.fake.requests("usage") == []
            assert (await env.state(account.id)).status == "exhausted"
        env.clock.advance(reset + 1 - env.clock())
        await env.maintenance.run_pass()
        assert len(env.fake.requests("usage")) == 1
        assert (await env.state(account.id)).status == "active"


async def test_a_pass_serves_at_most_four_accounts_at_once(tmp_path: Path) -> None:
    gate = Gate("/getUsageLimits", endpoint="kiro")
    async with pool_env(tmp_path, gate=gate) as env:
        await env.add_accounts(6)
        run = asyncio.create_task(env.maintenance.run_pass())
        held = [await gate.next() for _ in range(4)]
        await asyncio.sleep(0.1)
        assert gate.arrived.empty()  # the fifth waits for a free place
        assert env.maintenance.status().running
        held[0].set()
        held.append(await gate.next())
        for release in held[1:]:
            release.set()
        (await gate.next()).set()
        await asyncio.wait_for(run, 5)
        status = env.maintenance.status()
        assert len(status.results) == 6
        assert all(result.error is None for result in status.results)


async def test_probes_of_one_account_share_one_call(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        results = await asyncio.gather(
            env.maintenance.probe_usage(first.id),
            env.maintenance.probe_usage(first.id),
            env.maintenance.probe_usage(second.id),
        )
        assert [r.id if r else None for r in results] == [first.id, first.id, second.id]
        assert len(env.fake.requests("usage")) == 2
        assert await env.maintenance.probe_usage("missing") is None


async def test_refresh_now_and_its_failures(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        [account] = await env.add_accounts(1)
        refreshed = await env.maintenance.refresh_now(account.id)
        assert refreshed is not None
        assert refreshed.generation == account.generation + 1
        assert await env.maintenance.refresh_now("missing") is None
        key = await env.store.insert(
            label="key",
            auth_kind="api_key",
            region="us-east-1",
            auth_region="us-east-1",
            credentials={"access_token": "ksk_x"},
        )
        with pytest.raises(RefreshError):
            await env.maintenance.refresh_now(key.id)
        assert (await env.state(key.id)).status == "active"


async def test_a_failing_account_is_reported_and_idle_ones_are_skipped(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        broken, disabled, fine = await env.add_accounts(3)
        env.fake.expire_account_tokens(env.fake_ids[broken.id])
        env.fake.revoke_refresh_token(broken.credentials["refresh_token"])
        await env.pool.disable(disabled.id)
        await env.maintenance.run_pass()
        results = {r.account_id: r for r in env.maintenance.status().results}
        assert set(results) == {broken.id, fine.id}
        assert results[fine.id].error is None
        assert results[broken.id].error is not None
        assert (await env.state(broken.id)).status == "needs_login"


async def test_the_pass_deadline_is_reported_and_the_loop_goes_on(tmp_path: Path) -> None:
    async with pool_env(tmp_path, settings={"pass_deadline_s": 0.0, "interval_s": 0.05}) as env:
        await env.add_accounts(2)
        await env.maintenance.run_pass()
        status = env.maintenance.status()
        assert status.last_pass_error == "the pass did not finish within 0 s"
        assert status.to_json()["interval_s"] == 0.05
        loop = asyncio.create_task(env.maintenance.run())
        await asyncio.sleep(0.2)
        later = env.maintenance.status()
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop
        assert later.next_pass_at is not None
        assert later.last_pass_started is not None
        assert status.last_pass_started is not None
        assert later.last_pass_started > status.last_pass_started


async def test_pruning_bounds_bindings_and_the_operation_log(tmp_path: Path) -> None:
    settings = {"oplog_retention_s": 100.0, "oplog_max_rows": 3}
    async with pool_env(tmp_path, affinity_ttl_s=50, settings=settings) as env:
        await env.add_accounts(1)
        await env.complete(request(key="a"))
        now = env.clock()
        for age in (500, 90, 3, 2, 1):
            env.oplog.append(entry(now - age))
        env.clock.advance(60)
        await env.maintenance.run_pass()
        assert await env.db.read("SELECT * FROM affinity") == []
        ages = sorted(round(now + 60 - row.at) for row in await env.oplog.entries())
        assert ages == [60, 61, 62]  # within 100 s, newest three


def entry(at: float) -> OpEntry:
    return OpEntry(
        at=at,
        request_id="req",
        key_id=TENANT,
        protocol="anthropic_messages",
        model="m",
        stream=False,
        account_id=None,
        attempts=(),
        stop_reason=None,
        input_tokens=None,
        output_tokens=None,
        credits=None,
        ttfb_ms=None,
        total_ms=1.0,
        status=200,
        error=None,
        dropped=(),
    )


async def test_a_new_account_is_probed_at_once_not_at_the_next_pass(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        await env.maintenance.run_pass()
        account = await env.add_account()
        env.fake.clear_requests()
        env.maintenance.welcome(account.id)
        for _ in range(100):  # bounded: the welcome runs in the background
            state = await env.state(account.id)
            if state.usage is not None and env.fake.requests("models"):
                break
            await asyncio.sleep(0.02)
        assert state.usage is not None
        assert state.usage["remaining"] == 1000.0
        assert env.fake.requests("models")
