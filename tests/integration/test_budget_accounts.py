"""Account budgets and the overage guard end to end: the official SDK → the real daemon → the
fake Kiro, which meters each chat 0.25 credits and, with overage on, keeps serving an account
past its plan and bills the excess (docs/KIRO-PROTOCOL.md §6.5).

A credit ceiling rests its account at its edge until the period turns (its state, reason and
until in `GET /accounts`); another account serves meanwhile, and with none the answer is a 429
that names the budget and reaches no Kiro. Raising the ceiling lifts the rest, and both the
spend and the rest outlive a restart. An account whose plan is used up with overage on in Kiro
gets nothing more from kirod unless its `allow_overage` is set, and requests in flight together
leave what is left of its plan; allowed, it is served until Kiro's overage cap. Concurrent
requests spend a ceiling exactly, once kirod has learned what they cost. A usage probe undoes
neither rest."""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.accounts.health import OVERAGE_GUARD_REASON
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Latency, Reply, Script, ThreadedFake, TokenSet
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
CREDITS = 0.25  # what the fake meters each chat: sums of it are exact in binary


@contextlib.contextmanager
def metered(fake: ThreadedFake) -> Iterator[None]:
    """The module's fake metering every chat `CREDITS`, with no chat recorded yet."""
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    fake.fake.default_script = Script(reply=Reply(text="ok", credits=CREDITS))
    try:
        yield
    finally:
        fake.fake.default_script = None
        fake.fake.latency = Latency()


@contextlib.contextmanager
def daemon_on(
    fake: ThreadedFake, root: Path, extra: Mapping[str, str] | None = None
) -> Iterator[DaemonProcess]:
    with metered(fake):
        daemon = start_daemon(root, fake, extra)
        try:
            yield daemon
        finally:
            daemon.kill()


@pytest.fixture
def proc(fake: ThreadedFake, short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon of the test's own on the module's metered fake."""
    with daemon_on(fake, short_tmp) as daemon:
        yield daemon


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def account(proc: DaemonProcess, account_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = proc.client.request("GET", f"/accounts/{account_id}")
    return shown


def add(proc: DaemonProcess, tokens: TokenSet) -> str:
    """Import the fake's account and wait for kirod's first usage probe of it."""
    account_id: str = import_account(proc, tokens)["id"]
    wait_for(lambda: account(proc, account_id)["usage"] is not None, "the usage probe")
    return account_id


def ask(proc: DaemonProcess, text: str = "same words each time") -> anthropic.types.Message:
    """Identical requests: after the first, kirod's estimate is what the fake meters."""
    with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as c:
        return c.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": text}]
        )


def chats(fake: ThreadedFake) -> list[str]:
    """The fake accounts the chats so far went to, in order."""
    return [record.account_id or "" for record in fake.fake.requests("chat")]


def next_midnight() -> float:
    today = dt.datetime.now(dt.UTC).date()
    return dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), dt.UTC).timestamp()


