"""An account without the profile Kiro wants: found again on the request (one account keeps
serving), by maintenance after a token refresh, or left in `needs_profile` when Kiro offers
several; in-process against the fake Kiro."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from kirod.accounts.profiles import RETRY_S
from kirod.errors import ApiError
from kirod.storage.accounts import AccountRecord
from kirod.testing.fake_kiro import TokenSet
from kirod.upstream.secrets import Credentials
from tests.support.pool_env import Env, pool_env


async def without_profile(env: Env, tokens: TokenSet, *, expired: bool = False) -> AccountRecord:
    """An Identity Center account stored with no profile ARN, as an import Kiro could not answer
    leaves it."""
    credentials = Credentials(
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        expires_at=time.time() - 60 if expired else tokens.expires_at,
        client_id=tokens.client_id,
        client_secret=tokens.client_secret,
        client_secret_expires_at=tokens.client_secret_expires_at,
    )
    if expired:
        env.fake.tokens.expire_access_token(tokens.access_token)
    record = await env.store.insert(
        label="enterprise",
        auth_kind="idc",
        region="us-east-1",
        auth_region="us-east-1",
        credentials=credentials.to_json(),
        profile_arn=None,
    )
    env.fake_ids[record.id] = tokens.account_id
    return record


async def test_a_request_kiro_refuses_for_want_of_a_profile_finds_it_and_is_served(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        tokens = env.fake.issue_idc_account(provider="Enterprise")
        record = await without_profile(env, tokens)
        events = await env.complete()
        assert events  # one account, one answer: the refusal never reached the client
        sent = [r.json.get("profileArn") for r in env.fake.requests("chat")]
        assert sent == [None, tokens.profile_arn]
        stored = await env.state(record.id)
        assert (stored.profile_arn, stored.status) == (tokens.profile_arn, "active")
        await env.oplog.flush()
        [entry] = await env.oplog.entries()
        assert [a.outcome for a in entry.attempts] == ["profile_required", "ok"]


async def test_several_profiles_leave_the_account_waiting_and_the_request_fails_clearly(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        tokens = env.fake.issue_idc_account(provider="Enterprise", extra_profiles=1)
        record = await without_profile(env, tokens)
        with pytest.raises(ApiError) as error:
            await env.complete()
        assert error.value.code == "account_needs_profile"
        assert tokens.access_token not in error.value.message
        stored = await env.state(record.id)
        assert stored.status == "needs_profile"
        assert stored.status_reason is not None
        assert "set-profile" in stored.status_reason
        assert tokens.profile_arn in stored.status_reason

        # Maintenance does not ask again before RETRY_S, then does (the offer may have changed).
        env.fake.clear_requests()
        await env.maintenance.run_pass()
        assert env.fake.requests("profiles") == []
        env.fake.tokens.update_account(
            tokens.account_id, lambda account: dataclasses.replace(account, extra_profiles=())
        )
        env.clock.advance(RETRY_S + 1)
        await env.maintenance.run_pass()
        assert env.fake.requests("profiles")
        stored = await env.state(record.id)
        assert (stored.status, stored.profile_arn) == ("active", tokens.profile_arn)


async def test_maintenance_refreshes_an_expired_token_before_it_asks_for_profiles(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        tokens = env.fake.issue_idc_account(provider="Enterprise")
        record = await without_profile(env, tokens, expired=True)
        await env.maintenance.run_pass()
        operations = [r.operation for r in env.fake.requests()]
        assert operations.index("oidc_token") < operations.index("profiles")
        stored = await env.state(record.id)
        assert stored.profile_arn == tokens.profile_arn
        results = {r.account_id: r for r in env.maintenance.status().results}
        assert results[record.id].actions[:2] == ("refresh", "profile")
        assert results[record.id].error is None
        # Found: nothing more to look for on later passes.
        env.fake.clear_requests()
        env.clock.advance(RETRY_S + 1)
        await env.maintenance.run_pass()
        assert env.fake.requests("profiles") == []
