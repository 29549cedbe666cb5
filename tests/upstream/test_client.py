"""KiroClient, refresh, login and the token keeper against the fake Kiro service on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kirod.accounts.account import to_upstream
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.assemble import assemble
from kirod.canonical.catalog import catalog_from_list_available_models
from kirod.credentials import device_login as login
from kirod.credentials import refresh as auth
from kirod.drift import Drift, Kind
from kirod.storage.accounts import AccountStore
from kirod.storage.db import Database
from kirod.tasks import TaskOwner
from kirod.testing.fake_kiro import (
    DeviceFlow,
    DeviceOutcome,
    FakeKiro,
    Fault,
    Reply,
    Script,
    TokenSet,
    ToolCall,
    running_fake,
)
from kirod.upstream.client import (
    ClientOptions,
    Endpoints,
    KiroClient,
    UpstreamAccount,
    classify,
)
from kirod.upstream.errors import (
    Failure,
    LoginError,
    RefreshError,
    UpstreamError,
    UpstreamHttpError,
)
from kirod.upstream.secrets import AuthKind, Credentials
from kirod.upstream.translate import translate_all
from kirod.upstream.usage import parse_usage_limits


def endpoints(base: str) -> Endpoints:
    return Endpoints(kiro=base, auth=base, oidc=base)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeKiro, str]]:
    async with running_fake() as (service, base_url):
        yield service, base_url


@pytest.fixture
async def client(fake: tuple[FakeKiro, str]) -> AsyncIterator[KiroClient]:
    async with KiroClient(endpoints(fake[1]), ClientOptions(idle_timeout_s=1.0)) as kiro:
        yield kiro


def account_from(tokens: TokenSet, kind: AuthKind = AuthKind.SOCIAL) -> UpstreamAccount:
    return UpstreamAccount(
        id=tokens.account_id,
        region=tokens.region,
        auth_region=tokens.region,
        auth_kind=kind,
        profile_arn=tokens.profile_arn,
        credentials=Credentials(
            access_token=tokens.access_token,
            refresh_token=tokens.refresh_token,
            expires_at=tokens.expires_at,
            client_id=tokens.client_id,
            client_secret=tokens.client_secret,
        ),
    )


def chat_body(text: str, tokens: TokenSet, model: str = "claude-sonnet-4.5") -> dict[str, object]:
    body: dict[str, object] = {
        "conversationState": {
            "conversationId": "3f1c1f55-3fd0-4c7d-9d36-2b4a6bd0c9a1",
            "chatTriggerType": "MANUAL",
            "currentMessage": {
                "userInputMessage": {"content": text, "modelId": model, "origin": "AI_EDITOR"}
            },
        }
    }
    if tokens.profile_arn:
        body["profileArn"] = tokens.profile_arn
    return body


async def collect(client: KiroClient, account: UpstreamAccount, body: dict[str, object]) -> list:
    async with client.chat(account, body) as chunks:
        return [frame async for frames in chunks for frame in frames]


async def test_chat_stream_decodes_to_the_scripted_reply(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    service.enqueue(
        Reply(text="Hello there, world!", tool_calls=(ToolCall("get_weather", {"city": "Paris"}),))
    )
    frames = await collect(client, account_from(tokens), chat_body("hi", tokens))
    completion = assemble(
        translate_all(
            frames,
            message_id="m1",
            model="claude-sonnet-4-5",
            context_window=200_000,
            input_tokens_estimate=10,
        )
    )
    assert completion.content[0].text == "Hello there, world!"  # type: ignore[union-attr]
    assert completion.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    recorded = service.requests("chat")[-1]
    assert recorded.headers["authorization"] == f"Bearer {tokens.access_token}"
    assert recorded.headers["x-amzn-codewhisperer-optout"] == "true"


@pytest.mark.parametrize(
    ("fault", "failure", "retry_after"),
    [
        (Fault.QUOTA_402, Failure.QUOTA, None),
        (Fault.OVERAGE_400, Failure.QUOTA, None),
        (Fault.THROTTLE_429, Failure.THROTTLED, 2.0),
        (Fault.SUSPICIOUS_429, Failure.SUSPICIOUS, 2.0),
        (Fault.THROTTLE_429_NO_RETRY_AFTER, Failure.THROTTLED, None),
        (Fault.THROTTLE_429_RETRY_AFTER_HEADER, Failure.THROTTLED, 2.0),
        (Fault.CONVERSATION_LIMIT_402, Failure.CONTEXT_TOO_LONG, None),
        (Fault.CAPACITY_429, Failure.CAPACITY, None),
        (Fault.SUSPENDED_403, Failure.SUSPENDED, None),
        (Fault.BEARER_INVALID_403, Failure.BEARER, None),
        (Fault.SERVER_500, Failure.CAPACITY, None),
        (Fault.INTERNAL_500, Failure.SERVER, None),
    ],
)
async def test_error_statuses_are_classified(
    fake: tuple[FakeKiro, str],
    client: KiroClient,
    fault: Fault,
    failure: Failure,
    retry_after: float | None,
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    service.enqueue(Script(fault=fault))
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account_from(tokens), chat_body("hi", tokens))
    assert error.value.failure is failure
    if retry_after is None:
        assert error.value.retry_after_s is None
    else:
        assert error.value.retry_after_s == retry_after
    api = error.value.to_api_error()
    assert tokens.access_token not in api.message
    assert api.status != 401  # never the client's key


def body(document: dict[str, object]) -> bytes:
    return json.dumps(document).encode()


SUSPICIOUS = (
    "Due to suspicious activity, we are imposing temporary limits on how frequently your account "
    "(d-9067c98495.1) can send a request to Kiro while we investigate."
)
LOCKED = (
    "Your User ID (d-1) temporarily is suspended. We detected unusual user activity and locked it "
    "as a security precaution."
)


@pytest.mark.parametrize(
    ("status", "document", "failure"),
    [
        (429, {"message": SUSPICIOUS, "reason": None}, Failure.SUSPICIOUS),
        (429, {"message": SUSPICIOUS.upper()}, Failure.SUSPICIOUS),
        (429, {"error": {"message": SUSPICIOUS}}, Failure.SUSPICIOUS),
        (
            429,
            {"message": "Too many requests, please wait before trying again."},
            Failure.THROTTLED,
        ),
        (403, {"message": f"Suspended after {SUSPICIOUS}"}, Failure.SUSPENDED),  # not a 429
        (500, {"message": SUSPICIOUS}, Failure.SERVER),
        (
            400,
            {
                "message": "You have reached the limit for overages.",
                "reason": "OVERAGE_REQUEST_LIMIT_EXCEEDED",
            },
            Failure.QUOTA,
        ),
        (402, {"reason": "OVERAGE_REQUEST_LIMIT_EXCEEDED"}, Failure.QUOTA),
        (429, {"error": {"reason": "OVERAGE_REQUEST_LIMIT_EXCEEDED"}}, Failure.QUOTA),
        (400, {"message": "Improperly formed request.", "reason": None}, Failure.BAD_REQUEST),
        (403, {"message": "Your account has been suspended."}, Failure.SUSPENDED),
        (
            403,
            {"message": "We've locked your account as a security precaution."},
            Failure.SUSPENDED,
        ),
        (403, {"message": LOCKED, "reason": None}, Failure.SUSPENDED),
        (403, {"message": "User is not authorized to make this call."}, Failure.FORBIDDEN),
    ],
)
def test_error_bodies_are_classified(
    status: int, document: dict[str, object], failure: Failure
) -> None:
    assert classify(status, {}, body(document)).failure is failure


def throttle(reason: str, wait_ms: object = 300000) -> bytes:
    """A ThrottlingException as today's Kiro sends it (docs/KIRO-PROTOCOL.md §4.2)."""
    return body(
        {
            "__type": "com.amazon.kiro.runtimeservice#ThrottlingException",
            "message": "Too many requests, please wait before trying again.",
            "reason": reason,
            "retryAfterMilliseconds": wait_ms,
        }
    )


