"""Drift on the request path, end to end (docs/RELIABILITY.md, Drift): the official `anthropic`
SDK → the real daemon → the fake Kiro answering as tomorrow's Kiro may (`FakeKiro.drifts`). For
each kind, exactly one record in `GET /drift` (the control API, as `kiroctl doctor` reads it), the
request answered as well as kirod can, and nothing in the record that identifies the user, the
account or the request. Switched off, no record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.drift import Kind
from kirod.report_types.drift import Drift as DriftReport
from kirod.report_types.drift import DriftRecord
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake, TokenSet
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.script import (
    DRIFTED_EVENT,
    DRIFTED_REASON,
    DRIFTED_STATUS,
    DRIFTED_STOP,
    DRIFTED_WAIT_S,
)
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
PROMPT = "Please summarise the quarterly plan for Zanzibar-Otter-Project."
CHAT = "generateAssistantResponse"
ADAPTIVE = {"type": "adaptive"}
OURS = (
    Kind.EVENT_TYPE,
    Kind.STOP_REASON,
    Kind.TAIL_MISSING,
    Kind.ERROR_REASON,
    Kind.HTTP_STATUS,
    Kind.SCHEMA_REFUSAL,
)


class Kiro:
    """The module's daemon, its one account and the fake it talks to."""

    def __init__(self, proc: DaemonProcess, fake: FakeKiro, tokens: TokenSet) -> None:
        self.proc = proc
        self.fake = fake
        self.tokens = tokens
        self.account = proc.client.accounts()[0]

    def drift(self, since: float, kind: Kind | None = None) -> list[DriftRecord]:
        """The records last seen from `since`, through the control API."""
        report = DriftReport.from_json(self.proc.client.request("GET", f"/drift?since={since}"))
        return [r for r in report.records if kind is None or r.kind == kind.value]

    def identifying(self, request_id: str | None) -> list[str]:
        """What no record may hold: the prompt, the tokens, the account's ids and label, the
        profile ARN and its account number, the request's ids."""
        found = [
            PROMPT,
            "Zanzibar",
            self.tokens.access_token,
            self.tokens.account_id,
            self.account.id,
            self.account.label,
            self.tokens.profile_arn,
            self.tokens.profile_arn.split(":")[4],
        ]
        if self.tokens.refresh_token:
            found.append(self.tokens.refresh_token)
        if request_id:
            found.append(request_id)
        # kirod's own id of each call it made to Kiro
        found += [chat.headers["amz-sdk-invocation-id"] for chat in self.fake.requests("chat")]
        return found


@pytest.fixture(scope="module")
def kiro(fake: ThreadedFake, module_tmp: Path) -> Iterator[Kiro]:
    proc = start_daemon(module_tmp, fake)
    tokens = fake.fake.issue_social_account()
    import_account(proc, tokens)
    try:
        yield Kiro(proc, fake.fake, tokens)
    finally:
        proc.kill()


@pytest.fixture
def today(kiro: Kiro) -> Iterator[Kiro]:
    """The fake as today's Kiro again after each test, and the account back in service."""
    kiro.fake.clear_scripts()
    kiro.fake.clear_requests()
    try:
        yield kiro
    finally:
        kiro.fake.set_drifts()
        kiro.proc.client.enable_account(kiro.account.id)


def ask(kiro: Kiro, **extra: Any) -> tuple[anthropic.types.Message, str]:
    """One Messages request; the answer and kirod's request id."""
    with anthropic.Anthropic(
        base_url=kiro.proc.base_url, api_key=kiro.proc.api_key, max_retries=0
    ) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": PROMPT}],
            **extra,
        )
        return raw.parse(), raw.headers["x-request-id"]


def refused(kiro: Kiro) -> anthropic.APIStatusError:
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(kiro)
    return caught.value


def only_record(kiro: Kiro, since: float, kind: Kind, request_id: str | None) -> DriftRecord:
    """Exactly one record of `kind` from `since`, met by the chat in the account's region, and
    nothing in it that identifies anyone; no other kind of this module came with it."""
    [record] = kiro.drift(since, kind)
    assert (record.where, record.region) == (CHAT, kiro.tokens.region)
    assert [r.kind for r in kiro.drift(since) if r.kind in OURS] == [kind.value]
    as_stored = json.dumps(record.__dict__)
    for secret in kiro.identifying(request_id):
        assert secret not in as_stored
    return record


def test_a_new_event_type_is_recorded_and_the_answer_served(today: Kiro) -> None:
    since = time.time()
    today.fake.set_drifts(Drift.EVENT_TYPE)
    message, request_id = ask(today)
    assert message.stop_reason == "end_turn"
    assert PROMPT[:40] in message.content[0].text  # the fake's echo, whole
    record = only_record(today, since, Kind.EVENT_TYPE, request_id)
    assert dict(record.facts) == {"event_type": DRIFTED_EVENT, "keys": "blockCount,turnId"}
    assert record.count == 1


