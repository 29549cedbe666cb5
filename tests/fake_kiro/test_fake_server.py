"""The fake over real HTTP on loopback: routing, bearer checks, chats, faults, usage, models."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
import warnings
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from kirod.testing.fake_kiro import (
    Bonus,
    FakeKiro,
    Fault,
    FreeTrial,
    Latency,
    Model,
    Reply,
    Script,
    TokenSet,
    ToolCall,
    running_fake,
)
from kirod.testing.listeners import LATE_TURNS
from kirod.upstream.errors import UpstreamProtocolError
from kirod.upstream.frames import Frame, FrameDecoder
from tests.fake_kiro.fake_bodies import body, user

Served = tuple[FakeKiro, str]
BEARER_INVALID = {"message": "The bearer token included in the request is invalid."}


def auth(token_set: TokenSet) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token_set.access_token}"}
    if token_set.access_token.startswith("ksk_"):
        headers["tokentype"] = "API_KEY"
    return headers


def chat_body(token_set: TokenSet, text: str = "Hello", **options: Any) -> dict[str, Any]:
    return body(user(text, **options), profile_arn=token_set.profile_arn)


async def post_chat(
    session: aiohttp.ClientSession,
    base_url: str,
    token_set: TokenSet,
    data: dict[str, Any] | None = None,
    *,
    path: str = "/generateAssistantResponse",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    data = data if data is not None else chat_body(token_set)
    merged = {**auth(token_set), **(headers or {})}
    async with session.post(base_url + path, json=data, headers=merged) as response:
        return response.status, dict(response.headers), await response.read()


def frames_of(raw: bytes) -> list[Frame]:
    decoder = FrameDecoder()
    frames = decoder.feed(raw)
    decoder.finish()
    return frames


def text_of(frames: list[Frame]) -> str:
    return "".join(f.payload["content"] for f in frames if f.event_type == "assistantResponseEvent")


async def test_full_chat_exchange(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(
        Reply(text="Let me check.", tool_calls=(ToolCall("get_weather", {"city": "Oslo"}),))
    )
    status, headers, raw = await post_chat(session, url, account)
    assert status == 200
    assert headers["Content-Type"] == "application/vnd.amazon.eventstream"
    frames = frames_of(raw)
    assert text_of(frames) == "Let me check."
    tool_frames = [f.payload for f in frames if f.event_type == "toolUseEvent"]
    assert tool_frames[0]["input"] == ""
    assert tool_frames[-1]["stop"] is True
    assert all(f["name"] == "get_weather" for f in tool_frames)
    assert json.loads("".join(f.get("input", "") for f in tool_frames)) == {"city": "Oslo"}
    tail = ["metadataEvent", "contextUsageEvent", "meteringEvent"]
    assert [f.event_type for f in frames[-3:]] == tail

    # Without a script, the reply echoes the prompt.
    _, _, raw = await post_chat(session, url, account, chat_body(account, "Ping"))
    assert text_of(frames_of(raw)) == "You said: Ping"

    [first, second] = fake.requests("chat")
    assert first.account_id == account.account_id
    assert first.headers["authorization"] == f"Bearer {account.access_token}"
    assert first.json == chat_body(account)
    assert (first.status, second.status) == (200, 200)
    assert fake.counters()["streams_completed"] == 2


@pytest.mark.parametrize("operation", ["GenerateAssistantResponse", "SendMessage"])
async def test_cli_persona_routing(
    served: Served, session: aiohttp.ClientSession, operation: str
) -> None:
    fake, url = served
    account = fake.issue_idc_account()
    headers = {
        **auth(account),
        "x-amz-target": f"AmazonCodeWhispererStreamingService.{operation}",
        "Content-Type": "application/x-amz-json-1.0",
    }
    data = json.dumps(chat_body(account, origin="KIRO_CLI")).encode()
    async with session.post(url + "/", data=data, headers=headers) as response:
        assert response.status == 200
        assert text_of(frames_of(await response.read())) == "You said: Hello"


async def test_unknown_routes(served: Served, session: aiohttp.ClientSession) -> None:
    _, url = served
    async with session.post(url + "/nothing/here") as response:
        assert response.status == 404
    async with session.post(url + "/", headers={"x-amz-target": "X.Unknown"}) as response:
        assert response.status == 404
    async with session.get(url + "/generateAssistantResponse") as response:
        assert response.status == 405


# Bearer


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer aoaNotIssued"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
    ],
    ids=["missing", "unknown", "not bearer", "empty"],
)
async def test_bearer_required(
    served: Served, session: aiohttp.ClientSession, headers: dict[str, str]
) -> None:
    _, url = served
    for method, path in [
        ("POST", "/generateAssistantResponse"),
        ("GET", "/getUsageLimits"),
        ("GET", "/ListAvailableModels"),
        ("POST", "/mcp"),
    ]:
        async with session.request(method, url + path, headers=headers, json={}) as response:
            assert response.status == 403
            assert response.headers["x-amzn-errortype"] == "AccessDeniedException"
            assert await response.json() == BEARER_INVALID


async def test_expired_tokens_are_refused(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    assert (await post_chat(session, url, account))[0] == 200
    fake.expire_access_token(account.access_token)
    status, _, raw = await post_chat(session, url, account)
    assert (status, json.loads(raw)) == (403, BEARER_INVALID)


async def test_tokens_expire_with_time(session: aiohttp.ClientSession) -> None:
    now = [1_000_000.0]
    async with running_fake(FakeKiro(access_ttl_s=60, clock=lambda: now[0])) as (fake, url):
        account = fake.issue_idc_account()
        assert account.expires_in == 60
        assert account.expires_at == 1_000_060.0
        assert (await post_chat(session, url, account))[0] == 200
        now[0] += 61
        assert (await post_chat(session, url, account))[0] == 403


async def test_api_keys(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_api_key_account()
    assert account.access_token.startswith("ksk_")
    assert account.refresh_token is None
    assert (await post_chat(session, url, account))[0] == 200
    status, _, _ = await post_chat(session, url, account, headers={"tokentype": "EXTERNAL_IDP"})
    assert status == 403


# Account-level refusals


async def test_profile_arn(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    social, idc = fake.issue_social_account(), fake.issue_idc_account()
    status, headers, raw = await post_chat(session, url, social, body(user()))
    assert (status, json.loads(raw)) == (
        400,
        {"message": "profileArn is required for this request."},
    )
    assert headers["x-amzn-errortype"] == "ValidationException"
    wrong = body(user(), profile_arn=idc.profile_arn)
    status, _, raw = await post_chat(session, url, social, wrong)
    assert (status, json.loads(raw)) == (
        403,
        {"message": "User is not authorized to make this call."},
    )
    # Every login kind needs it, IdC too; with its own ARN the chat is served.
    assert (await post_chat(session, url, idc, body(user())))[0] == 400
    own = body(user(), profile_arn=idc.profile_arn)
    assert (await post_chat(session, url, idc, own))[0] == 200


async def test_free_plan_has_no_opus(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    free = fake.issue_social_account(subscription="KIRO FREE")
    status, _, raw = await post_chat(session, url, free, chat_body(free, model="claude-opus-4.7"))
    assert (status, json.loads(raw)["reason"]) == (400, "INVALID_MODEL_ID")
    assert (await post_chat(session, url, free, chat_body(free, model="claude-haiku-4.5")))[
        0
    ] == 200


async def test_usage_is_consumed_until_the_quota_runs_out(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Reply(text="ok", credits=0.5))
    await post_chat(session, url, account)
    assert fake.account(account.account_id).usage.current == 0.5
    fake.set_usage(account.account_id, current=999.9, limit=1000.0)
    fake.enqueue(Reply(text="ok", credits=0.2))
    assert (await post_chat(session, url, account))[0] == 200
    status, _, raw = await post_chat(session, url, account)
    assert (status, json.loads(raw)["reason"]) == (402, "MONTHLY_REQUEST_COUNT")
    fake.set_usage(account.account_id, bonuses=(Bonus(current=0.0, limit=10.0),))
    assert (await post_chat(session, url, account))[0] == 200


async def test_overage_serves_past_the_plan_and_bills_it_until_its_cap(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account(subscription="KIRO PRO")
    fake.set_usage(account.account_id, current=999.5, overage_status="ENABLED", overage_cap=1.0)
    for _ in range(2):
        fake.enqueue(Reply(text="ok", credits=0.75))
        assert (await post_chat(session, url, account))[0] == 200
    # 0.5 of the plan was left: the first chat's 0.25 and the second's 0.75 are overage.
    entry = (await usage_of(session, url, account))["usageBreakdownList"][0]
    assert entry["currentUsageWithPrecision"] == 1001.0
    assert (entry["currentOveragesWithPrecision"], entry["currentOverages"]) == (1.0, 1)
    assert entry["overageCharges"] == pytest.approx(0.04)
    assert entry["overageCapWithPrecision"] == 1.0
    status, _, raw = await post_chat(session, url, account)  # the cap reached
    assert (status, json.loads(raw)["reason"]) == (402, "OVERAGE_REQUEST_LIMIT_EXCEEDED")
    fake.set_usage(account.account_id, overage_status="DISABLED")
    status, _, raw = await post_chat(session, url, account)
    assert (status, json.loads(raw)["reason"]) == (402, "MONTHLY_REQUEST_COUNT")
    fake.set_usage(account.account_id, overage_status="ENABLED", overage_cap=None)
    fake.enqueue(Reply(text="ok", credits=0.5))
    assert (await post_chat(session, url, account))[0] == 200  # the cap is the plan's 1000
    assert fake.account(account.account_id).usage.overages == 1.5


async def test_suspended_account(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.suspend_account(account.account_id)
    status, _, raw = await post_chat(session, url, account)
    assert (status, json.loads(raw)["reason"]) == (403, "TEMPORARILY_SUSPENDED")
    fake.suspend_account(account.account_id, suspended=False)
    assert (await post_chat(session, url, account))[0] == 200


async def test_an_egress_gated_account_sees_no_claude(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.gate_egress(account.account_id)
    ids, _ = await list_models(session, url, account)
    assert ids
    assert not [model for model in ids if model.startswith("claude-")]
    status, _, raw = await post_chat(session, url, account)
    assert (status, json.loads(raw)) == (
        400,
        {
            "message": "Invalid model. Please select a different model to continue.",
            "reason": "INVALID_MODEL_ID",
        },
    )
    gpt = body(user("Hello", model="gpt-5.6-sol"), profile_arn=account.profile_arn)
    assert (await post_chat(session, url, account, gpt))[0] == 200
    fake.gate_egress(account.account_id, False)  # as through a proxy elsewhere
    assert "claude-sonnet-4.5" in (await list_models(session, url, account))[0]
    assert (await post_chat(session, url, account))[0] == 200


async def test_validation_over_http(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Reply(text="never used"))
    bad = body(user(), trigger="AUTO", profile_arn=account.profile_arn)
    status, headers, raw = await post_chat(session, url, account, bad)
    assert status == 400
    assert headers["x-amzn-errortype"] == "ValidationException"
    assert json.loads(raw) == {"message": "Improperly formed request.", "reason": None}
    assert fake.requests("chat")[0].rejected_by == "invalid_chat_trigger_type"
    assert fake.counters()["rejected:invalid_chat_trigger_type"] == 1
    assert fake.pending_scripts() == 1  # a rejected request consumes no script


async def test_context_overflow_with_a_small_model(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    fake.set_model(Model("small", "Small", 50, 10, 1.0))
    account = fake.issue_social_account()
    status, _, raw = await post_chat(
        session, url, account, chat_body(account, "x" * 400, model="small")
    )
    assert (status, json.loads(raw)) == (
        400,
        {"message": "Input is too long.", "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD"},
    )


async def test_account_queues_come_first(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    one, two = fake.issue_social_account(), fake.issue_social_account()
    fake.enqueue(Reply(text="shared"))
    fake.enqueue(Reply(text="for two"), account_id=two.account_id)
    _, _, raw = await post_chat(session, url, two)
    assert text_of(frames_of(raw)) == "for two"
    _, _, raw = await post_chat(session, url, one)
    assert text_of(frames_of(raw)) == "shared"
    fake.default_script = Script(reply=Reply(text="default"))
    _, _, raw = await post_chat(session, url, two)
    assert text_of(frames_of(raw)) == "default"


async def test_a_standing_script_answers_one_account(
    served: Served, session: aiohttp.ClientSession
) -> None:
    """A fault kept on one account (its connection drops after two events) answers every chat
    of that account once its queue is empty, and no other account's."""
    fake, url = served
    faulty, healthy = fake.issue_social_account(), fake.issue_social_account()
    cut = Script(reply=Reply(text="abcdefgh"), chunk_size=2, fault=Fault.CONNECTION_CUT, fault_at=2)
    fake.set_account_script(faulty.account_id, cut)
    fake.enqueue(Reply(text="queued"), account_id=faulty.account_id)
    _, _, raw = await post_chat(session, url, faulty)
    assert text_of(frames_of(raw)) == "queued"
    for _ in range(2):
        received = bytearray()
        async with session.post(
            url + "/generateAssistantResponse", json=chat_body(faulty), headers=auth(faulty)
        ) as response:
            with pytest.raises(aiohttp.ClientPayloadError):
                await drain(response, received)
        assert text_of(FrameDecoder().feed(bytes(received))) == "abcd"  # two events, then cut
    _, _, raw = await post_chat(session, url, healthy)
    assert text_of(frames_of(raw)) == "You said: Hello"
    fake.set_account_script(faulty.account_id, None)
    _, _, raw = await post_chat(session, url, faulty)
    assert text_of(frames_of(raw)) == "You said: Hello"
    assert fake.counters()["fault:CONNECTION_CUT"] == 2