@pytest.mark.parametrize(
    ("status", "reason", "failure"),
    [
        (429, "CREDIT_CONSUMPTION_RATE_EXCEEDED", Failure.THROTTLED),
        (429, "USER_REQUEST_RATE_EXCEEDED", Failure.PENALTY),
        (429, "DAILY_REQUEST_COUNT", Failure.DAILY_LIMIT),
        (429, "SERVICE_REQUEST_RATE_EXCEEDED", Failure.SERVICE_THROTTLED),
        (429, "INSUFFICIENT_MODEL_CAPACITY", Failure.CAPACITY),
        (429, "MONTHLY_REQUEST_COUNT", Failure.QUOTA),
        (402, "MONTHLY_REQUEST_COUNT", Failure.QUOTA),
        (402, "OVERAGE_REQUEST_LIMIT_EXCEEDED", Failure.QUOTA),
        (402, "CONVERSATION_LIMIT_EXCEEDED", Failure.CONTEXT_TOO_LONG),
        (429, "A_REASON_KIRO_ADDS_LATER", Failure.THROTTLED),
        (402, "ANOTHER_NEW_QUOTA", Failure.QUOTA),
    ],
)
def test_each_throttle_reason_has_its_class(status: int, reason: str, failure: Failure) -> None:
    assert classify(status, {}, throttle(reason)).failure is failure


