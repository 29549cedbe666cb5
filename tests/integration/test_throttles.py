"""Kiro's throttles as today's Kiro sends them (the wait in the body, a reason per limit), through
the real daemon and the official SDKs, with one account and with two (docs/KIRO-PROTOCOL.md §4.3):
the body's wait rests the account and reaches the client as Retry-After, a penalty window holds
every request to its account, the daily limit rests until 00:00 UTC, a full conversation is the
client's context error and leaves the account alone, and Kiro's own trouble (model capacity, a
service-wide throttle) takes no account out.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.accounts.health import next_utc_midnight
from kirod.cli.main import cli
from kirod.testing.fake_kiro import Fault, Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"


class Setup:
    """One daemon, its accounts (kirod's id → the fake's), in the order they were added."""

    def __init__(self, fake: ThreadedFake, accounts: int) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kd-"))
        # sticky: one account serves until it fails, so who meets a fault is known
        self.proc = start_daemon(
            self.root,
            fake,
            {"KIROD_ACCOUNT_SELECTION_STRATEGY": "sticky", "KIROD_ENABLE_CHAT_COMPLETIONS": "true"},
        )
        self.fake = fake.fake
        self.ids: dict[str, str] = {}
        for _ in range(accounts):
            tokens = fake.fake.issue_social_account()
            self.ids[import_account(self.proc, tokens)["id"]] = tokens.account_id

    @property
    def accounts(self) -> list[str]:
        return list(self.ids)

    def reset(self) -> None:
        for account in self.ids:
            self.proc.client.enable_account(account)
        self.fake.clear_scripts()
        self.fake.clear_requests()

    def fail(self, account: str, script: Script) -> None:
        self.fake.enqueue(script, account_id=self.ids[account])

    def chats(self) -> list[str]:
        """kirod's account of each chat the fake received, in order."""
        by_fake = {fake: ours for ours, fake in self.ids.items()}
        return [by_fake[chat.account_id or ""] for chat in self.fake.requests("chat")]

    def account(self, account: str) -> dict[str, Any]:
        """The account as `kiroctl accounts list --json` shows it."""
        result = CliRunner().invoke(
            cli, ["--socket", str(self.proc.socket_path), "accounts", "list", "--json"]
        )
        assert result.exit_code == 0, result.output
        listed = json.loads(result.stdout)
        rows = listed["accounts"] if isinstance(listed, dict) else listed
        [row] = [row for row in rows if row["id"] == account]
        return dict(row)

    def trace(self, request_id: str) -> list[dict[str, Any]]:
        result = CliRunner().invoke(
            cli, ["--socket", str(self.proc.socket_path), "trace", request_id, "--json"]
        )
        assert result.exit_code == 0, result.output
        [row] = json.loads(result.stdout)["requests"]
        return list(row["attempts"])

    def close(self) -> None:
        assert self.proc.stop() == 0
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def one(fake: ThreadedFake) -> Iterator[Setup]:
    setup = Setup(fake, 1)
    try:
        yield setup
    finally:
        setup.close()


@pytest.fixture(scope="module")
def two(fake: ThreadedFake) -> Iterator[Setup]:
    setup = Setup(fake, 2)
    try:
        yield setup
    finally:
        setup.close()


@pytest.fixture
def single(one: Setup) -> Setup:
    one.reset()
    return one


@pytest.fixture
def pair(two: Setup) -> Setup:
    """The two-account daemon, its accounts ordered as it serves them: sticky serves from the
    first (the one that answered last) until it fails."""
    two.reset()
    ask(two)
    [serving] = two.chats()
    two.ids = {serving: two.ids[serving]} | {k: v for k, v in two.ids.items() if k != serving}
    two.fake.clear_requests()
    return two


def claude(setup: Setup) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=setup.proc.base_url, api_key=setup.proc.api_key, max_retries=0
    )


def gpt(setup: Setup) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{setup.proc.base_url}/v1", api_key=setup.proc.api_key, max_retries=0
    )


def ask(setup: Setup) -> str:
    with claude(setup) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
    return message.content[0].text  # type: ignore[union-attr]


