"""Key budgets through the real daemon, the fake Kiro and the official SDKs (issue 48, item 1).

A key's day budget refuses exactly at its edge under 32 concurrent requests: with scripted
credits, after a first request the estimate is the cost and nothing is overspent; with costs that
vary, no request overspends by more than its own estimate's error. What a key spent is what the
fake charged, as `kiroctl stats` sums it, to 6 decimals, and survives a restart and `kill -9`
(after the operation log's write-behind window, docs/RELIABILITY.md). Tokens a minute hold
requests in flight. A refusal is a 429 in each protocol's envelope with Retry-After and a message
naming the budget; it reaches no Kiro account and rests none. The operation row records what was
reserved beside what was settled, an extension's `on_request` sees `key_budget()`, and a webhook
hears 80 % and 100 % of a budget once per period.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.localapi.client import LocalClient
from kirod.storage.oplog import FLUSH_DELAY_S
from kirod.testing.fake_kiro import Fault, Reply, Script, ThreadedFake
from tests.support.distributions import dist_info
from tests.support.kiro_env import import_account, start_daemon
from tests.support.webhook import Webhook

MODEL = "claude-sonnet-4-6"
PROMPT = "How much does this cost?"
MAX_TOKENS = 64
CONCURRENT = 32
KILL_WINDOW_S = FLUSH_DELAY_S + 0.4  # what a kill -9 may lose (tests/reliability/test_oplog_crash)

# An extension that tells Kiro what `key_budget()` answered, so the test reads it off the wire.
TELLER = """
import dataclasses

from kirod.extension import Extension, key_budget


class BudgetTeller(Extension):
    async def on_request(self, request):
        budget = key_budget()
        told = "none" if budget is None else (
            f"{budget.key_id} {budget.credits_today} {budget.credits_this_month} "
            f"{budget.tokens_this_minute}"
        )
        return dataclasses.replace(request, system=(*request.system, f"key budget: {told}"))