def test_the_wait_is_read_from_the_body() -> None:
    error = classify(429, {}, throttle("CREDIT_CONSUMPTION_RATE_EXCEEDED"))
    assert error.retry_after_s == 300.0
    assert error.reason == "CREDIT_CONSUMPTION_RATE_EXCEEDED"
    assert error.to_api_error().headers == {"Retry-After": "300"}


@pytest.mark.parametrize(
    ("header", "wait_ms", "seen"),
    [
        (None, 1500, 1.5),
        ("7", None, 7.0),
        ("7", 120000, 120.0),  # both: the longer, as a retry inside a penalty prolongs it
        ("300", 2000, 300.0),
        (None, -5, None),
        (None, "300000", None),  # not a number: no wait
        (None, True, None),
    ],
)
def test_body_and_header_waits(header: str | None, wait_ms: object, seen: float | None) -> None:
    headers = {"Retry-After": header} if header is not None else {}
    error = classify(429, headers, throttle("USER_REQUEST_RATE_EXCEEDED", wait_ms))
    assert error.retry_after_s == seen


def observed(recorder: Drift) -> list[tuple[Kind, str, dict[str, str], str | None]]:
    return [(r.kind, r.where, dict(r.shape), r.region) for r in recorder.pending()]


def test_an_unknown_reason_is_served_as_before_and_is_drift() -> None:
    recorder = Drift()
    seen = {"drift": recorder, "where": "generateAssistantResponse", "region": "us-east-1"}
    error = classify(429, {}, throttle("BRAND_NEW_LIMIT"), **seen)
    classify(429, {}, throttle("free text: with a secret-ish word"), **seen)
    classify(402, {}, throttle("ANOTHER_NEW_QUOTA"), **seen)
    assert error.failure is Failure.THROTTLED
    assert error.retry_after_s == 300.0
    where = "generateAssistantResponse"
    throttling = {"status": "429", "type": "ThrottlingException"}
    assert observed(recorder) == [
        (Kind.ERROR_REASON, where, {**throttling, "reason": "BRAND_NEW_LIMIT"}, "us-east-1"),
        (Kind.ERROR_REASON, where, {**throttling, "reason": "<33 chars>"}, "us-east-1"),
        (
            Kind.ERROR_REASON,
            where,
            {"status": "402", "type": "ThrottlingException", "reason": "ANOTHER_NEW_QUOTA"},
            "us-east-1",
        ),
    ]