# Faults on the wire


@pytest.mark.parametrize(
    ("fault", "status", "retry_after"),
    [
        (Fault.QUOTA_402, 402, None),
        (Fault.OVERAGE_400, 400, None),
        (Fault.THROTTLE_429, 429, None),  # the wait is in the body
        (Fault.SUSPICIOUS_429, 429, "3"),
        (Fault.THROTTLE_429_NO_RETRY_AFTER, 429, None),
        (Fault.THROTTLE_429_RETRY_AFTER_HEADER, 429, "3"),
        (Fault.CONVERSATION_LIMIT_402, 402, None),
        (Fault.CAPACITY_429, 429, None),
        (Fault.SUSPENDED_403, 403, None),
        (Fault.BEARER_INVALID_403, 403, None),
        (Fault.SERVER_500, 500, None),
        (Fault.INTERNAL_500, 500, None),
    ],
)
async def test_http_faults(
    served: Served,
    session: aiohttp.ClientSession,
    fault: Fault,
    status: int,
    retry_after: str | None,
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Script(fault=fault, retry_after_s=3))
    got_status, headers, raw = await post_chat(session, url, account)
    assert got_status == status
    assert headers.get("Retry-After") == retry_after
    assert headers["x-amzn-errortype"].endswith("Exception")
    assert "message" in json.loads(raw)
    assert fake.counters()[f"fault:{fault.name}"] == 1
    assert (await post_chat(session, url, account))[0] == 200  # one fault, one request


