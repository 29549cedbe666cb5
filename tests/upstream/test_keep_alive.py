"""Kept-alive upstream connections against the fake Kiro on loopback, real sockets both ways.

Reuse per account, never across accounts; the server closing, resetting or half-closing a
kept-alive connection (as the next request crosses it, or while the client is idle) is invisible,
with one account and with several; nothing is sent again once an answer began; the bounds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kirod.config import OPTIONS
from kirod.credentials import device_login as login
from kirod.testing.fake_kiro import (
    ConnectionFault,
    DeviceFlow,
    FakeKiro,
    Fault,
    Reply,
    Script,
    TokenSet,
    build_app,
    running_fake,
)
from kirod.testing.tls import make_certificates
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamConnectionError, UpstreamError
from kirod.upstream.frames import Frame
from kirod.upstream.pools import KEEP_ALIVE_TIMEOUT_S, POOL_CONNECTIONS
from kirod.upstream.secrets import AuthKind, Credentials

FAULTS = list(ConnectionFault)
TEXT = "kept alive"


def account_from(tokens: TokenSet) -> UpstreamAccount:
    return UpstreamAccount(
        id=tokens.account_id,
        region=tokens.region,
        auth_region=tokens.region,
        auth_kind=AuthKind.SOCIAL,
        profile_arn=tokens.profile_arn,
        credentials=Credentials(
            access_token=tokens.access_token,
            refresh_token=tokens.refresh_token,
            expires_at=tokens.expires_at,
        ),
    )


def chat_body(account: UpstreamAccount) -> dict[str, object]:
    return {
        "conversationState": {
            "conversationId": "3f1c1f55-3fd0-4c7d-9d36-2b4a6bd0c9a1",
            "chatTriggerType": "MANUAL",
            "currentMessage": {
                "userInputMessage": {
                    "content": "hi",
                    "modelId": "claude-sonnet-4.5",
                    "origin": "AI_EDITOR",
                }
            },
        },
        "profileArn": account.profile_arn,
    }


def text_of(frames: list[Frame]) -> str:
    return "".join(
        str(frame.payload.get("content", ""))
        for frame in frames
        if frame.event_type == "assistantResponseEvent"
    )


async def chat(client: KiroClient, account: UpstreamAccount) -> str:
    """One whole chat; its answer's text."""
    async with client.chat(account, chat_body(account)) as chunks:
        return text_of([frame async for frames in chunks for frame in frames])


def chats(service: FakeKiro, account: UpstreamAccount | None = None) -> list[int]:
    """The connection serial of every chat the fake recorded (of `account`), oldest first."""
    return [
        record.connection
        for record in service.requests("chat")
        if account is None or record.account_id == account.id
    ]


async def eventually(condition: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeKiro, str]]:
    async with running_fake() as (service, base_url):
        service.default_script = Script(reply=Reply(text=TEXT))
        yield service, base_url


def new_client(base: str, **options: Any) -> KiroClient:
    endpoints = Endpoints(kiro=base, auth=base, oidc=base)
    return KiroClient(endpoints, ClientOptions(idle_timeout_s=2.0, **options))


@pytest.fixture
async def client(fake: tuple[FakeKiro, str]) -> AsyncIterator[KiroClient]:
    async with new_client(fake[1]) as kiro:
        yield kiro


def accounts(service: FakeKiro, count: int) -> list[UpstreamAccount]:
    return [account_from(service.issue_social_account()) for _ in range(count)]


def struck(service: FakeKiro, fault: ConnectionFault) -> int:
    return service.counters().get(f"connection_fault:{fault.name}", 0)


# -- reuse, per account -----------------------------------------------------------------------


