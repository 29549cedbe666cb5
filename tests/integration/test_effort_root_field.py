"""Claude's effort where Kiro reads it, end to end (docs/KIRO-PROTOCOL.md §2.6): the official SDKs
ask the real daemon for an effort as Claude Code, Codex and Chat clients do; kirod sends it in the
root `additionalModelRequestFields`, shaped by the model's catalog schema (clamped into it, never a
key or value it lacks), and the fake's credits show which effort it honoured. A refusal of the root
field falls back once, without it, and the (account, model) keeps going without it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import (
    DEFAULT_MODELS,
    FakeKiro,
    Reply,
    ThreadedFake,
)
from kirod.testing.fake_kiro.catalog import OPUS_55_REQUEST_FIELDS
from tests.support.kiro_env import import_account, start_daemon

OPUS_55 = "claude-opus-5-5"
SONNET_46 = "claude-sonnet-4-6"
ADAPTIVE = {"type": "adaptive"}


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake(FakeKiro()) as server:
        yield server


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """One account, with Chat Completions served."""
    proc = start_daemon(module_tmp, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"})
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def fields_sent(service: FakeKiro) -> list[dict[str, Any] | None]:
    """Each chat's root `additionalModelRequestFields` (None: none), in order."""
    return [r.json.get("additionalModelRequestFields") for r in service.requests("chat")]


def credits_of(daemon: DaemonProcess, request_id: str) -> float:
    credits = daemon.client.trace(request_id).requests[0].credits
    assert credits is not None
    return credits


def ask_claude(claude: anthropic.Anthropic, effort: str, **extra: Any) -> tuple[str, Any]:
    raw = claude.messages.with_raw_response.create(
        model=OPUS_55,
        max_tokens=4_096,
        thinking={"type": "adaptive"},
        output_config={"effort": effort},  # type: ignore[typeddict-item]
        messages=[{"role": "user", "content": "Plan the refactor."}],
        **extra,
    )
    return raw.headers["request-id"], raw.parse()