async def test_empty_stream(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Script(fault=Fault.EMPTY_STREAM))
    status, headers, raw = await post_chat(session, url, account)
    assert (status, raw) == (200, b"")
    assert headers["Content-Type"] == "application/vnd.amazon.eventstream"


async def drain(response: aiohttp.ClientResponse, into: bytearray) -> None:
    async for chunk in response.content.iter_any():
        into += chunk


async def test_connection_cut(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Script(reply=Reply(text="abcdefgh"), chunk_size=2, fault=Fault.CONNECTION_CUT))
    received = bytearray()
    async with session.post(
        url + "/generateAssistantResponse", json=chat_body(account), headers=auth(account)
    ) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await drain(response, received)
    decoder = FrameDecoder()
    assert text_of(decoder.feed(bytes(received))) == "ab"
    with pytest.raises(UpstreamProtocolError, match="truncated"):
        decoder.finish()
    assert "streams_completed" not in fake.counters()
    assert fake.account(account.account_id).usage.current == 0


async def test_corrupt_crc_on_the_wire(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(
        Script(reply=Reply(text="abcd"), chunk_size=2, fault=Fault.CORRUPT_CRC, fault_at=0)
    )
    _, _, raw = await post_chat(session, url, account)
    with pytest.raises(UpstreamProtocolError, match="CRC"):
        FrameDecoder().feed(raw)


async def test_truncated_tool_input_on_the_wire(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(Script(fault=Fault.TRUNCATED_TOOL_INPUT))
    status, _, raw = await post_chat(session, url, account)
    frames = frames_of(raw)  # the body ends cleanly, between frames
    assert status == 200
    assert frames[-1].event_type == "toolUseEvent"
    assert not any(f.payload.get("stop") for f in frames)


async def test_stall_and_latency(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    fake.enqueue(
        Script(reply=Reply(text="abcd"), chunk_size=2, fault=Fault.STALL, fault_at=1, stall_s=0.3)
    )
    started = time.monotonic()
    status, _, raw = await post_chat(session, url, account)
    assert time.monotonic() - started >= 0.3
    assert (status, text_of(frames_of(raw))) == (200, "abcd")

    fake.latency = Latency(first_s=0.5, between_s=0.0)
    started = time.monotonic()
    async with session.post(
        url + "/generateAssistantResponse", json=chat_body(account), headers=auth(account)
    ) as response:
        assert response.status == 200  # headers come at once, the first frame later
        headers_after = time.monotonic() - started
        await response.content.readany()
        first_frame_after = time.monotonic() - started
        await response.read()
    assert headers_after < 0.5 <= first_frame_after


async def test_a_stalled_stream_does_not_block_shutdown(session: aiohttp.ClientSession) -> None:
    started = time.monotonic()
    async with running_fake() as (fake, url):
        account = fake.issue_social_account()
        fake.enqueue(Script(fault=Fault.STALL, stall_s=30))
        task = asyncio.ensure_future(post_chat(session, url, account))
        while not fake.requests("chat"):
            await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("turns", range(6))
async def test_a_connection_accepted_as_the_fake_stops_is_shut_too(turns: int) -> None:
    """A client connects `turns` loop turns before the fake stops: whichever step of asyncio's
    accept it has reached, stopping leaves no socket of it behind (a leaked one warns at some
    later garbage collection, in another test)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with running_fake() as (_, url):
            address = urlsplit(url)
            assert address.hostname is not None
            assert address.port is not None
            client = socket.create_connection((address.hostname, address.port), timeout=5)
            for _ in range(turns):
                await asyncio.sleep(0)
        for _ in range(LATE_TURNS + 2):  # what a late accept would still do
            await asyncio.sleep(0)
        client.close()
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


# Usage, models, profiles, MCP


async def test_usage_limits(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account(subscription="KIRO POWER")
    trial = FreeTrial(current=10.0, limit=500.0, expiry=1_900_000_000.0)
    fake.set_usage(
        account.account_id,
        current=5469.38,
        bonuses=(Bonus(1.0, 100.0),),
        free_trial=trial,
        next_date_reset=1_777_593_600.0,
    )
    params = {
        "origin": "AI_EDITOR",
        "resourceType": "AGENTIC_REQUEST",
        "profileArn": account.profile_arn,
    }
    async with session.get(
        url + "/getUsageLimits", params=params, headers=auth(account)
    ) as response:
        assert response.status == 200
        usage = await response.json()
    assert usage["subscriptionInfo"]["subscriptionTitle"] == "KIRO POWER"
    assert usage["nextDateReset"] == 1_777_593_600.0
    assert usage["userInfo"]["email"] is None
    [credit] = usage["usageBreakdownList"]
    assert credit["resourceType"] == "CREDIT"
    assert (credit["currentUsageWithPrecision"], credit["usageLimitWithPrecision"]) == (
        5469.38,
        10000.0,
    )
    assert credit["currentUsage"] == 5469
    assert credit["bonuses"] == [{"currentUsage": 1.0, "usageLimit": 100.0, "status": "ACTIVE"}]
    assert credit["freeTrialInfo"]["freeTrialStatus"] == "ACTIVE"
    assert credit["freeTrialInfo"]["usageLimitWithPrecision"] == 500.0

    async with session.get(
        url + "/getUsageLimits", params={**params, "isEmailRequired": "true"}, headers=auth(account)
    ) as response:
        assert (await response.json())["userInfo"]["email"] == "user1@example.com"


async def test_usage_limits_cli_persona(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_idc_account()
    headers = {**auth(account), "x-amz-target": "AmazonCodeWhispererService.GetUsageLimits"}
    async with session.post(url + "/", json={"isEmailRequired": True}, headers=headers) as response:
        assert response.status == 400
        assert await response.json() == {"message": "Invalid profileArn."}
    data = {"isEmailRequired": True, "profileArn": account.profile_arn}
    async with session.post(url + "/", json=data, headers=headers) as response:
        assert response.status == 200
        assert (await response.json())["userInfo"]["email"]
    other = fake.issue_social_account()
    async with session.post(
        url + "/", json={"profileArn": other.profile_arn}, headers=headers
    ) as response:
        assert response.status == 403


async def usage_of(session: aiohttp.ClientSession, url: str, account: TokenSet) -> dict[str, Any]:
    async with session.get(url + "/getUsageLimits", headers=auth(account)) as response:
        assert response.status == 200
        usage: dict[str, Any] = await response.json()
        return usage


async def set_overage(
    session: aiohttp.ClientSession, url: str, account: TokenSet, status: object
) -> tuple[int, dict[str, Any]]:
    data = {"overageConfiguration": {"overageStatus": status}, "profileArn": account.profile_arn}
    async with session.post(
        url + "/setUserPreference", json=data, headers=auth(account)
    ) as response:
        return response.status, await response.json()


async def test_the_overage_switch_is_kept_and_reported(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account(subscription="KIRO PRO")
    before = await usage_of(session, url, account)
    assert before["overageConfiguration"]["overageStatus"] == "DISABLED"
    assert before["subscriptionInfo"]["overageCapability"] == "OVERAGE_CAPABLE"
    assert await set_overage(session, url, account, "ENABLED") == (200, {})
    assert fake.account(account.account_id).usage.overage_status == "ENABLED"
    after = await usage_of(session, url, account)
    assert after["overageConfiguration"] == {"overageStatus": "ENABLED", "overageLimit": None}
    assert (await set_overage(session, url, account, "DISABLED"))[0] == 200
    assert fake.account(account.account_id).usage.overage_status == "DISABLED"
    [recorded, _] = fake.requests("preference")
    assert recorded.json["overageConfiguration"] == {"overageStatus": "ENABLED"}


async def test_the_overage_switch_is_refused_where_kiro_refuses_it(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    free = fake.issue_social_account(subscription="KIRO FREE")
    assert (await usage_of(session, url, free))["subscriptionInfo"][
        "overageCapability"
    ] == "OVERAGE_INCAPABLE"
    status, answer = await set_overage(session, url, free, "ENABLED")
    assert (status, answer["message"]) == (403, "User is not authorized to access this feature.")
    assert fake.account(free.account_id).usage.overage_status == "DISABLED"
    pro = fake.issue_social_account()
    assert (await set_overage(session, url, pro, "ON"))[0] == 400
    other = {"overageConfiguration": {"overageStatus": "ENABLED"}, "profileArn": free.profile_arn}
    async with session.post(url + "/setUserPreference", json=other, headers=auth(pro)) as answer:
        assert answer.status == 403  # another account's profile
    async with session.post(url + "/setUserPreference", json={}) as answer:
        assert answer.status == 403  # no bearer
    assert fake.account(pro.account_id).usage.overage_status == "DISABLED"


async def list_models(
    session: aiohttp.ClientSession, url: str, account: TokenSet, **params: str
) -> tuple[list[str], int]:
    """Follow nextToken to the end; return the model ids and the number of pages."""
    ids: list[str] = []
    pages = 0
    token: str | None = None
    while pages < 50:
        query = {"origin": "AI_EDITOR", **params, **({"nextToken": token} if token else {})}
        async with session.get(
            url + "/ListAvailableModels", params=query, headers=auth(account)
        ) as response:
            assert response.status == 200
            page = await response.json()
        pages += 1
        assert page["defaultModel"] == {"modelId": "auto"}
        ids += [model["modelId"] for model in page["models"]]
        token = page.get("nextToken")
        if token is None:
            return ids, pages
    raise AssertionError("pagination did not end")


async def test_models_are_paged(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    ids, pages = await list_models(session, url, account)
    assert ids == [model.model_id for model in fake.models()]
    assert pages == 4  # 13 models, 4 per page
    assert {"claude-sonnet-4.5", "claude-opus-4.7", "deepseek-3.2", "gpt-5.6-sol"} <= set(ids)
    assert (await list_models(session, url, account, maxResults="100"))[1] == 1
    free = fake.issue_social_account(subscription="KIRO FREE")
    free_ids, _ = await list_models(session, url, free)
    assert not [i for i in free_ids if "opus" in i]


async def test_model_entries(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_idc_account()
    headers = {**auth(account), "x-amz-target": "AmazonCodeWhispererService.ListAvailableModels"}
    async with session.post(url + "/", json={"maxResults": 20}, headers=headers) as response:
        models = {m["modelId"]: m for m in (await response.json())["models"]}
    opus = models["claude-opus-4.7"]
    assert opus["tokenLimits"] == {"maxInputTokens": 1_000_000, "maxOutputTokens": 64_000}
    assert opus["rateMultiplier"] == 2.2
    schema = opus["additionalModelRequestFieldsSchema"]["properties"]
    assert schema["output_config"]["properties"]["effort"]["enum"][-1] == "max"
    assert "additionalModelRequestFieldsSchema" not in models["claude-sonnet-4.5"]
    assert models["deepseek-3.2"]["supportedInputTypes"] == ["TEXT"]
    assert models["claude-sonnet-4.6"]["supportedInputTypes"] == ["TEXT", "IMAGE", "DOCUMENT"]
    assert "DOCUMENT" not in models["claude-sonnet-4.5"]["supportedInputTypes"]
    assert "reasoning" in models["gpt-5.6-sol"]["additionalModelRequestFieldsSchema"]["properties"]


async def test_bad_model_paging(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    for params in ({"nextToken": "garbage!"}, {"maxResults": "many"}):
        async with session.get(
            url + "/ListAvailableModels", params=params, headers=auth(account)
        ) as response:
            assert response.status == 400


async def test_profiles(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_idc_account(provider="Enterprise", region="eu-central-1")
    headers = {**auth(account), "x-amz-target": "AmazonCodeWhispererService.ListAvailableProfiles"}
    async with session.post(url + "/", json={}, headers=headers) as response:
        [profile] = (await response.json())["profiles"]
    assert profile["arn"] == account.profile_arn
    assert profile["arn"].startswith("arn:aws:codewhisperer:eu-central-1:")


async def test_mcp_web_search(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_social_account()
    call = {
        "id": "c1",
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "web_search", "arguments": {"query": "kiro gateway"}},
    }
    async with session.post(url + "/mcp", json=call, headers=auth(account)) as response:
        assert response.status == 400  # the real endpoint requires a root-level profileArn
        assert "profileArn is required" in (await response.json())["message"]
    call["profileArn"] = account.profile_arn
    async with session.post(url + "/mcp", json=call, headers=auth(account)) as response:
        answer = await response.json()
    assert answer["id"] == "c1"
    assert answer["result"]["isError"] is False
    results = json.loads(answer["result"]["content"][0]["text"])
    assert results["query"] == "kiro gateway"
    assert results["results"][0]["url"] == "https://example.com/kiro-gateway/1"
    async with session.post(
        url + "/mcp",
        json={"id": 2, "method": "tools/list", "profileArn": account.profile_arn},
        headers=auth(account),
    ) as response:
        assert (await response.json())["result"]["tools"][0]["name"] == "web_search"
    async with session.post(
        url + "/mcp",
        json={"id": 3, "method": "nope", "profileArn": account.profile_arn},
        headers=auth(account),
    ) as response:
        assert (await response.json())["error"]["code"] == -32601


def context_usage(raw: bytes) -> float:
    [usage] = [f for f in frames_of(raw) if f.event_type == "contextUsageEvent"]
    percentage = usage.payload["contextUsagePercentage"]
    assert isinstance(percentage, float)
    return percentage


async def test_gpt_5_6_has_a_1m_window_behind_its_listing_unless_the_account_is_not_there_yet(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    wide, narrow = fake.issue_social_account(), fake.issue_social_account()
    fake.set_listed_windows(narrow.account_id)
    text = "All work and no play makes Jack a dull boy. " * 200
    data = chat_body(wide, text, model="gpt-5.6-sol")
    status, _, raw = await post_chat(session, url, wide, data)
    on_wide = context_usage(raw)
    status, _, raw = await post_chat(
        session, url, narrow, chat_body(narrow, text, model="gpt-5.6-sol")
    )
    assert status == 200
    assert context_usage(raw) / on_wide == pytest.approx(1_000_000 / 272_000, rel=0.01)
    [model] = [m for m in fake.models() if m.model_id == "gpt-5.6-sol"]
    assert (model.max_input_tokens, model.usage_window, model.prompt_limit) == (
        272_000,
        1_000_000,
        872_000,
    )


async def test_a_real_window_takes_prompts_to_itself_less_the_output_limit(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    fake.set_model(Model("wide", "Wide", 50, 10, 1.0, window=100))  # prompts to 90 tokens
    wide, narrow = fake.issue_social_account(), fake.issue_social_account()
    fake.set_listed_windows(narrow.account_id)
    fits = chat_body(wide, "x" * 200, model="wide")  # 84 estimated tokens: above 50, below 90
    assert (await post_chat(session, url, wide, fits))[0] == 200
    status, _, raw = await post_chat(
        session, url, narrow, chat_body(narrow, "x" * 100, model="wide")
    )
    assert (status, json.loads(raw)["message"]) == (400, "Input is too long.")
    over = chat_body(wide, "x" * 300, model="wide")
    status, _, raw = await post_chat(session, url, wide, over)
    refusal = json.loads(raw)
    assert (status, refusal["reason"]) == (400, "CONTENT_LENGTH_EXCEEDS_THRESHOLD")
    assert refusal["message"].endswith("exceeds the model maximum (90).")


@pytest.mark.parametrize("query", ["x" * 201, "   ", "\n\t"])
async def test_mcp_web_search_refuses_what_kiro_refuses(
    served: Served, session: aiohttp.ClientSession, query: str
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    call = {
        "id": "c1",
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "web_search", "arguments": {"query": query}},
        "profileArn": account.profile_arn,
    }
    async with session.post(url + "/mcp", json=call, headers=auth(account)) as response:
        answer = await response.json()
    assert answer["error"]["code"] == -32602
    assert "result" not in answer
    call["params"] = {"name": "web_search", "arguments": {"query": "x" * 200}}
    async with session.post(url + "/mcp", json=call, headers=auth(account)) as response:
        assert "result" in await response.json()  # 200 characters are within the limit