async def test_an_accounts_calls_share_its_connection(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    assert await chat(client, account) == TEXT
    assert await chat(client, account) == TEXT
    await client.usage_limits(account)
    await client.list_models(account)
    serials = {record.connection for record in service.requests()}
    assert len(serials) == 1


async def test_reuse_off_opens_a_connection_per_call(fake: tuple[FakeKiro, str]) -> None:
    service, base = fake
    [account] = accounts(service, 1)
    async with new_client(base, keep_alive=False) as client:
        for _ in range(3):
            assert await chat(client, account) == TEXT
    assert len(set(chats(service))) == 3


async def test_accounts_never_share_a_connection(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    team = accounts(service, 3)
    for _ in range(2):
        for account in team:
            assert await chat(client, account) == TEXT
    answers = await asyncio.gather(*(chat(client, a) for a in team for _ in range(3)))
    assert answers == [TEXT] * 9
    owners: dict[int, set[str]] = {}
    for record in service.requests("chat"):
        assert record.account_id is not None
        owners.setdefault(record.connection, set()).add(record.account_id)
    assert all(len(owner) == 1 for owner in owners.values())
    for account in team:
        first, second, *_ = chats(service, account)
        assert first == second  # its second call found its first connection


async def test_two_logins_never_share_a_connection(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    """A login is a future account: its calls take connections of its own, reused."""
    service, _ = fake
    service.set_device_flow(DeviceFlow(pending_polls=0, interval_s=1))
    logins = []
    for _ in range(2):  # one after the other: the second would find the first's connection idle
        logins.append(await login.start(client))
        assert await login.poll(client, logins[-1]) is not None
    used = []
    for started in logins:
        records = [r for r in service.requests() if r.operation in ("oidc_device", "oidc_token")]
        mine = {r.connection for r in records if r.json.get("clientId") == started.client_id}
        assert len(mine) == 1  # its device authorization and token calls shared one
        used.append(mine)
    assert not used[0] & used[1]
    assert len({r.connection for r in service.requests("oidc_register")}) == 2


# -- a stale connection is sent again, once ----------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
async def test_a_request_crossing_the_close_goes_again_on_a_new_connection(
    fake: tuple[FakeKiro, str], client: KiroClient, fault: ConnectionFault
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    assert await chat(client, account) == TEXT
    [kept] = chats(service)
    service.connections.fail_next(fault)
    assert await chat(client, account) == TEXT
    assert struck(service, fault) == 1
    [first, answered] = chats(service)  # the request the fault met was never taken
    assert first == kept
    assert answered != kept
    await eventually(lambda: kept not in service.connections.open_serials())


@pytest.mark.parametrize(
    "fault", [ConnectionFault.CLOSE, ConnectionFault.RESET], ids=lambda fault: fault.name.lower()
)
async def test_over_tls_too(tmp_path: Path, fault: ConnectionFault) -> None:
    """Kiro is HTTPS: the same, with TLS on the connection (no half-close: TLS has none)."""
    certs = make_certificates(tmp_path / "tls")
    service = FakeKiro()
    service.default_script = Script(reply=Reply(text=TEXT))
    runner = web.AppRunner(build_app(service), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_context()).start()
        base = f"https://127.0.0.1:{runner.addresses[0][1]}"
        [account] = accounts(service, 1)
        async with new_client(base, ca_file=certs.ca_file) as client:
            assert await chat(client, account) == TEXT
            service.connections.fail_next(fault)
            assert await chat(client, account) == TEXT
        assert struck(service, fault) == 1
        first, answered = chats(service)
        assert answered != first
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
async def test_several_accounts_each_cross_their_own_close(
    fake: tuple[FakeKiro, str], client: KiroClient, fault: ConnectionFault
) -> None:
    service, _ = fake
    team = accounts(service, 3)
    for account in team:
        assert await chat(client, account) == TEXT
    kept = {account.id: chats(service, account)[0] for account in team}
    service.connections.fail_next(fault, count=len(team))
    assert await asyncio.gather(*(chat(client, a) for a in team)) == [TEXT] * 3
    assert struck(service, fault) == 3
    answered = {account.id: chats(service, account)[1] for account in team}
    assert len(set(answered.values())) == 3
    assert not set(answered.values()) & set(kept.values())


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
async def test_a_close_while_idle_is_noticed_before_reuse(
    fake: tuple[FakeKiro, str],
    client: KiroClient,
    fault: ConnectionFault,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiohttp drops a pooled connection it saw closed: nothing needs sending again."""
    service, _ = fake
    team = accounts(service, 2)
    for account in team:
        assert await chat(client, account) == TEXT
    kept = set(chats(service))
    assert service.connections.fail_now(fault) == 2
    await eventually(lambda: not kept & service.connections.open_serials())
    await asyncio.sleep(0.05)  # the client's side has read the close by now
    with caplog.at_level(logging.INFO, logger="kirod.upstream.pools"):
        assert await asyncio.gather(*(chat(client, a) for a in team)) == [TEXT] * 2
    assert "upstream_connection_stale" not in caplog.messages
    assert not kept & set(chats(service)[2:])


async def test_a_new_connection_that_fails_is_not_sent_again(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    """Only a reused connection can have gone stale; a new one failing is the network's."""
    service, _ = fake
    [account] = accounts(service, 1)
    service.connections.fail_next(ConnectionFault.RESET, reused_only=False)
    with pytest.raises(UpstreamConnectionError):
        await chat(client, account)
    assert struck(service, ConnectionFault.RESET) == 1
    assert chats(service) == []


async def test_the_request_goes_again_once_only(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    assert await chat(client, account) == TEXT
    service.connections.fail_next(ConnectionFault.CLOSE, count=3, reused_only=False)
    with pytest.raises(UpstreamConnectionError):
        await chat(client, account)
    assert struck(service, ConnectionFault.CLOSE) == 2  # the reused connection, then a new one
    assert service.connections.armed() == 1  # no third attempt
    assert len(chats(service)) == 1


async def test_a_get_is_sent_again_once_by_aiohttp_itself(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    await client.usage_limits(account)
    service.connections.fail_next(ConnectionFault.RESET, operation="usage")
    await client.usage_limits(account)
    assert struck(service, ConnectionFault.RESET) == 1
    service.connections.fail_next(ConnectionFault.RESET, 3, operation="usage", reused_only=False)
    with pytest.raises(UpstreamConnectionError):
        await client.usage_limits(account)
    assert struck(service, ConnectionFault.RESET) == 3  # twice more: aiohttp's resend, not ours
    assert service.connections.armed() == 1


# -- never once the answer began ---------------------------------------------------------------


async def read_until_error(
    client: KiroClient,
    account: UpstreamAccount,
    on_first_event: Callable[[], object] | None = None,
) -> str:
    """The text a chat streamed before it failed; `on_first_event` runs once some arrived."""
    text = ""
    try:
        async with client.chat(account, chat_body(account)) as chunks:
            async for frames in chunks:
                began = bool(text)
                text += text_of(frames)
                if text and not began and on_first_event is not None:
                    on_first_event()
    except UpstreamError:
        return text
    raise AssertionError("the stream ended normally")


@pytest.mark.parametrize("fault_at", [0, 1], ids=["head-only", "after-an-event"])
async def test_a_cut_after_the_answer_began_is_not_sent_again(
    fake: tuple[FakeKiro, str], client: KiroClient, fault_at: int
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    assert await chat(client, account) == TEXT
    [kept] = chats(service)
    reply = Reply(text="several events of an answer that is cut")
    service.enqueue(Script(reply=reply, fault=Fault.CONNECTION_CUT, fault_at=fault_at))
    text = await read_until_error(client, account)
    assert bool(text) is (fault_at > 0)
    assert chats(service) == [kept, kept]  # one attempt, on the kept-alive connection
    assert await chat(client, account) == TEXT


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
async def test_a_connection_failing_mid_answer_is_not_sent_again(
    fake: tuple[FakeKiro, str], client: KiroClient, fault: ConnectionFault
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    assert await chat(client, account) == TEXT
    [kept] = chats(service)
    service.enqueue(Script(reply=Reply(text="an answer that stalls"), fault=Fault.STALL, stall_s=5))
    failed: list[int] = []
    text = await read_until_error(
        client, account, lambda: failed.append(service.connections.fail_now(fault, busy=True))
    )
    assert text
    assert failed == [1]
    assert struck(service, fault) == 1
    assert chats(service) == [kept, kept]
    assert await chat(client, account) == TEXT


# -- bounds ------------------------------------------------------------------------------------


async def test_an_idle_connection_is_not_reused_past_the_timeout(
    fake: tuple[FakeKiro, str],
) -> None:
    service, base = fake
    [account] = accounts(service, 1)
    async with new_client(base, keep_alive_timeout_s=0.3) as client:
        assert await chat(client, account) == TEXT
        [kept] = chats(service)
        await asyncio.sleep(0.4)
        assert await chat(client, account) == TEXT
        assert chats(service)[1] != kept
        # aiohttp's cleanup closes it too, within another timeout.
        await eventually(lambda: kept not in service.connections.open_serials())


async def test_a_pool_opens_at_most_its_bound(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    [account] = accounts(service, 1)
    slow = Script(reply=Reply(text=TEXT), delay_first_s=0.2)
    service.enqueue(*[slow] * (POOL_CONNECTIONS + 4))
    answers = await asyncio.gather(*(chat(client, account) for _ in range(POOL_CONNECTIONS + 4)))
    assert answers == [TEXT] * (POOL_CONNECTIONS + 4)
    assert len(set(chats(service))) == POOL_CONNECTIONS


async def test_the_least_recently_used_idle_pools_are_closed(
    fake: tuple[FakeKiro, str],
) -> None:
    service, base = fake
    team = accounts(service, 3)
    async with new_client(base, max_idle_pools=2) as client:
        for account in team:
            assert await chat(client, account) == TEXT
        first = chats(service, team[0])[0]
        assert {key[0] for key, _ in client._pools} == {team[1].id, team[2].id}
        await eventually(lambda: first not in service.connections.open_serials())
        assert await chat(client, team[0]) == TEXT
        assert chats(service, team[0])[1] != first
        assert {key[0] for key, _ in client._pools} == {team[2].id, team[0].id}


async def test_forgetting_an_account_closes_its_connections(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    team = accounts(service, 2)
    for account in team:
        assert await chat(client, account) == TEXT
    gone, kept = chats(service)
    await client.forget_account(team[0].id)
    await eventually(lambda: service.connections.open_serials() == {kept})
    assert gone != kept


def test_the_defaults_agree_with_the_option_table() -> None:
    options = {option.name: option for option in OPTIONS}
    assert options["upstream_keep_alive"].default is True
    assert options["upstream_keep_alive_timeout_s"].default == KEEP_ALIVE_TIMEOUT_S
    # Room for an account's most chats at once and its other calls: none waits for a connection.
    assert options["account_inference_concurrency"].maximum + 4 <= POOL_CONNECTIONS