"""


class Setup:
    """A daemon of its own (the learned credit rate is the daemon's, per model) with its
    accounts (the fake's ids of them; two take turns), and a webhook hearing its alerts."""

    def __init__(
        self, fake: ThreadedFake, root: Path, webhook: Webhook | None = None, accounts: int = 1
    ) -> None:
        self.root = root
        self.fake = fake
        self.env: dict[str, str] = {
            "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
            "KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin",
        }
        if webhook is not None:
            self.env["KIROD_ALERTS_WEBHOOKS"] = json.dumps([{"url": webhook.url}])
        site = root / "site"
        dist_info(site, "kirod-test-teller", "1.0", {"teller": "kirod_test_teller:BudgetTeller"})
        (site / "kirod_test_teller.py").write_text(TELLER)
        config = root / "kirod.toml"
        config.write_text("[extensions.teller]\n")
        path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
        self.env |= {"PYTHONPATH": path, "KIROD_CONFIG": str(config)}
        self.proc = start_daemon(root, fake, self.env)
        self.fake_accounts: list[str] = []
        for _ in range(accounts):
            tokens = fake.fake.issue_social_account()
            import_account(self.proc, tokens)
            self.fake_accounts.append(tokens.account_id)
        self.fake_account = self.fake_accounts[0]
        fake.fake.clear_requests()

    @property
    def control(self) -> LocalClient:
        return self.proc.client

    def restart(self, sig: int) -> float:
        """Stop the daemon with `sig` (SIGKILL: no drain, no flush) and start it again; when
        (monotonic) it was stopped."""
        if sig == signal.SIGKILL:
            self.proc.kill()
        else:
            assert self.proc.stop(sig) == 0
        stopped = time.monotonic()
        self.proc = start_daemon(self.root, self.fake, self.env)
        return stopped

    def costs(self, credits: float | list[float], *, delay_s: float | None = None) -> None:
        """Every answer costs `credits` (a list: each in turn, then the last; of the first
        account), its first frame `delay_s` after the request."""
        fake = self.fake.fake
        each = credits if isinstance(credits, list) else [credits]
        scripts = [Script(Reply(text="ok", credits=c), delay_first_s=delay_s) for c in each]
        fake.enqueue(*scripts[:-1], account_id=self.fake_account)
        for account in self.fake_accounts:
            fake.set_account_script(account, scripts[-1])

    def charged(self) -> float:
        """The credits the fake has charged the accounts so far."""
        accounts = [self.fake.fake.account(account) for account in self.fake_accounts]
        return round(sum(account.usage.current for account in accounts), 6)

    def chats(self) -> int:
        return len(self.fake.fake.requests("chat"))

    def key(self, **budget: Any) -> tuple[str, str]:
        created = self.control.create_key(f"key-{time.monotonic_ns()}", **budget)
        return created.key.id, created.secret

    def budget(self, key_id: str) -> Any:
        listed = self.control.keys()
        [key] = [key for key in listed if key.id == key_id]
        return key.budget

    def usage(self, secret: str) -> Any:
        """`GET /v1/usage` as the key sees it."""
        connection = http.client.HTTPConnection(self.proc.address, timeout=10)
        try:
            connection.request("GET", "/v1/usage", headers={"x-api-key": secret})
            answer = connection.getresponse()
            assert answer.status == 200
            return json.loads(answer.read())
        finally:
            connection.close()

    def kiroctl(self, *args: str) -> Any:
        result = CliRunner().invoke(cli, ["--socket", str(self.proc.socket_path), *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def claude(self, secret: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.proc.base_url, api_key=secret, max_retries=0)

    def gpt(self, secret: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.proc.base_url}/v1", api_key=secret, max_retries=0)

    def ask(self, secret: str, *, max_tokens: int = MAX_TOKENS) -> Any:
        with self.claude(secret) as client:
            return client.messages.create(
                model=MODEL, max_tokens=max_tokens, messages=[{"role": "user", "content": PROMPT}]
            )

    def close(self) -> None:
        for account in self.fake_accounts:
            self.fake.fake.set_account_script(account, None)
        self.proc.stop()


@pytest.fixture
def setup(fake: ThreadedFake, request: pytest.FixtureRequest) -> Iterator[Setup]:
    """One account; `indirect` parametrization gives another number."""
    fake.fake.clear_scripts()
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    made = Setup(fake, root, accounts=getattr(request, "param", 1))
    try:
        yield made
    finally:
        made.close()
        shutil.rmtree(root, ignore_errors=True)


def at_once(count: int, call: Callable[[], Any]) -> list[Any]:
    """`count` calls at once on threads; each one's answer or the exception it raised."""

    def guarded() -> Any:
        try:
            return call()
        except Exception as error:
            return error

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: guarded(), range(count)))


def refusals(answers: list[Any]) -> list[anthropic.RateLimitError]:
    refused = [a for a in answers if isinstance(a, anthropic.RateLimitError)]
    others = [a for a in answers if isinstance(a, Exception) and a not in refused]
    assert not others, others
    return refused


def stats_credits(setup: Setup, key_id: str) -> float:
    [group] = [g for g in setup.kiroctl("stats", "--json")["keys"] if g["key"] == key_id]
    return float(group["credits"])


@pytest.mark.parametrize("setup", [1, 2], indirect=True, ids=["one account", "two accounts"])
def test_a_day_budget_refuses_exactly_at_its_edge_under_32_concurrent_requests(
    setup: Setup,
) -> None:
    setup.costs(0.07, delay_s=0.5)  # the 32 are in flight at once
    key_id, secret = setup.key(credits_per_day=0.7)
    setup.ask(secret)  # the first answer teaches kirod what such a request costs
    assert setup.budget(key_id).spent_today == 0.07

    answers = at_once(CONCURRENT, lambda: setup.ask(secret))

    refused = refusals(answers)
    # 0.63 credits were left: nine answers of 0.07 (in floats, 0.07 and eight more of it come
    # to a hair above 0.63: the edge is counted within a rounding error)
    assert len(answers) - len(refused) == 9
    assert setup.chats() == 10  # the refused reached no account
    budget = setup.budget(key_id)
    assert (budget.spent_today, budget.held, budget.left_today) == (0.7, 0.0, 0.0)
    assert setup.charged() == 0.7  # on both accounts, when there are two, taking turns
    served = {chat.account_id for chat in setup.fake.fake.requests("chat")}
    assert served == set(setup.fake_accounts)
    assert round(stats_credits(setup, key_id), 6) == 0.7
    assert all(error.response.headers.get("retry-after") for error in refused)


def test_with_costs_that_vary_a_burst_overspends_by_no_more_than_one_requests_error(
    setup: Setup,
) -> None:
    # Two answers teach kirod the model's rates (the dearest: 0.3 an answer); in the burst one
    # answer costs 0.45, more than any before it.
    burst = [0.3, 0.3, 0.45, 0.3, 0.3]
    setup.costs([0.2, 0.3, *burst, 0.3], delay_s=1.5)  # all admitted before one ends
    limit = 2.0
    key_id, secret = setup.key(credits_per_day=limit)
    setup.ask(secret)
    setup.ask(secret)

    answers = at_once(CONCURRENT, lambda: setup.ask(secret))

    refused = refusals(answers)
    assert len(answers) - len(refused) == 5  # 1.5 credits left, 0.3 held by each
    rows = setup.kiroctl("trace", "--last", "100", "--json")["requests"]
    mine = [row for row in rows if row["key_id"] == key_id and row["status"] == 200][-5:]
    errors = [row["credits"] - row["reserved_credits"] for row in mine]
    assert sorted(round(error, 6) for error in errors) == [0.0, 0.0, 0.0, 0.0, 0.15]
    spent = setup.budget(key_id).spent_today
    assert round(spent, 6) == round(0.5 + sum(burst), 6) == round(setup.charged(), 6)
    # Over the limit by the one dear answer's error, not by the burst's: a rate that averaged
    # 0.2 and 0.3 would have let a sixth request in and every 0.3 past its estimate.
    assert round(spent - limit, 6) == round(max(errors), 6) == 0.15
    assert setup.chats() == 7


def test_settlement_equals_the_fakes_metering_in_every_protocol(setup: Setup) -> None:
    costs = [0.123457, 0.000001, 1.5, 0.333333, 0.25, 0.987654]
    setup.costs(costs)
    key_id, secret = setup.key(credits_per_month=100.0)
    with setup.claude(secret) as claude, setup.gpt(secret) as gpt:
        messages: list[Any] = [{"role": "user", "content": PROMPT}]
        claude.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=messages)
        with claude.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, messages=messages) as s:
            s.get_final_message()
        gpt.responses.create(model=MODEL, input=PROMPT, max_output_tokens=MAX_TOKENS)
        list(gpt.responses.create(model=MODEL, input=PROMPT, stream=True))
        gpt.chat.completions.create(model=MODEL, messages=messages, max_tokens=MAX_TOKENS)
        list(gpt.chat.completions.create(model=MODEL, messages=messages, stream=True))
    total = round(sum(costs), 6)
    budget = setup.budget(key_id)
    assert round(budget.spent_today, 6) == round(budget.spent_month, 6) == total
    assert round(setup.charged(), 6) == total
    assert round(stats_credits(setup, key_id), 6) == total
    [day] = [d for d in setup.control.spend("key", key_id, days=1).days if d.requests]
    assert (day.requests, round(day.credits, 6)) == (6, total)
    told = setup.usage(secret)["budget"]
    assert (round(told["spent_month"], 6), told["credits_per_month"]) == (total, 100.0)
    assert round(told["left_month"], 6) == round(100.0 - total, 6)