def refused(setup: Setup) -> anthropic.APIStatusError:
    with claude(setup) as client, pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
    return caught.value


def throttle(reason: str, wait_s: int = 0) -> Script:
    return Script(fault=Fault.THROTTLE_429, throttle_reason=reason, retry_after_s=wait_s)


def retry_after(error: anthropic.APIStatusError) -> int:
    return int(error.response.headers["retry-after"])


# The body's wait


def test_the_body_s_wait_rests_the_one_account_and_reaches_the_client(single: Setup) -> None:
    [account] = single.accounts
    single.fail(account, throttle("CREDIT_CONSUMPTION_RATE_EXCEEDED", 300))
    error = refused(single)
    assert error.status_code == 429
    assert 299 <= retry_after(error) <= 300  # Kiro's 300000 ms, not the breaker's minute
    row = single.account(account)
    assert row["status"] == "cooling_down"
    assert row["status_until"] == pytest.approx(time.time() + 300, abs=5)
    again = refused(single)  # the account rests: Kiro is not asked again
    assert 295 <= retry_after(again) <= 300
    assert len(single.fake.requests("chat")) == 1


def test_every_account_resting_tells_the_soonest_return(pair: Setup) -> None:
    first, second = pair.accounts
    pair.fail(first, throttle("CREDIT_CONSUMPTION_RATE_EXCEEDED", 90))
    pair.fail(second, throttle("CREDIT_CONSUMPTION_RATE_EXCEEDED", 300))
    error = refused(pair)
    assert error.status_code == 429
    assert 88 <= retry_after(error) <= 90  # the first is back first, whatever the last one said
    assert pair.chats() == [first, second]
    assert pair.account(first)["status_until"] == pytest.approx(time.time() + 90, abs=5)
    assert pair.account(second)["status_until"] == pytest.approx(time.time() + 300, abs=5)


# The penalty window


def test_a_penalty_window_holds_the_next_request_on_the_one_account(single: Setup) -> None:
    [account] = single.accounts
    single.fail(account, throttle("USER_REQUEST_RATE_EXCEEDED"))  # no wait given
    error = refused(single)
    assert error.status_code == 429
    assert 118 <= retry_after(error) <= 120  # the measured window
    assert single.account(account)["status"] == "cooling_down"
    later = refused(single)  # the next request waits it out too, without reaching Kiro
    assert later.status_code == 429
    assert 115 <= retry_after(later) <= 120
    assert len(single.fake.requests("chat")) == 1
    request_id = error.response.headers["x-request-id"]
    [attempt] = single.trace(request_id)
    assert (attempt["outcome"], attempt["upstream_status"], attempt["upstream_reason"]) == (
        "penalty_window",
        429,
        "USER_REQUEST_RATE_EXCEEDED",
    )


def test_a_penalty_window_keeps_requests_off_its_account(pair: Setup) -> None:
    first, second = pair.accounts
    pair.fail(first, throttle("USER_REQUEST_RATE_EXCEEDED", 60))
    pair.fake.enqueue(Reply(text="from the second"), account_id=pair.ids[second])
    assert ask(pair) == "from the second"
    for _ in range(3):
        ask(pair)
    assert pair.chats() == [first, second, second, second, second]
    assert pair.account(first)["status_until"] == pytest.approx(time.time() + 60, abs=5)


# The daily limit


def test_the_daily_limit_rests_the_account_until_midnight_utc(single: Setup) -> None:
    [account] = single.accounts
    single.fail(account, throttle("DAILY_REQUEST_COUNT", 300))
    error = refused(single)
    assert error.status_code == 429
    assert error.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert "00:00 UTC" in error.message
    midnight = next_utc_midnight(time.time())
    row = single.account(account)
    assert (row["status"], row["status_until"]) == ("cooling_down", midnight)
    assert "daily request limit" in row["status_reason"]
    assert abs(retry_after(error) - (midnight - time.time())) <= 5
    assert single.proc.client.account(account).status_until == midnight  # the LocalAPI too
    again = refused(single)  # not sent to Kiro: the account rests, and the answer says why
    assert again.status_code == 429
    assert "daily request limit (reset 00:00 UTC)" in again.message
    assert abs(retry_after(again) - (midnight - time.time())) <= 5
    assert len(single.fake.requests("chat")) == 1


