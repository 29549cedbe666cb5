"""The side APIs' drift through the real daemon and the fake (docs/RELIABILITY.md, "Drift"): with
the fake's switch on, a catalog with a new field, input type and schema key, a usage answer with a
new field, and a Claude model whose window grew each leave exactly one record of their kind in
`GET /drift` (the control API kiroctl reads), nothing identifying in it, and kirod goes on serving
by what it knows: the catalog's models and limits, the credits left, the real window. With the
switches off nothing is recorded, not even for GPT-5.6's known 1M window
(docs/KIRO-PROTOCOL.md §6.2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.accounts.windows import STREAK
from kirod.report_types import Drift as DriftReport
from kirod.report_types import DriftRecord
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.tokens import TokenSet
from tests.support.kiro_env import import_account, start_daemon

SENTENCE = "The quick brown fox jumps over the lazy dog near the quiet river bank. "
FILLER = SENTENCE * 1_200  # about 17 000 tokens: enough for the window learner to count


@pytest.fixture
def service(fake: ThreadedFake) -> Iterator[FakeKiro]:
    """The module's fake, today's Kiro again after the test."""
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    try:
        yield fake.fake
    finally:
        fake.fake.set_drifts()


class Served:
    """A daemon with one account, and what would identify the account."""

    def __init__(self, proc: DaemonProcess, tokens: TokenSet, account: dict[str, Any]) -> None:
        self.proc = proc
        self.account_id = str(account["id"])
        self.fake_account_id = tokens.account_id
        identifying = (tokens.access_token, tokens.refresh_token, tokens.profile_arn)
        identifying += (tokens.account_id, self.account_id, account.get("label"))
        self.secrets = {str(value) for value in identifying if value}

    def claude(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.proc.base_url, api_key=self.proc.api_key, max_retries=0
        )

    def drift(self) -> list[DriftRecord]:
        answer = self.proc.client.request("GET", "/drift?since=0")
        for secret in self.secrets:
            assert secret not in json.dumps(answer)
        return list(DriftReport.from_json(answer).records)


@pytest.fixture
def served(fake: ThreadedFake, service: FakeKiro, short_tmp: Path) -> Iterator[Served]:
    proc = start_daemon(short_tmp, fake)
    tokens = service.issue_social_account()
    try:
        yield Served(proc, tokens, import_account(proc, tokens))
    finally:
        proc.kill()


def facts(record: DriftRecord) -> dict[str, str]:
    return dict(record.facts)


def ask(claude: anthropic.Anthropic, model: str, text: str) -> anthropic.types.Message:
    return claude.messages.create(
        model=model, max_tokens=100, messages=[{"role": "user", "content": text}]
    )


def test_a_new_catalog_field_input_type_and_schema_key_are_one_record(
    service: FakeKiro, served: Served
) -> None:
    service.set_drifts(Drift.CATALOG_FIELD)
    with served.claude() as claude:
        answer = ask(claude, "claude-sonnet-5-5", "Hello there.")
        assert answer.content
        listed = {model.id: model for model in claude.models.list()}
    # The catalog is used as before: its models, its 1M limit, its schema's `max_tokens` bounds
    # (the client's 100 raised to the schema's minimum).
    assert "claude-sonnet-5-5" in listed
    assert (listed["claude-sonnet-5-5"].model_extra or {})["context_window"] == 1_000_000
    sent = service.requests("chat")[-1].json
    assert sent["additionalModelRequestFields"] == {"max_tokens": 1024}
    [record] = served.drift()
    assert (record.kind, record.where, record.region) == (
        "catalog_field",
        "ListAvailableModels",
        "us-east-1",
    )
    assert facts(record) == {
        "model": "claude-sonnet-5.5",
        "models": "1",
        "fields": "lifecycleStatus:string",
        "input_types": "VIDEO",
        "schema_keys": "context_management:object",
    }


def test_a_new_usage_field_is_one_record_and_the_credits_are_read(
    service: FakeKiro, served: Served
) -> None:
    # An explicit probe joins one under way rather than repeat it, and kirod probes a new
    # account on its own: a probe that began before the usage changed may answer the first ask,
    # never the second.
    served.proc.client.probe_account(served.account_id)
    service.set_drifts(Drift.USAGE_FIELD)
    service.set_usage(served.fake_account_id, current=250.5)
    account = served.proc.client.probe_account(served.account_id)
    if account.usage is not None and account.usage.remaining != 749.5:
        account = served.proc.client.probe_account(served.account_id)
    assert account.usage is not None
    assert account.usage.remaining == 749.5
    [record] = served.drift()
    assert (record.kind, record.where) == ("usage_field", "getUsageLimits")
    assert facts(record) == {
        "count": "1",
        "fields": "usageBreakdownList.*.overageChargesWithPrecision:number",
    }


def test_a_window_grown_past_the_listing_is_one_record_and_followed(
    service: FakeKiro, served: Served
) -> None:
    service.set_drifts(Drift.WINDOW)
    with served.claude() as claude:
        for n in range(STREAK):
            ask(claude, "claude-sonnet-4-5", f"Question {n}. {FILLER}")
        # The answer after the streak reports the input by the real window: the fake's own count.
        reported = ask(claude, "claude-sonnet-4-5", f"Once more. {FILLER}").usage.input_tokens
    [row] = [m for m in served.proc.client.models().models if m.kiro_id == "claude-sonnet-4.5"]
    assert [(w.account, w.window) for w in row.learned] == [(served.account_id, 1_000_000)]
    assert reported > 10_000
    [record] = served.drift()
    assert (record.kind, record.where) == ("window", "generateAssistantResponse")
    assert facts(record) == {
        "model": "claude-sonnet-4.5",
        "listed": "200000",
        "learned": "1000000",
    }


def test_todays_kiro_leaves_no_record(service: FakeKiro, served: Served) -> None:
    with served.claude() as claude:
        # GPT-5.6 measures against 1M on this account: learned, and known (no drift).
        for n in range(STREAK):
            ask(claude, "gpt-5.6-sol", f"Question {n}. {FILLER}")
    served.proc.client.probe_account(served.account_id)
    [row] = [m for m in served.proc.client.models().models if m.kiro_id == "gpt-5.6-sol"]
    assert [w.window for w in row.learned] == [1_000_000]
    assert served.drift() == []