def test_a_request_that_fails_or_is_cut_gives_back_its_hold_and_spends_what_was_metered(
    setup: Setup,
) -> None:
    key_id, secret = setup.key(credits_per_day=5.0)
    setup.fake.fake.set_account_script(setup.fake_account, Script(fault=Fault.INTERNAL_500))
    with pytest.raises(anthropic.APIStatusError) as failed:
        setup.ask(secret)
    assert failed.value.status_code >= 500
    setup.fake.fake.set_account_script(
        setup.fake_account, Script(Reply(text="a long answer " * 20), fault=Fault.CONNECTION_CUT)
    )
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    with (
        setup.claude(secret) as claude,
        pytest.raises(anthropic.APIError),
        claude.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, messages=messages) as stream,
    ):
        stream.get_final_message()
    assert setup.chats() >= 2  # both reached Kiro, which metered (and charged) neither
    assert setup.charged() == 0.0
    budget = setup.budget(key_id)
    assert (budget.spent_today, budget.held, budget.left_today) == (0.0, 0.0, 5.0)
    rows = setup.kiroctl("trace", "--last", "2", "--json")["requests"]
    assert all(row["reserved_credits"] > 0 and not row["credits"] for row in rows)


def test_a_month_budget_refuses_until_the_month_turns(setup: Setup) -> None:
    setup.costs(0.5)
    key_id, secret = setup.key(credits_per_month=0.5)
    setup.ask(secret)
    with pytest.raises(anthropic.RateLimitError) as refused:
        setup.ask(secret)
    message = refused.value.body["error"]["message"]
    assert message.startswith("this API key's budget of 0.5 credits a month is spent"), message
    assert "the start of next month (UTC)" in message
    wait = int(refused.value.response.headers["retry-after"])
    assert 1 <= wait <= 31 * 86400
    # Lifted with the control API, the key is served again at once.
    setup.control.set_key_budget(
        key_id, credits_per_day=None, credits_per_month=None, tokens_per_minute=None
    )
    setup.ask(secret)
    assert setup.budget(key_id).spent_month == 1.0
    assert setup.chats() == 2