def test_the_daily_limit_on_one_of_two_moves_to_the_other(pair: Setup) -> None:
    first, second = pair.accounts
    pair.fail(first, throttle("DAILY_REQUEST_COUNT"))
    pair.fake.enqueue(Reply(text="from the second"), account_id=pair.ids[second])
    assert ask(pair) == "from the second"
    assert pair.account(first)["status_until"] == next_utc_midnight(time.time())


# A full conversation


def test_a_full_conversation_is_each_protocol_s_context_error(single: Setup) -> None:
    [account] = single.accounts
    single.fail(account, Script(fault=Fault.CONVERSATION_LIMIT_402))
    error = refused(single)
    assert isinstance(error, anthropic.BadRequestError)
    assert error.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "prompt is too long" in error.message  # what Claude Code compacts on
    single.fail(account, Script(fault=Fault.CONVERSATION_LIMIT_402))
    with gpt(single) as client, pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert chat.value.code == "context_length_exceeded"
    single.fail(account, Script(fault=Fault.CONVERSATION_LIMIT_402))
    with gpt(single) as client, pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model=MODEL, input="hi")
    assert responses.value.code == "context_length_exceeded"
    row = single.account(account)
    assert (row["status"], row["status_until"]) == ("active", None)  # not "exhausted"
    assert ask(single) == "You said: hi"


def test_a_full_conversation_is_not_tried_on_the_other_account(pair: Setup) -> None:
    first, _ = pair.accounts
    pair.fail(first, Script(fault=Fault.CONVERSATION_LIMIT_402))
    assert isinstance(refused(pair), anthropic.BadRequestError)
    assert pair.chats() == [first]  # the conversation, not the account: no failover
    assert pair.account(first)["status"] == "active"


# Kiro's own trouble


@pytest.mark.parametrize(
    ("reason", "status", "outcome"),
    [
        ("SERVICE_REQUEST_RATE_EXCEEDED", 429, "service_throttled"),
        ("INSUFFICIENT_MODEL_CAPACITY", 529, "capacity"),
    ],
)
def test_kiro_s_own_trouble_does_not_take_the_one_account_out(
    single: Setup, reason: str, status: int, outcome: str
) -> None:
    [account] = single.accounts
    single.fail(account, throttle(reason, 300))
    error = refused(single)
    assert error.status_code == status
    assert 299 <= retry_after(error) <= 300  # Kiro's wait, told to the client
    [attempt] = single.trace(error.response.headers["x-request-id"])
    assert (attempt["outcome"], attempt["upstream_reason"]) == (outcome, reason)
    row = single.account(account)
    assert (row["status"], row["status_until"]) == ("active", None)
    assert ask(single) == "You said: hi"  # served at once by the same account


def test_kiro_s_own_trouble_fails_over_and_leaves_the_account_in_service(pair: Setup) -> None:
    first, second = pair.accounts
    pair.fail(first, throttle("INSUFFICIENT_MODEL_CAPACITY", 300))
    pair.fake.enqueue(Reply(text="from the second"), account_id=pair.ids[second])
    assert ask(pair) == "from the second"
    assert pair.account(first)["status"] == "active"
    pair.fail(second, throttle("CREDIT_CONSUMPTION_RATE_EXCEEDED", 300))
    assert ask(pair) == "You said: hi"  # the first serves again at once
    assert pair.chats() == [first, second, second, first]


def test_the_older_header_form_still_rests_for_its_wait(single: Setup) -> None:
    [account] = single.accounts
    single.fail(account, Script(fault=Fault.THROTTLE_429_RETRY_AFTER_HEADER, retry_after_s=45))
    error = refused(single)
    assert 44 <= retry_after(error) <= 45
    assert single.account(account)["status_until"] == pytest.approx(time.time() + 45, abs=5)