def test_a_new_stop_reason_is_recorded_and_the_answer_ends_as_inferred(today: Kiro) -> None:
    since = time.time()
    today.fake.set_drifts(Drift.STOP_REASON)
    message, request_id = ask(today)
    assert message.stop_reason == "end_turn"
    record = only_record(today, since, Kind.STOP_REASON, request_id)
    assert dict(record.facts) == {"stop_reason": DRIFTED_STOP, "type": "string"}
    assert record.count == 1


def test_an_answer_without_its_tail_is_recorded_and_ends_at_max_tokens(today: Kiro) -> None:
    """Never taken for finished: the client continues (docs/KIRO-PROTOCOL.md §3.4)."""
    since = time.time()
    today.fake.set_drifts(Drift.TAIL_MISSING)
    message, request_id = ask(today)
    assert message.stop_reason == "max_tokens"
    assert PROMPT[:40] in message.content[0].text
    assert len(today.fake.requests("chat")) == 1  # the answer, not tried again
    record = only_record(today, since, Kind.TAIL_MISSING, request_id)
    assert dict(record.facts) == {"blocks": "1", "tool_calls": "0"}
    assert record.count == 1


def test_a_new_error_reason_is_recorded_and_served_as_a_throttle(today: Kiro) -> None:
    since = time.time()
    today.fake.set_drifts(Drift.ERROR_REASON)
    error = refused(today)
    assert error.status_code == 429  # the account rests for Kiro's wait, told to the client
    assert DRIFTED_WAIT_S - 2 <= int(error.response.headers["retry-after"]) <= DRIFTED_WAIT_S
    record = only_record(today, since, Kind.ERROR_REASON, error.response.headers["x-request-id"])
    assert dict(record.facts) == {
        "reason": DRIFTED_REASON,
        "status": "429",
        "type": "ThrottlingException",
    }
    assert record.count == len(today.fake.requests("chat")) == 1


def test_a_status_no_endpoint_sent_is_recorded_and_served_as_kiro_s_failure(
    today: Kiro,
) -> None:
    since = time.time()
    today.fake.set_drifts(Drift.HTTP_STATUS)
    error = refused(today)
    assert error.status_code >= 500  # Kiro's failure, in the Messages envelope
    assert error.body is not None
    assert error.body["type"] == "error"  # type: ignore[index]
    record = only_record(today, since, Kind.HTTP_STATUS, error.response.headers["x-request-id"])
    assert dict(record.facts) == {"status": str(DRIFTED_STATUS), "type": "ValidationException"}
    assert record.count == len(today.fake.requests("chat"))


def test_with_two_accounts_a_new_status_fails_over_and_is_one_record(
    today: Kiro, fake: ThreadedFake, tmp_path: Path
) -> None:
    """Both accounts meet the same drift: one shape, counted once per call Kiro answered."""
    proc = start_daemon(tmp_path, fake)
    try:
        for _ in range(2):
            import_account(proc, fake.fake.issue_social_account())
        pair = Kiro(proc, today.fake, today.tokens)
        since = time.time()
        today.fake.set_drifts(Drift.HTTP_STATUS)
        error = refused(pair)
        assert error.status_code >= 500
        chats = today.fake.requests("chat")
        assert len({chat.account_id for chat in chats}) == 2  # failed over
        [record] = pair.drift(since, Kind.HTTP_STATUS)
        assert record.count == len(chats)
    finally:
        proc.kill()


def test_a_refused_request_field_is_recorded_and_the_request_sent_without_it(
    today: Kiro,
) -> None:
    """Kiro names the key it refused; the record names it by where kirod put it."""
    since = time.time()
    today.fake.set_drifts(Drift.SCHEMA_REFUSAL)
    message, request_id = ask(today, thinking=ADAPTIVE, output_config={"effort": "high"})
    assert message.stop_reason == "end_turn"  # served once more without the root fields
    sent = [chat.json.get("additionalModelRequestFields") for chat in today.fake.requests("chat")]
    assert sent == [
        {"output_config": {"effort": "high"}, "thinking": ADAPTIVE, "max_tokens": 1024},
        None,
    ]
    record = only_record(today, since, Kind.SCHEMA_REFUSAL, request_id)
    assert dict(record.facts) == {
        "field": "output_config.effort",
        "sent": "max_tokens,output_config.effort,thinking.type",
    }
    assert record.count == 1


def test_today_s_kiro_leaves_no_record(today: Kiro) -> None:
    since = time.time()
    message, _ = ask(today)
    assert message.stop_reason == "end_turn"
    ask(today, thinking=ADAPTIVE, output_config={"effort": "high"})  # root fields, taken
    assert [r for r in today.drift(since) if r.kind in OURS] == []
