"""Compare-and-swap races between token refreshes, removals, new logins and state changes.

A gate on loopback sits in front of the fake's refresh endpoint and holds each refresh until the
test lets it through, so every interleaving is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.accounts.account import to_upstream
from kirod.testing.fake_kiro import FakeKiro
from kirod.upstream.errors import Failure, RefreshError
from tests.support.pool_env import Env, Gate, credentials, pool_env


@contextlib.asynccontextmanager
async def gated(tmp_path: Path, fake: FakeKiro | None = None) -> AsyncIterator[tuple[Env, Gate]]:
    gate = Gate("/refreshToken")
    async with pool_env(tmp_path, gate=gate, fake=fake) as env:
        yield env, gate


def on_disk(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("kirod.db"))


async def test_a_refresh_racing_a_removal_never_resurrects_the_account(tmp_path: Path) -> None:
    async with gated(tmp_path) as (env, gate):
        record = await env.add_account(expires_in_s=60)
        refresh = asyncio.create_task(env.keeper.fresh(to_upstream(record)))
        release = await gate.next()
        assert await env.store.remove(record.id)
        release.set()
        with pytest.raises(RefreshError) as error:
            await refresh
        assert error.value.permanent
        assert await env.store.get(record.id) is None
        assert await env.store.list() == []
        new_token = gate.answers[0]["accessToken"]
        assert isinstance(new_token, str)
        assert new_token.encode() not in on_disk(tmp_path)


async def test_two_refreshes_of_one_account_are_one_call(tmp_path: Path) -> None:
    async with gated(tmp_path) as (env, gate):
        record = await env.add_account(expires_in_s=60)
        account = to_upstream(record)
        both = asyncio.gather(env.keeper.fresh(account), env.keeper.fresh(account))
        (await gate.next()).set()
        first, second = await both
        assert first.credentials.access_token == second.credentials.access_token
        assert first.credentials.access_token != account.credentials.access_token
        assert gate.arrived.empty()
        assert len(gate.answers) == 1
        stored = await env.state(record.id)
        assert stored.generation == record.generation + 1


async def test_a_refresh_losing_to_a_new_login_adopts_it(tmp_path: Path) -> None:
    async with gated(tmp_path) as (env, gate):
        record = await env.add_account(expires_in_s=60)
        refresh = asyncio.create_task(env.keeper.fresh(to_upstream(record)))
        release = await gate.next()
        relogin = credentials(env.fake.issue_social_account()).to_json()
        await env.store.update_credentials(record.id, relogin, record.generation)
        release.set()
        adopted = await refresh
        assert adopted.credentials.access_token == relogin["access_token"]
        stored = await env.state(record.id)
        assert stored.credentials["refresh_token"] == relogin["refresh_token"]  # not overwritten


async def test_state_changes_during_a_refresh_keep_the_rotated_token(tmp_path: Path) -> None:
    async with gated(tmp_path, FakeKiro(rotate_refresh_tokens=True)) as (env, gate):
        record = await env.add_account(expires_in_s=60)
        await env.pool.sync()
        refresh = asyncio.create_task(env.keeper.fresh(to_upstream(record)))
        release = await gate.next()
        await env.pool.failed(record.id, Failure.THROTTLED, detail="HTTP 429")
        release.set()
        await refresh
        stored = await env.state(record.id)
        assert stored.status == "cooling_down"  # the credentials write kept the state
        rotated = gate.answers[0]["refreshToken"]
        assert stored.credentials["refresh_token"] == rotated != record.credentials["refresh_token"]
        # the stored (rotated) refresh token is the one that works now
        again = asyncio.create_task(
            env.keeper.fresh(to_upstream(stored), rejected_token=stored.credentials["access_token"])
        )
        (await gate.next()).set()
        await again
        assert (await env.state(record.id)).status == "cooling_down"


async def test_a_failed_refresh_of_replaced_credentials_is_not_a_dead_login(
    tmp_path: Path,
) -> None:
    async with gated(tmp_path) as (env, gate):
        record = await env.add_account(expires_in_s=60)
        env.fake.revoke_refresh_token(record.credentials["refresh_token"])
        refresh = asyncio.create_task(env.keeper.fresh(to_upstream(record)))
        release = await gate.next()
        relogin = credentials(env.fake.issue_social_account()).to_json()
        await env.store.update_credentials(record.id, relogin, record.generation)
        release.set()
        with pytest.raises(RefreshError):
            await refresh
        stored = await env.state(record.id)
        assert stored.status == "active"  # the dead token was the old login's
        assert stored.last_error is None
        # while the same dead token, still stored, does mean the login is gone
        env.fake.revoke_refresh_token(relogin["refresh_token"])
        current = to_upstream(stored)
        again = asyncio.create_task(
            env.keeper.fresh(current, rejected_token=current.credentials.access_token)
        )
        (await gate.next()).set()
        with pytest.raises(RefreshError):
            await again
        assert (await env.state(record.id)).status == "needs_login"