@pytest.mark.parametrize(
    ("status", "document", "headers"),
    [
        (429, {"reason": "CREDIT_CONSUMPTION_RATE_EXCEEDED"}, {}),
        (400, {"message": "Improperly formed request.", "reason": "REQUEST_BODY_INVALID"}, {}),
        (400, {"message": "Input is too long.", "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD"}, {}),
        (403, {"message": "User is not authorized to make this call."}, {}),
        (
            500,
            {"reason": "MODEL_TEMPORARILY_UNAVAILABLE"},
            {"x-amzn-errortype": "InternalServerException"},
        ),
        (402, {"__type": "x#ServiceQuotaExceededException", "reason": "MONTHLY_REQUEST_COUNT"}, {}),
        (503, {}, {"x-amzn-errortype": "ServiceUnavailableException:http://internal"}),
    ],
)
def test_known_errors_are_not_drift(
    status: int, document: dict[str, object], headers: dict[str, str]
) -> None:
    recorder = Drift()
    classify(status, headers, body(document), drift=recorder, where="getUsageLimits")
    assert recorder.pending() == []


@pytest.mark.parametrize(
    ("status", "document", "headers", "kind", "facts"),
    [
        # A status no Kiro endpoint was seen to send: a server error, as before.
        (418, {"message": "I'm a teapot"}, {}, Kind.HTTP_STATUS, {"status": "418"}),
        # A reason of another status, a type the service model lacks.
        (
            403,
            {"reason": "INVALID_MODEL_ID"},
            {},
            Kind.ERROR_REASON,
            {"status": "403", "reason": "INVALID_MODEL_ID"},
        ),
        (
            400,
            {"__type": "com.amazon.kiro#BrandNewException"},
            {},
            Kind.ERROR_REASON,
            {"status": "400", "type": "BrandNewException"},
        ),
        (
            500,
            {},
            {"x-amzn-errortype": "NewFailure:http://internal"},
            Kind.ERROR_REASON,
            {"status": "500", "type": "NewFailure"},
        ),
    ],
)
def test_unknown_statuses_and_types_are_drift(
    status: int,
    document: dict[str, object],
    headers: dict[str, str],
    kind: Kind,
    facts: dict[str, str],
) -> None:
    recorder = Drift()
    before = classify(status, headers, body(document)).failure
    assert classify(status, headers, body(document), drift=recorder, where="mcp").failure is before
    assert observed(recorder) == [(kind, "mcp", facts, None)]


def test_a_refused_request_field_is_drift_by_its_key_path() -> None:
    """The field by where kirod put it, never Kiro's message (docs/KIRO-PROTOCOL.md §2.6)."""
    recorder = Drift()
    sent = {
        "additionalModelRequestFields": {"output_config": {"effort": "high"}, "max_tokens": 4096},
        "conversationState": {"currentMessage": "a prompt never recorded"},
    }
    message = (
        "Invalid additionalModelRequestFields: property 'effort' is not defined in the schema and "
        "the schema does not allow additional properties"
    )
    refusal = body({"message": message, "reason": "REQUEST_BODY_INVALID"})
    error = classify(
        400, {}, refusal, drift=recorder, where="generateAssistantResponse", sent=body(sent)
    )
    assert error.failure is Failure.REQUEST_FIELDS
    fields = {"sent": "max_tokens,output_config.effort"}
    assert observed(recorder) == [
        (
            Kind.SCHEMA_REFUSAL,
            "generateAssistantResponse",
            {"field": "output_config.effort", **fields},
            None,
        )
    ]
    assert "never recorded" not in repr(recorder.pending())
    assert "schema does not allow" not in repr(recorder.pending())


def test_a_full_conversation_reads_as_the_context_error() -> None:
    error = classify(402, {}, throttle("CONVERSATION_LIMIT_EXCEEDED", None))
    api = error.to_api_error()
    assert (api.status, api.code) == (400, "context_length_exceeded")
    assert api.message.startswith("prompt is too long")
    assert not error.failure.retryable