def test_claude_codes_effort_reaches_kiro_in_the_root_field(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """Low effort reaches Kiro: the fake charges a low-effort answer a third of a max-effort one
    (its credits follow the root effort it honoured; `userInputMessage.reasoning` moves nothing)."""
    spent = {}
    for effort in ("low", "max"):
        service.enqueue(Reply(thinking="First the imports.", text="Here is the plan."))
        request_id, message = ask_claude(claude, effort)
        assert [block.type for block in message.content] == ["thinking", "text"]
        spent[effort] = credits_of(daemon, request_id)
    assert fields_sent(service) == [
        {"output_config": {"effort": "low"}, "thinking": ADAPTIVE, "max_tokens": 4_096},
        {"output_config": {"effort": "max"}, "thinking": ADAPTIVE, "max_tokens": 4_096},
    ]
    for chat in service.requests("chat"):
        assert (
            "reasoning" not in chat.json["conversationState"]["currentMessage"]["userInputMessage"]
        )
        assert "<thinking_mode>" not in chat.body.decode()  # never tags on top
    assert spent["max"] == pytest.approx(3 * spent["low"])


@pytest.mark.parametrize(
    ("budget", "effort"), [(2_000, "low"), (10_000, "medium"), (30_000, "high"), (60_000, "max")]
)
def test_a_thinking_budget_is_sent_as_its_effort_band(
    claude: anthropic.Anthropic, service: FakeKiro, budget: int, effort: str
) -> None:
    service.enqueue(Reply(thinking="Counting.", text="Done."))
    claude.messages.create(
        model=OPUS_55,
        max_tokens=64_000,
        thinking={"type": "enabled", "budget_tokens": budget},
        messages=[{"role": "user", "content": "Think it through."}],
        timeout=30,  # the SDK wants streaming for a long answer unless a timeout is set
    )
    [fields] = fields_sent(service)
    assert fields == {
        "output_config": {"effort": effort},
        "thinking": ADAPTIVE,
        "max_tokens": 64_000,
    }


def test_adaptive_thinking_without_an_effort_gets_the_models_default(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """Kiro's own agent sends the schema's default effort (medium on Opus 5.5) when none is set."""
    service.enqueue(Reply(text="Done."))
    claude.messages.create(
        model=OPUS_55,
        max_tokens=2_000,
        thinking={"type": "adaptive"},
        messages=[{"role": "user", "content": "hi"}],
    )
    assert fields_sent(service) == [
        {"output_config": {"effort": "medium"}, "thinking": ADAPTIVE, "max_tokens": 2_000}
    ]


def test_responses_reasoning_effort_goes_to_claudes_root_field(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(thinking="Hmm.", text="Done."))
    response = gpt.responses.create(
        model=OPUS_55, input="think", reasoning={"effort": "low"}, max_output_tokens=3_000
    )
    assert response.output_text == "Done."
    assert fields_sent(service) == [
        {"output_config": {"effort": "low"}, "thinking": ADAPTIVE, "max_tokens": 3_000}
    ]


def test_chat_reasoning_effort_goes_to_claudes_root_field(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Done."))
    completion = gpt.chat.completions.create(
        model=OPUS_55,
        messages=[{"role": "user", "content": "think"}],
        reasoning_effort="high",
    )
    assert completion.choices[0].message.content == "Done."
    [fields] = fields_sent(service)
    assert fields is not None
    assert (fields["output_config"], fields["thinking"]) == ({"effort": "high"}, ADAPTIVE)


def test_an_effort_the_model_does_not_list_is_clamped_and_logged(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """Sonnet 4.6's schema lists no `xhigh`: Kiro would refuse it, so the nearest lower level goes,
    and the request's log line names the clamp."""
    before = daemon.log().count("xhigh>high")
    service.enqueue(Reply(text="Done."))
    claude.messages.create(
        model=SONNET_46,
        max_tokens=1_500,
        thinking={"type": "adaptive"},
        output_config={"effort": "xhigh"},  # type: ignore[typeddict-item]
        messages=[{"role": "user", "content": "hi"}],
    )
    [fields] = fields_sent(service)
    assert fields is not None
    assert fields["output_config"] == {"effort": "high"}
    assert not [r for r in service.requests("chat") if r.rejected_by]
    assert daemon.log().count("xhigh>high") == before + 1


@pytest.mark.parametrize(("asked", "sent"), [(500, 1_024), (200_000, 128_000)])
def test_max_tokens_is_clamped_into_the_schemas_range(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro, asked: int, sent: int
) -> None:
    service.enqueue(Reply(text="Done."))
    message = claude.messages.create(
        model=OPUS_55, max_tokens=asked, messages=[{"role": "user", "content": "hi"}], timeout=30
    )
    assert message.stop_reason == "end_turn"
    assert fields_sent(service) == [{"max_tokens": sent}]
    assert f"{asked}>{sent}" in daemon.log()


# -- the fallback ---------------------------------------------------------------------------------


def chat_outcomes(service: FakeKiro) -> list[tuple[str | None, bool]]:
    """Each chat's account and whether it carried root fields."""
    return [
        (r.account_id, "additionalModelRequestFields" in r.json) for r in service.requests("chat")
    ]


def ask_opus(proc: DaemonProcess, text: str) -> tuple[str, anthropic.types.Message]:
    with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as c:
        raw = c.messages.with_raw_response.create(
            model=OPUS_55,
            max_tokens=2_000,
            thinking={"type": "adaptive"},
            output_config={"effort": "low"},  # type: ignore[typeddict-item]
            messages=[{"role": "user", "content": text}],
        )
    return raw.headers["request-id"], raw.parse()


def test_an_account_refusing_the_root_field_falls_back_once_and_remembers(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    """An external-IdP account refuses root fields with a bare REQUEST_BODY_INVALID: the request
    goes again without them (its effort by prompt tags), the account is not held to blame, and
    its later requests for the model skip the root field."""
    service = fake.fake
    service.clear_scripts()
    proc = start_daemon(short_tmp, fake)
    try:
        tokens = service.issue_social_account()
        account = import_account(proc, tokens)["id"]
        service.refuse_request_fields(tokens.account_id)
        service.clear_requests()
        service.enqueue(Reply(thinking="Tagged thoughts.", text="First."))
        request_id, message = ask_opus(proc, "one")
        assert message.content[-1].text == "First."  # type: ignore[union-attr]
        assert chat_outcomes(service) == [(tokens.account_id, True), (tokens.account_id, False)]
        retried = service.requests("chat")[-1].body.decode()
        assert "<thinking_effort>low</thinking_effort>" in retried
        attempts = daemon_attempts(proc, request_id)
        assert [(a.outcome, a.upstream_status, a.failover_reason) for a in attempts] == [
            ("bad_request", 400, None),
            ("ok", None, "retried after bad_request"),
        ]

        service.clear_requests()
        service.enqueue(Reply(text="Second."))
        ask_opus(proc, "two")
        assert chat_outcomes(service) == [(tokens.account_id, False)]
        [row] = [
            a for a in proc.client.request("GET", "/accounts")["accounts"] if a["id"] == account
        ]
        assert row["status"] == "active"
        assert proc.log().count("request_fields_refused") == 1
        assert proc.log().count("request_fields_fallback") == 1
    finally:
        proc.kill()


def test_a_schema_refusal_by_name_falls_back_once_and_is_remembered(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    """Kiro narrows Opus 5.5's `max_tokens` under the catalog kirod read: the refusal names the
    root field ("Invalid additionalModelRequestFields: must have a maximum value of …"), the
    request goes once more without root fields, and so do the account's later ones."""
    service = fake.fake
    service.clear_scripts()
    opus = next(m for m in DEFAULT_MODELS if m.model_id == "claude-opus-5.5")
    proc = start_daemon(short_tmp, fake)
    try:
        import_account(proc, service.issue_social_account())
        service.enqueue(Reply(text="warm."))
        ask_opus(proc, "warm")  # the catalog is read with the wide schema
        narrow = {
            **OPUS_55_REQUEST_FIELDS,
            "properties": {
                **OPUS_55_REQUEST_FIELDS["properties"],
                "max_tokens": {"type": "integer", "minimum": 1024, "maximum": 1_500},
            },
        }
        service.set_model(dataclasses.replace(opus, request_fields_schema=narrow))
        service.clear_requests()
        service.enqueue(Reply(text="Narrowed."))
        request_id, message = ask_opus(proc, "one")
        assert message.content[-1].text == "Narrowed."  # type: ignore[union-attr]
        refused, retried = service.requests("chat")
        assert refused.rejected_by == "unsupported_request_fields"
        assert refused.json["additionalModelRequestFields"]["max_tokens"] == 2_000
        assert "additionalModelRequestFields" not in retried.json
        attempts = daemon_attempts(proc, request_id)
        assert [(a.outcome, a.upstream_reason, a.failover_reason) for a in attempts] == [
            ("request_fields", "REQUEST_BODY_INVALID", None),
            ("ok", None, "retried after request_fields"),
        ]
        service.clear_requests()
        service.enqueue(Reply(text="Later."))
        ask_opus(proc, "two")
        assert [has for _, has in chat_outcomes(service)] == [False]
    finally:
        service.set_model(opus)
        proc.kill()


def test_with_two_accounts_only_the_refusing_one_goes_without(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    """Round robin over an account that refuses root fields and one that takes them: the
    refusing one is refused once, then skips them; the other's requests all carry them."""
    service = fake.fake
    service.clear_scripts()
    proc = start_daemon(short_tmp, fake, {"KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"})
    try:
        refusing, taking = service.issue_social_account(), service.issue_social_account()
        import_account(proc, refusing)
        import_account(proc, taking)
        service.refuse_request_fields(refusing.account_id)
        service.clear_requests()
        for n in range(6):
            service.enqueue(Reply(text=f"answer {n}."))
            _, message = ask_opus(proc, f"question {n}")
            assert message.content[-1].text == f"answer {n}."  # type: ignore[union-attr]
        outcomes = chat_outcomes(service)
        theirs = [has for account, has in outcomes if account == refusing.account_id]
        ours = [has for account, has in outcomes if account == taking.account_id]
        assert theirs[0] is True
        assert not any(theirs[1:])
        assert len(theirs) >= 3  # the retry and at least one later request
        assert ours
        assert all(ours)
        assert sum(1 for r in service.requests("chat") if r.status == 400) == 1
        assert proc.log().count("request_fields_refused") == 1
    finally:
        proc.kill()


def daemon_attempts(proc: DaemonProcess, request_id: str) -> list[Any]:
    deadline = time.monotonic() + 5
    while True:
        trace = proc.client.trace(request_id)
        if trace.requests or time.monotonic() > deadline:
            return list(trace.requests[0].attempts)
        time.sleep(0.05)


def test_kiroctl_models_shows_the_refusal_fallbacks(daemon: DaemonProcess) -> None:
    """docs/KIRO-PROTOCOL.md §6.2: a catalog entry's `refusalFallbackModels`, as listed."""
    deadline = time.monotonic() + 10
    while (listing := daemon.client.request("GET", "/models"))["source"] != "accounts":
        assert time.monotonic() < deadline, "the account's catalog was never read"
        time.sleep(0.05)
    rows = {row["kiro_id"]: row for row in listing["models"]}
    assert rows["claude-sonnet-5.5"]["refusal_fallback_models"] == ["claude-sonnet-5"]
    assert rows["claude-opus-5.5"]["refusal_fallback_models"] == ["claude-opus-4.8"]
    assert rows["claude-sonnet-4.6"]["refusal_fallback_models"] == []