def test_a_restart_and_a_kill_keep_what_a_key_spent(setup: Setup) -> None:
    setup.costs(0.5)
    key_id, secret = setup.key(credits_per_day=2.0)
    setup.ask(secret)
    setup.restart(signal.SIGTERM)
    assert setup.budget(key_id).spent_today == 0.5

    setup.ask(secret)
    setup.ask(secret)
    time.sleep(KILL_WINDOW_S)  # past the write-behind docs/RELIABILITY.md allows a kill to lose
    setup.restart(signal.SIGKILL)
    assert setup.budget(key_id).spent_today == 1.5
    assert setup.charged() == 1.5

    # Restarted kirod still knows the budget (and the rate, from the operation log):
    setup.ask(secret)  # 2.0 spent
    with pytest.raises(anthropic.RateLimitError) as refused:
        setup.ask(secret)
    assert refused.value.body["error"]["message"].startswith("this API key's budget of 2 credits")
    assert setup.chats() == 4


def test_a_burst_after_a_restart_reserves_at_the_rate_learned_before_it(setup: Setup) -> None:
    setup.costs(0.25, delay_s=0.5)
    key_id, secret = setup.key(credits_per_day=2.0)
    setup.ask(secret)
    setup.ask(secret)
    setup.restart(signal.SIGTERM)

    answers = at_once(CONCURRENT, lambda: setup.ask(secret))

    assert len(answers) - len(refusals(answers)) == 6  # 1.5 credits left: six of 0.25
    assert setup.budget(key_id).spent_today == 2.0
    assert setup.charged() == 2.0


def test_a_kill_loses_at_most_the_requests_answered_in_the_write_behind_window(
    setup: Setup,
) -> None:
    setup.costs(0.25)
    key_id, secret = setup.key(credits_per_day=100.0)
    ended: list[float] = []
    for _ in range(6):
        setup.ask(secret)
        ended.append(time.monotonic())
    killed = setup.restart(signal.SIGKILL)
    kept = setup.budget(key_id).spent_today
    sure = sum(0.25 for at in ended if at < killed - KILL_WINDOW_S)
    assert sure <= kept <= 1.5
    assert kept / 0.25 == int(kept / 0.25)  # whole requests: a row and its spend go together
    assert round(stats_credits(setup, key_id), 6) == kept


def test_tokens_a_minute_hold_requests_in_flight(setup: Setup) -> None:
    setup.fake.fake.set_account_script(
        setup.fake_account, Script(reply=Reply(text="ok", credits=0.01), delay_first_s=2.0)
    )
    key_id, secret = setup.key(tokens_per_minute=1000)
    # Each reserves its input and its 400-token cap: two fit in 1,000 tokens, not three.
    answers = at_once(3, lambda: setup.ask(secret, max_tokens=400))
    [refused] = refusals(answers)
    assert refused.body["error"]["message"].startswith(
        "this API key is limited to 1,000 tokens a minute"
    )
    assert 1 <= int(refused.response.headers["retry-after"]) <= 60
    assert setup.chats() == 2
    # Settled to what was used (a few tokens each), the minute has room again.
    left = setup.budget(key_id)
    assert left.tokens_per_minute == 1000
    setup.ask(secret, max_tokens=400)
    # A request that could never fit says so: no Retry-After would help.
    with pytest.raises(anthropic.RateLimitError) as never:
        setup.ask(secret, max_tokens=2000)
    assert "lower max_tokens" in never.value.body["error"]["message"]
    assert "retry-after" not in never.value.response.headers
    assert setup.chats() == 3