@pytest.mark.parametrize(
    ("document", "failure"),
    [
        (
            {"message": "Invalid `signature` in `thinking` block", "reason": None},
            Failure.SIGNATURE,
        ),
        (
            {"message": "Improperly formed request.", "reason": "THINKING_SIGNATURE_INVALID"},
            Failure.SIGNATURE,
        ),
        (
            {
                "message": "Invalid additionalModelRequestFields: must have a maximum value of "
                "128000.0",
                "reason": "REQUEST_BODY_INVALID",
            },
            Failure.REQUEST_FIELDS,
        ),
        (
            {"message": "Invalid tool use format.", "reason": "REQUEST_BODY_INVALID"},
            Failure.BAD_REQUEST,
        ),
    ],
)
def test_refusals_kirod_reshapes_are_told_apart(
    document: dict[str, object], failure: Failure
) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: a refused signature (with or without its reason) and a refused
    root field each have their own retry; neither is the account's fault."""
    error = classify(400, {}, body(document))
    assert error.failure is failure
    assert not error.failure.retryable
    assert error.to_api_error().status == 400


def test_a_flagged_account_reads_as_resting_not_as_a_retry_after() -> None:
    error = classify(429, {"Retry-After": "2"}, body({"message": SUSPICIOUS, "reason": None}))
    api = error.to_api_error()
    assert (api.status, api.code) == (429, "account_flagged")
    assert "Retry-After" not in api.headers  # the rest is the pool's to tell, not Kiro's seconds
    assert "suspicious activity" in api.message
    assert "d-9067c98495" not in api.message  # Kiro's words, with the user id, stay out
    assert error.detail == "HTTP 429"


async def test_rejections_are_classified(fake: tuple[FakeKiro, str], client: KiroClient) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    account = account_from(tokens)
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account, chat_body("hi", tokens, model="claude-nonexistent-9"))
    assert error.value.failure is Failure.INVALID_MODEL
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account, chat_body("word " * 300_000, tokens))
    assert error.value.failure in (Failure.CONTEXT_TOO_LONG, Failure.BAD_REQUEST)
    body = chat_body("hi", tokens)
    body["conversationState"]["chatTriggerType"] = "AUTO"  # type: ignore[index]
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account, body)
    assert error.value.failure is Failure.BAD_REQUEST
    no_profile = chat_body("hi", tokens)
    del no_profile["profileArn"]
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, dataclasses.replace(account, profile_arn=None), no_profile)
    assert error.value.failure is Failure.PROFILE_REQUIRED
    expired = service.issue_social_account()
    service.expire_access_token(expired.access_token)
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account_from(expired), chat_body("hi", expired))
    assert error.value.failure is Failure.BEARER