def next_month() -> float:
    today = dt.datetime.now(dt.UTC).date()
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return dt.datetime(year, month, 1, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize("period", ["day", "month"])
def test_a_ceiling_rests_the_only_account_at_its_edge_and_raising_it_lifts_the_rest(
    proc: DaemonProcess, fake: ThreadedFake, period: str
) -> None:
    tokens = fake.fake.issue_social_account()
    account_id = add(proc, tokens)
    per_day, per_month = (1.0, None) if period == "day" else (None, 1.0)
    proc.client.set_account_budget(
        account_id, credits_per_day=per_day, credits_per_month=per_month, allow_overage=False
    )
    for _ in range(4):  # 4 times 0.25: exactly the ceiling, each one fitting beside the others
        assert ask(proc).content
    shown = account(proc, account_id)
    assert shown["status"] == "cooling_down"
    assert f"credit budget of 1 credits a {period} is spent" in shown["status_reason"]
    until = next_midnight() if period == "day" else next_month()
    assert shown["status_until"] == pytest.approx(until, abs=1)
    spent = shown["budget"]["spent_today" if period == "day" else "spent_month"]
    assert spent == 1.0
    assert shown["budget"]["left_today" if period == "day" else "left_month"] == 0.0
    assert fake.fake.account(tokens.account_id).usage.current == 1.0  # Kiro metered the same

    sent = len(chats(fake))
    with pytest.raises(anthropic.RateLimitError) as refused:
        ask(proc)
    assert refused.value.status_code == 429
    # Until the rest ends: the period's turn.
    wait = int(refused.value.response.headers["Retry-After"])
    assert wait == pytest.approx(until - time.time(), abs=5)
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    message = body["error"]["message"]
    assert "credit budget" in message
    assert "kiroctl accounts set-budget" in message
    # The same refusal in the Responses API's envelope.
    with (
        openai.OpenAI(base_url=f"{proc.base_url}/v1", api_key=proc.api_key, max_retries=0) as gpt,
        pytest.raises(openai.RateLimitError) as responses_refused,
    ):
        gpt.responses.create(model=MODEL, max_output_tokens=64, input="same words")
    assert "credit budget" in responses_refused.value.message
    assert int(responses_refused.value.response.headers["Retry-After"]) == pytest.approx(
        wait, abs=5
    )
    assert len(chats(fake)) == sent  # refused before Kiro

    # A usage probe finds credits left in the plan: the account stays at rest.
    proc.client.probe_account(account_id)
    assert account(proc, account_id)["status"] == "cooling_down"

    raised = proc.client.set_account_budget(
        account_id,
        credits_per_day=2.0 if period == "day" else None,
        credits_per_month=2.0 if period == "month" else None,
        allow_overage=False,
    )
    assert raised.status == "active"
    assert ask(proc).content
    assert len(chats(fake)) == sent + 1


def test_with_two_accounts_the_other_serves_once_a_ceiling_is_spent(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    first_tokens = fake.fake.issue_social_account()
    second_tokens = fake.fake.issue_social_account()
    ids = {
        first_tokens.account_id: add(proc, first_tokens),
        second_tokens.account_id: add(proc, second_tokens),
    }
    assert ask(proc).content
    [served] = chats(fake)  # the account identical requests stay on while it may serve
    other = next(fake_id for fake_id in ids if fake_id != served)
    budgeted = ids[served]
    # Its first request counts: two more spend the 0.75.
    proc.client.set_account_budget(
        budgeted, credits_per_day=0.75, credits_per_month=None, allow_overage=False
    )
    for _ in range(2):
        assert ask(proc).content
    assert chats(fake) == [served] * 3
    shown = account(proc, budgeted)
    assert shown["status"] == "cooling_down"
    assert "credits a day is spent" in shown["status_reason"]

    for _ in range(3):
        assert ask(proc).content
    assert chats(fake)[3:] == [other] * 3
    assert account(proc, budgeted)["budget"]["spent_today"] == 0.75
    assert account(proc, ids[other])["status"] == "active"


def guarded_account(fake: ThreadedFake) -> TokenSet:
    """A Pro account with overage on in Kiro and half a credit of its plan left."""
    tokens = fake.fake.issue_social_account(subscription="KIRO PRO")
    fake.fake.set_usage(tokens.account_id, current=999.5, overage_status="ENABLED")
    return tokens


def test_the_overage_guard_sends_nothing_past_the_plan_until_overage_is_allowed(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    tokens = guarded_account(fake)
    account_id = add(proc, tokens)
    assert account(proc, account_id)["allow_overage"] is False  # imported: not allowed
    for _ in range(2):  # the plan's last 0.5 credits
        assert ask(proc).content
    shown = account(proc, account_id)
    assert (shown["status"], shown["status_reason"]) == ("exhausted", OVERAGE_GUARD_REASON)
    assert shown["status_until"] == pytest.approx(next_month(), abs=1)

    sent = len(chats(fake))
    with pytest.raises(anthropic.RateLimitError) as refused:
        ask(proc)
    body = refused.value.body
    assert isinstance(body, dict)
    assert "does not spend into overage" in body["error"]["message"]
    assert "--allow-overage" in body["error"]["message"]
    assert len(chats(fake)) == sent
    assert fake.fake.account(tokens.account_id).usage.overages == 0.0  # nothing billed

    # The usage probe sees the plan used up: the state still names the guard, not the plan.
    probed = proc.client.probe_account(account_id)
    assert (probed.status, probed.status_reason) == ("exhausted", OVERAGE_GUARD_REASON)

    allowed = proc.client.set_account_budget(
        account_id, credits_per_day=None, credits_per_month=None, allow_overage=True
    )
    assert allowed.status == "active"
    assert allowed.bills_overage
    for _ in range(2):
        assert ask(proc).content
    assert len(chats(fake)) == sent + 2
    usage = fake.fake.account(tokens.account_id).usage
    assert (usage.overages, usage.current) == (0.5, 1000.5)  # Kiro billed it as overage
    # A probe in overage (nothing left of the plan) keeps it serving.
    assert proc.client.probe_account(account_id).status == "active"
    assert ask(proc).content
    # Allowed no more: the guard holds it again at once.
    withdrawn = proc.client.set_account_budget(
        account_id, credits_per_day=None, credits_per_month=None, allow_overage=False
    )
    assert (withdrawn.status, withdrawn.status_reason) == ("exhausted", OVERAGE_GUARD_REASON)
    with pytest.raises(anthropic.RateLimitError):
        ask(proc)
    assert len(chats(fake)) == sent + 3


def test_with_two_accounts_the_guarded_one_gets_nothing_and_the_other_serves(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    guarded_tokens = fake.fake.issue_social_account(subscription="KIRO PRO")
    fake.fake.set_usage(guarded_tokens.account_id, current=1000.0, overage_status="ENABLED")
    other_tokens = fake.fake.issue_social_account()
    guarded = add(proc, guarded_tokens)
    add(proc, other_tokens)
    shown = account(proc, guarded)
    assert (shown["status"], shown["status_reason"]) == ("exhausted", OVERAGE_GUARD_REASON)
    listed = {a.id: a for a in proc.client.accounts()}
    assert not listed[guarded].bills_overage
    for n in range(4):
        assert ask(proc, f"question {n}").content
    assert chats(fake) == [other_tokens.account_id] * 4
    assert fake.fake.account(guarded_tokens.account_id).usage.overages == 0.0


def test_concurrent_requests_spend_an_account_ceiling_exactly(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    account_id = add(proc, fake.fake.issue_social_account())
    proc.client.set_account_budget(
        account_id, credits_per_day=2.0, credits_per_month=None, allow_overage=False
    )
    assert ask(proc).content  # kirod learns what such a request costs
    fake.fake.latency = Latency(first_s=0.2)  # all in flight at once
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            outcomes = list(pool.map(lambda _: _outcome(proc), range(16)))
    finally:
        fake.fake.latency = Latency()
    assert outcomes.count("served") == 7  # 0.25 spent, 1.75 left: 7 fit, 9 do not
    assert outcomes.count(OVER_BUDGET) == 9, set(outcomes)
    assert len(chats(fake)) == 8
    shown = account(proc, account_id)
    assert shown["budget"]["spent_today"] == 2.0
    assert shown["status"] == "cooling_down"


OVER_BUDGET = (
    "429: every Kiro account that serves this model has spent the credit budget set for it "
    "(this request may cost about 0.25 credits); 'kiroctl accounts set-budget' changes the budgets"
)


def _outcome(proc: DaemonProcess, text: str = "same words each time") -> str:
    try:
        ask(proc, text)
    except anthropic.APIStatusError as refused:
        body = refused.body
        assert isinstance(body, dict), body
        return f"{refused.status_code}: {body['error']['message']}"
    return "served"


def test_requests_queued_for_the_account_are_refused_as_over_budget_once_it_is_full(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    """Requests waiting for the account's one slot hold nothing yet, so more are admitted than
    its ceiling takes: the one left when it is spent is the ceiling's 429, not a 503."""
    with daemon_on(fake, short_tmp, {"KIROD_ACCOUNT_INFERENCE_CONCURRENCY": "1"}) as proc:
        account_id = add(proc, fake.fake.issue_social_account())
        proc.client.set_account_budget(
            account_id, credits_per_day=0.75, credits_per_month=None, allow_overage=False
        )
        assert ask(proc).content  # 0.25 spent, and what such a request costs learned
        fake.fake.latency = Latency(first_s=0.5)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = []
            for n in range(3):
                futures.append(pool.submit(_outcome, proc, f"queued {n}"))
                time.sleep(0.1)  # in this order: the first holds the slot, two wait for it
            outcomes = [future.result() for future in futures]
        assert outcomes[:2] == ["served", "served"]
        assert outcomes[2].startswith("429: every Kiro account that serves this model has spent")
        assert len(chats(fake)) == 3


def test_a_spent_ceiling_and_its_rest_survive_a_restart(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    with daemon_on(fake, short_tmp) as proc:
        account_id = add(proc, fake.fake.issue_social_account())
        proc.client.set_account_budget(
            account_id, credits_per_day=0.5, credits_per_month=None, allow_overage=False
        )
        for _ in range(2):
            assert ask(proc).content
        assert account(proc, account_id)["status"] == "cooling_down"
        assert proc.stop() == 0
    with daemon_on(fake, short_tmp) as proc:
        shown = account(proc, account_id)
        assert shown["status"] == "cooling_down"
        assert shown["budget"]["spent_today"] == 0.5
        with pytest.raises(anthropic.RateLimitError):
            ask(proc)
        assert chats(fake) == []  # refused before Kiro
        # Raised after the restart, the ceiling counts the day's spend from before it.
        proc.client.set_account_budget(
            account_id, credits_per_day=0.75, credits_per_month=None, allow_overage=False
        )
        assert ask(proc).content
        assert account(proc, account_id)["status"] == "cooling_down"


def test_allowed_overage_ends_at_kiros_overage_cap_and_the_other_account_serves(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    tokens = fake.fake.issue_social_account(subscription="KIRO PRO")
    fake.fake.set_usage(
        tokens.account_id, current=1000.0, overage_status="ENABLED", overage_cap=0.5
    )
    in_overage = add(proc, tokens)
    allowed = proc.client.set_account_budget(
        in_overage, credits_per_day=None, credits_per_month=None, allow_overage=True
    )
    assert allowed.status == "active"
    for _ in range(2):
        assert ask(proc).content
    assert fake.fake.account(tokens.account_id).usage.overages == 0.5  # the cap, all billed
    other_tokens = fake.fake.issue_social_account()
    add(proc, other_tokens)
    assert ask(proc).content  # Kiro refuses the first account past its cap: the other serves
    assert chats(fake) == [tokens.account_id] * 3 + [other_tokens.account_id]
    wait_for(lambda: fake.fake.requests("chat")[2].status is not None, "the refusal's status")
    assert fake.fake.requests("chat")[2].status == 402
    shown = account(proc, in_overage)
    assert shown["status"] == "exhausted", shown
    assert "OVERAGE_REQUEST_LIMIT_EXCEEDED" in shown["status_reason"], shown
    # A probe finds nothing left of the plan: overage allowed does not bring it back.
    assert proc.client.probe_account(in_overage).status == "exhausted"


def test_concurrent_requests_leave_the_plan_and_spend_no_overage_while_guarded(
    proc: DaemonProcess, fake: ThreadedFake
) -> None:
    tokens = guarded_account(fake)
    account_id = add(proc, tokens)
    assert ask(proc).content  # kirod learns what such a request costs; 0.25 of the plan left
    fake.fake.latency = Latency(first_s=0.5)  # all in flight at once
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda _: _outcome(proc), range(8)))
    finally:
        fake.fake.latency = Latency()
    assert outcomes.count("served") == 1, outcomes
    refusals = [outcome for outcome in outcomes if outcome != "served"]
    assert all(
        outcome.startswith("429: ") and "does not spend into overage" in outcome
        for outcome in refusals
    ), set(refusals)
    assert len(chats(fake)) == 2
    usage = fake.fake.account(tokens.account_id).usage
    assert (usage.current, usage.overages) == (1000.0, 0.0)
    shown = account(proc, account_id)
    assert (shown["status"], shown["status_reason"]) == ("exhausted", OVERAGE_GUARD_REASON)