def test_a_refusal_is_a_429_in_each_protocols_envelope_and_reaches_no_account(
    setup: Setup,
) -> None:
    setup.costs(1.0)
    key_id, secret = setup.key(credits_per_day=1.0)
    setup.ask(secret)  # spends the day
    chats = setup.chats()
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    refused: dict[tuple[str, bool], tuple[str | None, Any]] = {}
    with setup.claude(secret) as claude, setup.gpt(secret) as gpt:

        def send(protocol: str, stream: bool) -> Any:
            if protocol == "messages":
                return claude.messages.create(
                    model=MODEL, max_tokens=MAX_TOKENS, messages=messages, stream=stream
                )
            if protocol == "responses":
                return gpt.responses.create(model=MODEL, input=PROMPT, stream=stream)
            return gpt.chat.completions.create(model=MODEL, messages=messages, stream=stream)

        for stream in (False, True):
            for protocol in ("messages", "responses", "chat"):
                with pytest.raises((anthropic.RateLimitError, openai.RateLimitError)) as error:
                    send(protocol, stream)
                headers = error.value.response.headers
                refused[protocol, stream] = (headers.get("retry-after"), error.value.body)
    midnight = 86400 - time.time() % 86400
    for (protocol, _), (retry_after, body) in refused.items():
        if protocol == "messages":
            assert body["type"] == "error"
            assert body["error"]["type"] == "rate_limit_error"
            body = body["error"]
        else:  # the openai SDK's `body` is the envelope's `error` member
            assert body["code"] == "budget_exceeded"
        assert retry_after is not None
        assert abs(int(retry_after) - midnight) < 10  # the day renews at 00:00 UTC
        message = body["message"]
        assert message.startswith("this API key's budget of 1 credit a day is spent"), message
        assert "00:00 UTC" in message
    assert setup.chats() == chats
    [account] = setup.control.accounts()
    assert (account.status, account.status_reason) == ("active", None)
    [pooled] = setup.control.pool().accounts  # nothing counted against it for the breaker
    assert (pooled.status, pooled.failures, pooled.last_error) == ("active", 0, None)
    assert setup.budget(key_id).spent_today == 1.0


def test_the_operation_row_records_what_was_reserved_and_what_was_settled(setup: Setup) -> None:
    setup.costs(0.25)
    key_id, secret = setup.key(credits_per_day=10.0)
    setup.ask(secret)
    setup.ask(secret)
    rows = setup.kiroctl("trace", "--last", "2", "--json")["requests"]
    before, after = sorted(rows, key=lambda row: row["id"])
    assert before["credits"] == after["credits"] == 0.25
    assert before["reserved_tokens"] == after["reserved_tokens"] > MAX_TOKENS
    assert before["reserved_credits"] != 0.25  # nothing was learned yet: the cautious prior
    assert after["reserved_credits"] == 0.25  # learned from the first: the estimate is exact
    assert before["key_id"] == key_id


def test_an_extension_sees_what_the_key_has_left(setup: Setup) -> None:
    setup.costs(0.25)
    key_id, secret = setup.key(credits_per_day=2.0, credits_per_month=5.0, tokens_per_minute=9000)
    setup.ask(secret)
    setup.ask(secret)
    told = [
        re.findall(r"key budget: (\w+) (\S+) (\S+) (\d+)", json.dumps(chat.json))
        for chat in setup.fake.fake.requests("chat")
    ]
    assert told[0] == [(key_id, "2.0", "5.0", "9000")]
    # The second sees the first's spend; its own tokens in the minute are those Kiro counted.
    [(_, today, month, tokens)] = told[1]
    assert (today, month) == ("1.75", "4.75")
    assert 9000 - 200 < int(tokens) < 9000
    # A key with no budget: None.
    setup.ask(setup.key()[1])
    assert "key budget: none" in json.dumps(setup.fake.fake.requests("chat")[-1].json)


def test_a_budget_alerts_at_80_and_100_percent_once_per_period(fake: ThreadedFake) -> None:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    with Webhook() as webhook:
        setup = Setup(fake, root, webhook)
        try:
            setup.costs(0.125)
            key_id, secret = setup.key(credits_per_day=1.0)
            for _ in range(6):
                setup.ask(secret)  # 0.75: under 80 %
            assert not [e for e in webhook.events() if e.startswith("budget_")]
            setup.ask(secret)  # 0.875
            [warning] = [body for body in webhook.wait_for("budget_warning") if body.get("budget")]
            assert warning["budget"] == {
                "scope": "key",
                "id": key_id,
                "period": "day",
                "share": "80%",
                "spent": 0.875,
                "limit": 1.0,
                "renews_at": warning["budget"]["renews_at"],
            }
            assert warning["budget"]["renews_at"] % 86400 == 0
            setup.ask(secret)  # 1.0
            bodies = webhook.wait_for("budget_spent")
            [spent] = [body for body in bodies if body["event"] == "budget_spent"]
            assert (spent["budget"]["share"], spent["budget"]["spent"]) == ("100%", 1.0)
            with pytest.raises(anthropic.RateLimitError):
                setup.ask(secret)
            setup.restart(signal.SIGTERM)  # a restart does not tell it again
            with pytest.raises(anthropic.RateLimitError):
                setup.ask(secret)
            time.sleep(0.5)
            budget_events = [e for e in webhook.events() if e.startswith("budget_")]
            assert budget_events == ["budget_warning", "budget_spent"]
        finally:
            setup.close()
            shutil.rmtree(root, ignore_errors=True)