async def test_a_tool_schema_kiro_refuses_is_a_bad_request(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    """docs/KIRO-PROTOCOL.md §4.2: a top-level union is `400 TOOL_SCHEMA_INVALID`, the payload's
    fault: never retried, and told to the client with Kiro's reason."""
    service, _ = fake
    tokens = service.issue_social_account()
    body = chat_body("hi", tokens)
    union = {"anyOf": [{"type": "object", "properties": {}}]}
    spec = {"name": "t", "description": "d", "inputSchema": {"json": union}}
    message: Any = body["conversationState"]
    message["currentMessage"]["userInputMessage"]["userInputMessageContext"] = {
        "tools": [{"toolSpecification": spec}]
    }
    with pytest.raises(UpstreamHttpError) as error:
        await collect(client, account_from(tokens), body)
    assert (error.value.status, error.value.reason) == (400, "TOOL_SCHEMA_INVALID")
    assert error.value.failure is Failure.BAD_REQUEST
    assert not error.value.failure.retryable
    api = error.value.to_api_error()
    assert (api.status, api.code) == (400, "upstream_rejected_request")
    assert "TOOL_SCHEMA_INVALID" in api.message


@pytest.mark.parametrize(
    ("fault", "failure"),
    [
        (Fault.CORRUPT_CRC, Failure.PROTOCOL),
        (Fault.STALL, Failure.TIMEOUT),
    ],
)
async def test_broken_streams_raise_classified_errors(
    fake: tuple[FakeKiro, str], client: KiroClient, fault: Fault, failure: Failure
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    service.enqueue(Script(fault=fault, stall_s=3.0))
    with pytest.raises(UpstreamError) as error:
        await collect(client, account_from(tokens), chat_body("hi", tokens))
    assert error.value.failure is failure


async def test_connection_cut_mid_stream(fake: tuple[FakeKiro, str], client: KiroClient) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    service.enqueue(Script(fault=Fault.CONNECTION_CUT))
    with pytest.raises(UpstreamError) as error:
        await collect(client, account_from(tokens), chat_body("hi", tokens))
    assert error.value.failure in (Failure.PROTOCOL, Failure.NETWORK)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_connection_refused_with_no_route_known_is_kiro_unreachable() -> None:
    """Nothing connects: the machine cannot reach Kiro (no account's fault); the host is down
    until a connection to it succeeds."""
    port = closed_port()
    async with KiroClient(endpoints(f"http://127.0.0.1:{port}"), ClientOptions()) as kiro:
        account = UpstreamAccount(
            id="a",
            region="us-east-1",
            auth_region="us-east-1",
            auth_kind=AuthKind.SOCIAL,
            profile_arn=None,
            credentials=Credentials(access_token="x"),
        )
        with pytest.raises(UpstreamError) as error:
            async with kiro.chat(account, {"conversationState": {}}):
                pass
        assert [outage.host for outage in kiro.outages.current()] == [f"127.0.0.1:{port}"]
    assert error.value.failure is Failure.UNREACHABLE
    assert error.value.to_api_error().message == "cannot reach Kiro"
    assert error.value.to_api_error().code == "upstream_unreachable"


async def test_a_dead_proxy_while_kiro_connects_directly_is_the_accounts_network_failure(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    direct, proxied = service.issue_social_account(), service.issue_social_account()
    await collect(client, account_from(direct), chat_body("hi", direct))
    dead = dataclasses.replace(account_from(proxied), proxy_url=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(UpstreamError) as error:
        await collect(client, dead, chat_body("hi", proxied))
    assert error.value.failure is Failure.NETWORK
    assert client.outages.current() == ()


async def test_leaving_early_aborts_the_upstream_stream(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    service.enqueue(Script(reply=Reply(text="x" * 2000), chunk_size=4, delay_between_s=0.01))
    async with client.chat(account_from(tokens), chat_body("hi", tokens)) as frames:
        async for _ in frames:
            break
    await asyncio.sleep(0.2)
    assert service.counters().get("streams_completed", 0) == 0


async def test_usage_and_models(fake: tuple[FakeKiro, str], client: KiroClient) -> None:
    service, _ = fake
    tokens = service.issue_social_account(subscription="KIRO PRO")
    account = account_from(tokens)
    snapshot = parse_usage_limits(await client.usage_limits(account))
    assert snapshot.subscription == "KIRO PRO"
    assert snapshot.remaining > 0
    assert snapshot.limit >= snapshot.remaining
    pages = await client.list_models(account)
    assert len(pages) > 1  # paged
    catalog = catalog_from_list_available_models(pages)
    assert catalog.get("claude-sonnet-4.5") is not None


async def test_the_overage_switch_goes_as_kiro_ide_sends_it(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    account = account_from(service.issue_social_account(subscription="KIRO PRO"))
    assert parse_usage_limits(await client.usage_limits(account)).overage == "disabled"
    await client.set_overage(account, True)
    snapshot = parse_usage_limits(await client.usage_limits(account))
    assert (snapshot.overage, snapshot.overage_capable) == ("enabled", True)
    [sent] = service.requests("preference")
    [probe] = service.requests("usage")[-1:]
    assert (sent.method, sent.path) == ("POST", "/setUserPreference")
    assert sent.json == {
        "overageConfiguration": {"overageStatus": "ENABLED"},
        "profileArn": account.profile_arn,
    }
    # The IDE persona of getUsageLimits: the same headers, but for the body's type.
    varying = {"amz-sdk-invocation-id", "content-length", "content-type"}
    assert {k: v for k, v in sent.headers.items() if k not in varying} == {
        k: v for k, v in probe.headers.items() if k not in varying
    }
    assert "api/codewhispererruntime#" in sent.headers["user-agent"]
    assert sent.headers["content-type"] == "application/json"
    await client.set_overage(account, False)
    assert parse_usage_limits(await client.usage_limits(account)).overage == "disabled"


async def test_a_free_plan_cannot_switch_overage_on(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    account = account_from(service.issue_social_account(subscription="KIRO FREE"))
    snapshot = parse_usage_limits(await client.usage_limits(account))
    assert (snapshot.overage, snapshot.overage_capable) == ("disabled", False)
    with pytest.raises(UpstreamHttpError) as refused:
        await client.set_overage(account, True)
    assert (refused.value.status, refused.value.failure) == (403, Failure.FORBIDDEN)
    assert account.credentials.access_token not in str(refused.value)


async def test_social_and_oidc_refresh(fake: tuple[FakeKiro, str], client: KiroClient) -> None:
    service, _ = fake
    social = service.issue_social_account()
    refreshed = await auth.refresh(client, account_from(social))
    assert refreshed.credentials.access_token != social.access_token
    assert refreshed.profile_arn == social.profile_arn
    idc = service.issue_idc_account()
    refreshed = await auth.refresh(client, account_from(idc, AuthKind.BUILDER_ID))
    assert refreshed.credentials.access_token != idc.access_token
    assert refreshed.credentials.client_secret == idc.client_secret


async def test_invalid_refresh_tokens_are_permanent(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    for tokens, kind in (
        (service.issue_social_account(), AuthKind.SOCIAL),
        (service.issue_idc_account(), AuthKind.IDC),
    ):
        assert tokens.refresh_token is not None
        service.revoke_refresh_token(tokens.refresh_token)
        with pytest.raises(RefreshError) as error:
            await auth.refresh(client, account_from(tokens, kind))
        assert error.value.permanent
        assert tokens.refresh_token not in str(error.value)


async def test_device_login_pending_slow_down_then_success(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    service.set_device_flow(DeviceFlow(pending_polls=2, slow_down_polls=1, interval_s=1))
    started = await login.start(client)
    assert started.user_code
    assert started.verification_uri_complete.startswith("http")
    assert started.auth_kind is AuthKind.BUILDER_ID
    interval = started.interval_s
    results = []
    for _ in range(6):
        results.append(await login.poll(client, started))
        if results[-1] is not None:
            break
    assert results[:3] == [None, None, None]  # pending, pending, slow_down
    credentials = results[-1]
    assert credentials is not None
    assert started.interval_s == interval + login.SLOW_DOWN_STEP_S
    assert credentials.refresh_token
    assert credentials.client_id == started.client_id
    account = UpstreamAccount(
        id="new",
        region="us-east-1",
        auth_region="us-east-1",
        auth_kind=AuthKind.BUILDER_ID,
        profile_arn=None,
        credentials=credentials,
    )
    snapshot = parse_usage_limits(await client.usage_limits(account))
    assert snapshot.remaining > 0


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (DeviceOutcome.ACCESS_DENIED, "access_denied"),
        (DeviceOutcome.EXPIRED_TOKEN, "expired_token"),
    ],
)
async def test_device_login_denied_or_expired(
    fake: tuple[FakeKiro, str], client: KiroClient, outcome: DeviceOutcome, code: str
) -> None:
    service, _ = fake
    service.set_device_flow(DeviceFlow(pending_polls=0, outcome=outcome))
    started = await login.start(client)
    with pytest.raises(LoginError) as error:
        await login.poll(client, started)
    assert error.value.code == code


async def test_refresh_is_single_flight_and_persisted(
    fake: tuple[FakeKiro, str], client: KiroClient, tmp_path: Path
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    async with Database(tmp_path / "kirod.db") as db, TaskOwner("test") as tasks:
        store = AccountStore(db)
        record = await store.insert(
            label="t",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials=Credentials(
                access_token=tokens.access_token,
                refresh_token=tokens.refresh_token,
                expires_at=1.0,  # long expired: every caller wants a refresh
            ).to_json(),
            profile_arn=tokens.profile_arn,
        )
        keeper = TokenKeeper(store, client, tasks)
        account = to_upstream(record)
        results = await asyncio.gather(*(keeper.fresh(account) for _ in range(50)))
        assert len(service.requests("social_refresh")) == 1
        assert keeper.refresh_count == 1
        assert len({result.credentials.access_token for result in results}) == 1
        stored = await store.get(record.id)
        assert stored is not None
        assert stored.credentials["access_token"] == results[0].credentials.access_token
        assert stored.generation == record.generation + 1

        # A token Kiro rejected forces one more refresh; callers holding the new one don't.
        fresh = results[0]
        again = await asyncio.gather(
            *(keeper.fresh(fresh, rejected_token=fresh.credentials.access_token) for _ in range(10))
        )
        assert len(service.requests("social_refresh")) == 2
        assert len({item.credentials.access_token for item in again}) == 1
        await keeper.fresh(fresh, rejected_token=fresh.credentials.access_token)
        assert len(service.requests("social_refresh")) == 2


async def test_permanent_refresh_failure_marks_the_account(
    fake: tuple[FakeKiro, str], client: KiroClient, tmp_path: Path
) -> None:
    service, _ = fake
    tokens = service.issue_social_account()
    assert tokens.refresh_token is not None
    service.revoke_refresh_token(tokens.refresh_token)
    async with Database(tmp_path / "kirod.db") as db, TaskOwner("test") as tasks:
        store = AccountStore(db)
        record = await store.insert(
            label="t",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials=Credentials(
                access_token=tokens.access_token, refresh_token=tokens.refresh_token, expires_at=1.0
            ).to_json(),
        )
        with pytest.raises(RefreshError):
            await TokenKeeper(store, client, tasks).fresh(to_upstream(record))
        stored = await store.get(record.id)
        assert stored is not None
        assert stored.status == "needs_login"
        assert stored.status_reason is not None
        assert tokens.refresh_token not in json.dumps(stored.redacted())


HUGE_ANSWER = 64 * 1024 * 1024


@pytest.mark.parametrize("operation", ["usage", "models", "social_refresh", "oidc_register"])
async def test_a_huge_json_answer_is_refused_without_being_read(
    fake: tuple[FakeKiro, str], client: KiroClient, operation: str
) -> None:
    service, _ = fake
    account = account_from(service.issue_social_account())
    calls = {
        "usage": lambda: client.usage_limits(account),
        "models": lambda: client.list_models(account),
        "social_refresh": lambda: auth.refresh(client, account),
        "oidc_register": lambda: login.start(client),
    }
    service.oversize(operation, HUGE_ANSWER)
    started = asyncio.get_running_loop().time()
    with pytest.raises((UpstreamError, RefreshError, LoginError)) as caught:
        await calls[operation]()
    assert "exceeds 4 MiB" in str(caught.value)
    assert asyncio.get_running_loop().time() - started < 5
    assert service.counters()[f"oversized:{operation}"] == 1
    service.oversize(operation, 0)
    await calls[operation]()  # normal answers are read as before


async def test_an_answer_just_under_the_bound_is_read(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    account = account_from(service.issue_social_account())
    service.oversize("usage", 3 * 1024 * 1024)
    snapshot = parse_usage_limits(await client.usage_limits(account))
    assert snapshot.subscription == "KIRO PRO"
