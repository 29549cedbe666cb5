"""Failover before the first event, for every upstream fault class; none for fatal failures or
after the stream committed. The account layer in-process against the fake Kiro on loopback."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from kirod.accounts.strategy import Strategy
from kirod.canonical.events import ErrorEvent, MessageStop, TextDelta
from kirod.errors import ApiError, ErrorKind
from kirod.testing.fake_kiro import Fault, Reply, Script
from tests.support.pool_env import TENANT, pool_env, request

# fault → (the failure class recorded for the first attempt, the first account's status after).
# One transient failure (server error, broken or empty stream) leaves the account in service.
RECOVERABLE = [
    (Script(fault=Fault.THROTTLE_429, retry_after_s=7), "throttled", "cooling_down"),
    (Script(fault=Fault.THROTTLE_429_NO_RETRY_AFTER), "throttled", "cooling_down"),
    (Script(fault=Fault.CAPACITY_429), "capacity", "active"),
    (Script(fault=Fault.SERVER_500), "capacity", "active"),
    (Script(fault=Fault.INTERNAL_500), "server", "active"),
    (Script(fault=Fault.SUSPENDED_403), "suspended", "suspended"),
    (Script(fault=Fault.QUOTA_402), "quota", "active"),  # the usage probe finds credits
    (Script(fault=Fault.OVERAGE_400), "quota", "active"),  # a 400, yet the account's quota
    (Script(fault=Fault.SUSPICIOUS_429), "suspicious_activity", "cooling_down"),
    (Script(fault=Fault.MIDSTREAM_EXCEPTION, fault_at=0), "throttled", "cooling_down"),
    (Script(fault=Fault.EMPTY_STREAM), "server", "active"),
    (Script(fault=Fault.CONNECTION_CUT, fault_at=0), "protocol", "active"),
    (Script(fault=Fault.CORRUPT_CRC, fault_at=0), "protocol", "active"),
]


@pytest.mark.parametrize(
    ("script", "outcome", "status"),
    RECOVERABLE,
    ids=[f"{s.fault.name}" for s, _, _ in RECOVERABLE if s.fault],
)
async def test_a_recoverable_failure_moves_to_the_next_account(
    tmp_path: Path, script: Script, outcome: str, status: str
) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        first, second, _ = await env.add_accounts(3)
        env.fake.enqueue(script, account_id=env.fake_ids[first.id])
        env.fake.enqueue(Reply(text="from the second"), account_id=env.fake_ids[second.id])
        events = await env.complete()
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from the second"
        assert env.chats() == [first.id, second.id]
        after = await env.state(first.id)
        assert after.status == status
        assert after.last_error is not None
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (first.id, outcome),
            (second.id, "ok"),
        ]
        assert (row.account_id, row.status, row.error) == (second.id, 200, None)
        if script.fault is Fault.SUSPENDED_403:
            assert (after.status_reason or "").startswith("suspended by Kiro: Your User ID")
        if script.fault is Fault.THROTTLE_429:
            assert after.status_until is not None
            assert after.status_until - env.clock() == pytest.approx(7, abs=1)


async def test_quota_confirmed_by_the_probe_exhausts_until_the_reset(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        reset = env.clock() + 5 * 86400
        env.fake.set_usage(env.fake_ids[first.id], current=1000.0, next_date_reset=reset)
        await env.complete()
        assert env.chats() == [first.id, second.id]
        exhausted = await env.state(first.id)
        assert (exhausted.status, exhausted.status_until) == ("exhausted", reset)
        assert len(env.fake.requests("usage")) == 1
        # the next request goes straight to the second account
        env.fake.clear_requests()
        await env.complete()
        assert env.chats() == [second.id]


@pytest.mark.parametrize("fatal", ["context_too_long", "unknown_model"])
async def test_a_failure_of_the_request_itself_returns_at_once(tmp_path: Path, fatal: str) -> None:
    async with pool_env(tmp_path) as env:
        first, _ = await env.add_accounts(2)
        req = request("lorem ipsum " * 400)
        if fatal == "context_too_long":
            model = next(m for m in env.fake.models() if m.model_id == "claude-sonnet-4.6")
            env.fake.set_model(dataclasses.replace(model, max_input_tokens=100))
        else:
            req = request(model="gpt-nonexistent")
        with pytest.raises(ApiError) as error:
            await env.complete(req)
        unknown = fatal == "unknown_model"
        assert error.value.kind is (ErrorKind.NOT_FOUND if unknown else ErrorKind.INVALID_REQUEST)
        assert len(env.chats()) == (0 if unknown else 1)
        assert (await env.state(first.id)).status == "active"
        row = (await env.oplog.entries())[0]
        assert row.status == (404 if unknown else 400)
        if fatal == "unknown_model":  # no catalog read yet: looked up in each, never sent
            assert [a.outcome for a in row.attempts] == ["model_not_listed"] * 2
            assert error.value.code == "model_not_found"
        else:
            assert len(row.attempts) == 1


async def test_a_model_refused_by_kiro_is_dropped_from_that_accounts_catalog(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        req = request(model="claude-opus-4-6")
        await env.complete(req)  # listed for the account, so kirod will send it...
        env.fake.set_usage(env.fake_ids[first.id], subscription="KIRO FREE")  # ...refused
        env.fake.clear_requests()
        await env.complete(req)  # INVALID_MODEL_ID on the first: the second serves it
        assert env.chats() == [first.id, second.id]
        assert (await env.state(first.id)).status == "active"  # not the account's fault
        row = (await env.oplog.entries())[0]  # newest first
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (first.id, "invalid_model"),
            (second.id, "ok"),
        ]
        env.fake.clear_requests()
        await env.complete(req)  # routed past the first: its catalog lacks the model now
        assert env.chats() == [second.id]


async def test_a_model_missing_from_one_accounts_plan_is_served_by_another(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        free = await env.add_account(subscription="KIRO FREE")  # lists no Opus
        pro = await env.add_account()
        await env.complete(request(model="claude-opus-4-6"))
        assert env.chats() == [pro.id]
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (free.id, "model_not_listed"),
            (pro.id, "ok"),
        ]
        assert (await env.state(free.id)).status == "active"


async def test_nothing_is_replayed_after_the_first_event(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, _ = await env.add_accounts(2)
        env.fake.enqueue(
            Script(
                reply=Reply(text="partial answer " * 4), fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3
            )
        )
        events = await env.complete()
        assert any(isinstance(e, TextDelta) for e in events)
        assert isinstance(events[-1], ErrorEvent)
        assert env.chats() == [first.id]  # one upstream request, no second account
        # Kiro throttled the account mid-stream: it rests, as for a throttle before any output.
        assert (await env.state(first.id)).status == "cooling_down"
        [row] = await env.oplog.entries()
        assert (row.status, row.error) == (200, "upstream_throttled")
        assert [(a.account_id, a.outcome) for a in row.attempts] == [(first.id, "ok")]


# A stream that breaks off after its first event (here Kiro's connection drops after two text
# events) is a failure of the account, as one before it would be.
DROPPED = Script(
    reply=Reply(text="a long answer, " * 6), chunk_size=4, fault=Fault.CONNECTION_CUT, fault_at=2
)
BROKEN_MID = [
    (DROPPED, "protocol", "active"),
    (dataclasses.replace(DROPPED, fault=Fault.CORRUPT_CRC), "protocol", "active"),
    (dataclasses.replace(DROPPED, fault=Fault.ERROR_FRAME), "server", "active"),
    (dataclasses.replace(DROPPED, fault=Fault.MIDSTREAM_EXCEPTION), "throttled", "cooling_down"),
]


@pytest.mark.parametrize(
    ("script", "outcome", "status"),
    BROKEN_MID,
    ids=[f"{s.fault.name}" for s, _, _ in BROKEN_MID if s.fault],
)
async def test_a_whole_answer_that_broke_off_goes_to_the_next_account(
    tmp_path: Path, script: Script, outcome: str, status: str
) -> None:
    """Not streamed, its client has been sent nothing: the broken answer is dropped and the
    request moves on as for a failure before the first event."""
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        first, second = await env.add_accounts(2)
        env.fake.enqueue(script, account_id=env.fake_ids[first.id])
        env.fake.enqueue(Reply(text="from the second"), account_id=env.fake_ids[second.id])
        events = await env.complete(request(stream=False))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from the second"
        assert not any(isinstance(e, ErrorEvent) for e in events)
        assert env.chats() == [first.id, second.id]
        after = await env.state(first.id)
        assert (after.status, after.failures) == (status, 1)
        assert (after.last_error or "").startswith(outcome)
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (first.id, outcome),
            (second.id, "ok"),
        ]
        assert (row.account_id, row.status, row.error) == (second.id, 200, None)
        assert row.attempts[-1].frames is not None  # the answer's frames, not the broken one's
        assert row.attempts[-1].frames < 20


async def test_a_broken_stream_counts_until_the_breaker_opens(tmp_path: Path) -> None:
    """Streamed, the answer began: never replayed, it ends with its error, and each break counts
    against the account, so `breaker_consecutive_failures` of them in a row rest it."""
    async with pool_env(tmp_path) as env:
        first, _ = await env.add_accounts(2)
        env.fake.set_account_script(env.fake_ids[first.id], DROPPED)
        for count in (1, 2, 3):
            events = await env.complete(request(key="one conversation"))  # stays on `first`
            assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "a lo" + "ng a"
            assert isinstance(events[-1], ErrorEvent)
            assert events[-1].code == "upstream_protocol"
            assert env.chats() == [first.id] * count
            state = await env.state(first.id)
            assert state.failures == count
        assert (state.status, state.status_transient) == ("cooling_down", True)
        rows = await env.oplog.entries()
        assert [(r.status, r.error) for r in rows] == [(200, "upstream_protocol")] * 3
        assert all(
            [(a.account_id, a.outcome) for a in r.attempts] == [(first.id, "ok")] for r in rows
        )
        # Resting, it is passed over even by the conversation bound to it.
        events = await env.complete(request(key="one conversation"))
        assert isinstance(events[-1], MessageStop)
        assert env.chats()[-1] != first.id


async def test_a_stream_that_ends_normally_closes_the_breaker(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        account = await env.add_account()
        env.fake.enqueue(DROPPED, DROPPED)
        for _ in range(2):
            await env.complete()
        assert (await env.state(account.id)).failures == 2
        await env.complete()
        assert (await env.state(account.id)).failures == 0


async def test_an_answer_that_ended_with_an_error_of_its_own_is_not_retried(
    tmp_path: Path,
) -> None:
    """Kiro's error that is not the account's (a ValidationException frame mid-answer) ends the
    answer where it is: no other account, and nothing counted against this one."""
    async with pool_env(tmp_path) as env:
        first, _ = await env.add_accounts(2)
        env.fake.enqueue(
            dataclasses.replace(
                DROPPED, fault=Fault.MIDSTREAM_EXCEPTION, exception_type="ValidationException"
            )
        )
        events = await env.complete(request(stream=False))
        assert isinstance(events[-1], ErrorEvent)
        assert events[-1].code == "upstream_error"
        assert env.chats() == [first.id]
        assert (await env.state(first.id)).failures == 0


async def test_a_whole_answer_broken_on_the_only_account_is_its_error(tmp_path: Path) -> None:
    """One account: no other to move to, and a transient failure is not retried on the same
    account (the failover's rule), so the client gets the error; the next request is served."""
    async with pool_env(tmp_path) as env:
        account = await env.add_account()
        env.fake.enqueue(DROPPED)
        with pytest.raises(ApiError) as error:
            await env.complete(request(stream=False))
        assert (error.value.status, error.value.code) == (502, "upstream_protocol")
        assert (await env.state(account.id)).failures == 1
        events = await env.complete(request(stream=False))
        assert isinstance(events[-1], MessageStop)
        assert len(env.chats()) == 2
        assert (await env.state(account.id)).failures == 0
        served, failed = await env.oplog.entries()
        assert [a.outcome for a in failed.attempts] == ["protocol"]
        assert (failed.status, failed.error) == (502, "upstream_protocol")
        assert [a.outcome for a in served.attempts] == ["ok"]


async def test_broken_whole_answers_stay_within_the_attempt_budget(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN, max_attempts=3) as env:
        accounts = await env.add_accounts(4)
        breaks = (DROPPED, dataclasses.replace(DROPPED, fault=Fault.ERROR_FRAME)) * 2
        for account, script in zip(accounts, breaks, strict=True):
            env.fake.set_account_script(env.fake_ids[account.id], script)
        with pytest.raises(ApiError) as error:
            await env.complete(request(stream=False))
        assert error.value.code == "upstream_protocol"
        assert env.chats() == [a.id for a in accounts[:3]]
        [row] = await env.oplog.entries()
        assert [a.outcome for a in row.attempts] == ["protocol", "server", "protocol"]
        assert row.status == 502


async def test_attempts_are_bounded_and_the_last_error_is_returned(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN, max_attempts=3) as env:
        accounts = await env.add_accounts(4)
        faults = (Fault.INTERNAL_500, Fault.CORRUPT_CRC) * 2  # never the same twice in a row
        for account, fault in zip(accounts, faults, strict=True):
            env.fake.enqueue(Script(fault=fault, fault_at=0), account_id=env.fake_ids[account.id])
        with pytest.raises(ApiError) as error:
            await env.complete()
        assert error.value.kind is ErrorKind.UPSTREAM
        assert env.chats() == [a.id for a in accounts[:3]]
        [row] = await env.oplog.entries()
        assert [a.outcome for a in row.attempts] == ["server", "protocol", "server"]
        assert row.status == 502


async def test_one_glitch_on_the_only_account_is_not_an_outage(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        [account] = [await env.add_account()]
        env.fake.enqueue(Script(fault=Fault.CAPACITY_429))
        with pytest.raises(ApiError) as error:
            await env.complete()
        assert error.value.kind is ErrorKind.OVERLOADED
        env.fake.enqueue(Reply(text="back"))
        events = await env.complete()  # at once: no cool-down after one transient failure
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "back"
        assert len(env.chats()) == 2
        assert (await env.state(account.id)).failures == 0


async def test_the_breaker_opens_at_the_threshold_then_panic_mode_tries_the_account(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        account = await env.add_account()
        for _ in range(3):
            env.fake.enqueue(Script(fault=Fault.INTERNAL_500))
            with pytest.raises(ApiError):
                await env.complete()
        state = await env.state(account.id)
        assert (state.status, state.status_transient) == ("cooling_down", True)
        # Every account is out for transient failures only: the request is a trial, not a 429.
        env.fake.enqueue(Reply(text="recovered"))
        events = await env.complete()
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "recovered"
        assert (await env.state(account.id)).status == "active"
        assert len(env.chats()) == 4


async def test_no_panic_for_an_account_out_for_its_own_reasons(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        await env.add_account()
        env.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=30))
        with pytest.raises(ApiError):
            await env.complete()
        with pytest.raises(ApiError) as again:
            await env.complete()
        assert again.value.code == "accounts_cooling_down"
        assert int(again.value.headers["Retry-After"]) in (29, 30)
        assert len(env.chats()) == 1


FLAGGED = (
    "rested 6 h: Kiro flagged suspicious activity and limits how often the account may send "
    "requests"
)
SIX_HOURS = 6 * 3600


async def test_a_flagged_account_rests_for_hours_while_the_other_serves(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        env.fake.enqueue(
            Script(fault=Fault.SUSPICIOUS_429, retry_after_s=2), account_id=env.fake_ids[first.id]
        )
        events = await env.complete()
        assert "".join(e.text for e in events if isinstance(e, TextDelta))
        assert env.chats() == [first.id, second.id]
        rested = await env.state(first.id)
        assert (rested.status, rested.status_reason) == ("cooling_down", FLAGGED)
        assert rested.status_until is not None
        assert rested.status_until - env.clock() == pytest.approx(SIX_HOURS, abs=5)  # not 2 s
        assert rested.last_error == "suspicious_activity: HTTP 429"
        # Hours later the flagged account is still left alone, panic mode or not.
        env.clock.advance(SIX_HOURS - 60)
        env.fake.clear_requests()
        for _ in range(2):
            await env.complete()
        assert env.chats() == [second.id, second.id]
        assert (await env.state(first.id)).status == "cooling_down"


async def test_the_only_account_flagged_tells_the_client_it_rests_and_until_when(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        account = await env.add_account()
        env.fake.enqueue(Script(fault=Fault.SUSPICIOUS_429, retry_after_s=2))
        with pytest.raises(ApiError) as error:
            await env.complete()
        until = (await env.state(account.id)).status_until
        assert until is not None
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(until))
        assert (error.value.kind, error.value.code) == (ErrorKind.RATE_LIMIT, "account_flagged")
        assert error.value.message == (
            "Kiro flagged suspicious activity on the Kiro account and limits how often it may "
            f"send requests; kirod rests the account until {when}"
        )
        assert int(error.value.headers["Retry-After"]) in (SIX_HOURS - 1, SIX_HOURS)
        # The next request is refused without asking Kiro, and says why.
        with pytest.raises(ApiError) as again:
            await env.complete()
        assert again.value.code == "accounts_cooling_down"
        assert again.value.message.startswith(
            "all Kiro accounts are resting: Kiro flagged suspicious activity; the first is back"
        )
        assert int(again.value.headers["Retry-After"]) in (SIX_HOURS - 1, SIX_HOURS)
        assert len(env.chats()) == 1
        refused, flagged = await env.oplog.entries()  # the newest first
        assert (flagged.status, flagged.error) == (429, "account_flagged")
        assert [a.outcome for a in flagged.attempts] == ["suspicious_activity"]
        assert (refused.error, refused.attempts) == ("accounts_cooling_down", ())


async def test_bearer_rejection_refreshes_once_on_the_same_account(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, _ = await env.add_accounts(2)
        env.fake.enqueue(Script(fault=Fault.BEARER_INVALID_403))
        events = await env.complete()
        assert isinstance(events[-1], MessageStop)
        assert env.chats() == [first.id, first.id]
        assert len(env.fake.requests("social_refresh")) == 1
        after = await env.state(first.id)
        assert (after.status, after.auth_failures, after.generation) == (
            "active",
            0,
            first.generation + 1,
        )


async def test_five_rejections_of_fresh_credentials_disable_the_account(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        [account] = await env.add_accounts(1)
        for attempt in range(1, 6):
            env.fake.enqueue(Script(fault=Fault.BEARER_INVALID_403))
            env.fake.enqueue(Script(fault=Fault.BEARER_INVALID_403))
            with pytest.raises(ApiError):
                await env.complete()
            state = await env.state(account.id)
            assert state.auth_failures == attempt
            env.clock.advance(24 * 3600)  # past any cool-down: the next request is the trial
        assert state.status == "disabled"
        assert (state.status_reason or "").startswith("5 consecutive authentication failures")
        with pytest.raises(ApiError) as error:
            await env.complete()
        assert error.value.kind is ErrorKind.UNAVAILABLE
        assert len(env.chats()) == 10


async def test_a_dead_refresh_token_needs_login_and_the_next_account_serves(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        stored = await env.state(first.id)
        env.fake.revoke_refresh_token(stored.credentials["refresh_token"])
        env.fake.expire_account_tokens(env.fake_ids[first.id])
        await env.complete()
        assert env.chats() == [None, second.id]  # the expired token was refused
        after = await env.state(first.id)
        assert after.status == "needs_login"
        [row] = await env.oplog.entries()
        # the refused call, the refresh that found the login dead, the next account
        assert [a.outcome for a in row.attempts] == ["bearer", "needs_login", "ok"]
        # new credentials (a re-login) end needs_login
        relogin = await env.store.update_credentials(
            first.id, {"access_token": "new"}, expected_generation=after.generation
        )
        assert relogin.status == "active"


async def test_operation_log_row(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        [account] = await env.add_accounts(1)
        env.fake.enqueue(Reply(text="four words right here", credits=0.25))
        await env.complete(request("a secret prompt", temperature=0.2, key="session-1"))
        [row] = await env.oplog.entries()
        assert (row.key_id, row.protocol, row.model, row.stream) == (
            TENANT,
            "anthropic_messages",
            "claude-sonnet-4-6",
            True,
        )
        assert (row.account_id, row.status, row.error, row.stop_reason) == (
            account.id,
            200,
            None,
            "end_turn",
        )
        assert row.credits == 0.25
        assert row.input_tokens
        assert row.output_tokens
        assert row.ttfb_ms is not None
        assert 0 < row.ttfb_ms <= row.total_ms
        assert row.dropped == ("temperature",)
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("kirod.db"))
        assert b"a secret prompt" not in data
        assert b"session-1" not in data
        assert b"four words" not in data


async def test_a_request_that_fails_the_same_way_twice_is_not_tried_on_a_third(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        first, second, third = await env.add_accounts(3)
        for account in (first, second, third):
            env.fake.enqueue(Script(fault=Fault.INTERNAL_500), account_id=env.fake_ids[account.id])
        with pytest.raises(ApiError) as error:
            await env.complete()
        assert error.value.kind is ErrorKind.UPSTREAM
        assert env.chats() == [first.id, second.id]
        assert (await env.state(third.id)).failures == 0
        [row] = await env.oplog.entries()
        assert [a.outcome for a in row.attempts] == ["server", "server"]


async def test_different_failures_keep_failing_over(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        first, second, third = await env.add_accounts(3)
        env.fake.enqueue(Script(fault=Fault.INTERNAL_500), account_id=env.fake_ids[first.id])
        env.fake.enqueue(
            Script(fault=Fault.CORRUPT_CRC, fault_at=0), account_id=env.fake_ids[second.id]
        )
        env.fake.enqueue(Reply(text="third"), account_id=env.fake_ids[third.id])
        events = await env.complete()
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "third"
        assert env.chats() == [first.id, second.id, third.id]
