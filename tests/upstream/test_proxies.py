"""Per-account proxies: URL checks, redaction, precedence, and KiroClient through real loopback
proxies (kirod.testing.proxies) in front of the fake Kiro."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import socket
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kirod.credentials import device_login as login
from kirod.credentials import refresh as auth
from kirod.log import redact_url
from kirod.testing.fake_kiro import DeviceFlow, FakeKiro, Reply, TokenSet, running_fake
from kirod.testing.fake_kiro.server import build_app
from kirod.testing.listeners import LATE_TURNS
from kirod.testing.proxies import HttpProxy, Socks5Proxy
from kirod.testing.tls import Certificates, make_certificates
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamConnectionError
from kirod.upstream.proxies import DIRECT, ProxyUrlError, check_proxy_url, effective_proxy
from kirod.upstream.secrets import AuthKind, Credentials


def endpoints(base: str) -> Endpoints:
    return Endpoints(kiro=base, auth=base, oidc=base)


def account_from(tokens: TokenSet, proxy_url: str | None = None) -> UpstreamAccount:
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
        proxy_url=proxy_url,
    )


def chat_body(tokens: TokenSet) -> dict[str, object]:
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
        "profileArn": tokens.profile_arn,
    }


async def everything(
    client: KiroClient, account: UpstreamAccount, tokens: TokenSet, service: FakeKiro
) -> None:
    """Chat, usage, models and a token refresh for `account`."""
    service.enqueue(Reply(text="hello"))
    async with client.chat(account, chat_body(tokens)) as chunks:
        assert [frame async for frames in chunks for frame in frames]
    await client.usage_limits(account)
    await client.list_models(account)
    await auth.refresh(client, account)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeKiro, str]]:
    async with running_fake() as (service, base_url):
        yield service, base_url


# -- the URL, its redaction, the precedence --------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("http://proxy.example:3128", "http://proxy.example:3128"),
        ("https://proxy.example:443/", "https://proxy.example:443"),
        ("socks5://user:p%40ss@10.0.0.1:1080", "socks5://user:p%40ss@10.0.0.1:1080"),
        ("socks5h://[::1]:1080", "socks5h://[::1]:1080"),
        (" DIRECT ", DIRECT),
    ],
)
def test_good_proxy_urls_are_kept(given: str, stored: str) -> None:
    assert check_proxy_url(given) == stored


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("ftp://proxy:21", "scheme 'ftp' is not supported"),
        ("proxy.example:3128", "is not supported"),
        ("socks4://proxy:1080", "scheme 'socks4'"),
        ("http://:3128", "needs a host"),
        ("http://proxy.example", "needs a port"),
        ("socks5://user:secret@proxy:99999", "not a valid URL"),
        ("http://proxy:3128/path", "no path"),
        ("http://proxy:3128 x", "one line without spaces"),
        ("", "one line"),
    ],
)
def test_bad_proxy_urls_are_refused_without_echoing_a_password(given: str, says: str) -> None:
    with pytest.raises(ProxyUrlError, match=says) as caught:
        check_proxy_url(given)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("socks5://user:pass@host:1080", "socks5://user:***@host:1080"),
        ("http://token@host:3128", "http://***@host:3128"),
        ("http://a:b:c@d@host:1", "http://a:***@host:1"),
        ("http://host:3128", "http://host:3128"),
        ("direct", "direct"),
        (None, None),
    ],
)
def test_redaction_masks_the_password(url: str | None, shown: str | None) -> None:
    assert redact_url(url) == shown


def test_precedence_is_account_then_global_then_none() -> None:
    assert effective_proxy("socks5://a:1", "http://g:1") == "socks5://a:1"
    assert effective_proxy(None, "http://g:1") == "http://g:1"
    assert effective_proxy(DIRECT, "http://g:1") is None
    assert effective_proxy(None, None) is None


# -- through real proxies -------------------------------------------------------------------


async def test_each_account_goes_through_its_own_proxy(fake: tuple[FakeKiro, str]) -> None:
    service, base = fake
    port = int(base.rsplit(":", 1)[1])
    first, second = service.issue_social_account(), service.issue_social_account()
    async with (
        HttpProxy() as http_proxy,
        Socks5Proxy(username="alice", password="s3cret") as socks,
        # A new connection per call, so each proxy counts every call it relayed.
        KiroClient(endpoints(base), ClientOptions(idle_timeout_s=2.0, keep_alive=False)) as client,
    ):
        a = account_from(first, http_proxy.url)
        b = account_from(second, socks.url)
        await everything(client, a, first, service)
        through_http = len(http_proxy.targets)
        assert through_http >= 4  # chat, usage, models, refresh
        assert socks.targets == []
        await everything(client, b, second, service)
        assert len(http_proxy.targets) == through_http  # none of b's went through a's proxy
        assert len(socks.targets) >= 4
        assert set(http_proxy.targets) == set(socks.targets) == {("127.0.0.1", port)}
        assert set(socks.offered) == {("alice", "s3cret")}
        # One pool per (account, host, proxy): never one shared across the two.
        keys = {key for key, _ in client._pools}
        assert {key[2] for key in keys if key[0] == a.id} == {http_proxy.url}
        assert {key[2] for key in keys if key[0] == b.id} == {socks.url}


async def test_direct_bypasses_the_global_proxy_and_none_takes_it(
    fake: tuple[FakeKiro, str],
) -> None:
    service, base = fake
    tokens = service.issue_social_account()
    async with (
        HttpProxy() as global_proxy,
        KiroClient(endpoints(base), ClientOptions(proxy_url=global_proxy.url)) as client,
    ):
        await client.usage_limits(account_from(tokens, DIRECT))
        assert global_proxy.targets == []
        await client.usage_limits(account_from(tokens, None))
        assert len(global_proxy.targets) == 1
        async with Socks5Proxy() as own:
            await client.usage_limits(account_from(tokens, own.url))
            assert len(own.targets) == 1
            assert len(global_proxy.targets) == 1


@pytest.mark.parametrize(("scheme", "asked"), [("socks5", "127.0.0.1"), ("socks5h", "localhost")])
async def test_socks5h_lets_the_proxy_resolve_names(
    fake: tuple[FakeKiro, str], scheme: str, asked: str
) -> None:
    service, base = fake
    tokens = service.issue_social_account()
    by_name = base.replace("127.0.0.1", "localhost")
    async with (
        Socks5Proxy() as socks,
        KiroClient(endpoints(by_name), ClientOptions()) as client,
    ):
        url = socks.url.replace("socks5://", f"{scheme}://")
        await client.usage_limits(account_from(tokens, url))
        assert socks.targets[0][0] == asked
        assert socks.names == (["localhost"] if scheme == "socks5h" else [])


async def test_the_http_proxy_tunnels_connect(fake: tuple[FakeKiro, str]) -> None:
    """The CONNECT path (aiohttp's for https targets), driven by hand: the fake is plain HTTP."""
    _, base = fake
    port = int(base.rsplit(":", 1)[1])
    async with HttpProxy(username="u", password="p") as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Proxy-Authorization: Basic dTpw\r\n\r\n".encode()
        )
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /nothing-here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 ")
        assert proxy.targets == [("127.0.0.1", port)]


async def test_closing_the_proxy_shuts_every_connection_it_held(
    fake: tuple[FakeKiro, str],
) -> None:
    """Relays in every state at close (tunnelling, mid-handshake, just accepted) leave no socket
    behind: a leaked one is a ResourceWarning at some later garbage collection, in another test."""
    _, base = fake
    port = int(base.rsplit(":", 1)[1])
    clients = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        proxy = HttpProxy()
        await proxy.start()
        tunnel = await asyncio.open_connection("127.0.0.1", proxy.port)
        tunnel[1].write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert (await tunnel[0].readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        half = await asyncio.open_connection("127.0.0.1", proxy.port)
        half[1].write(b"CONNECT 127.0.0.1")
        await half[1].drain()
        fresh = await asyncio.open_connection("127.0.0.1", proxy.port)
        clients = [tunnel, half, fresh]
        await proxy.close()
        assert not proxy._open_writers
        for reader, writer in clients:
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
            await writer.wait_closed()
        del clients, tunnel, half, fresh
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("turns", range(6))
async def test_a_connection_accepted_as_the_proxy_closes_is_shut_too(turns: int) -> None:
    """A client connects `turns` loop turns before the proxy closes: whichever step of asyncio's
    accept it has reached (the accept, the transport, the protocol's `connection_made`), the
    proxy's close leaves no socket of it behind."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        proxy = HttpProxy()
        await proxy.start()
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        for _ in range(turns):
            await asyncio.sleep(0)
        await proxy.close()
        for _ in range(LATE_TURNS + 2):  # what a late accept would still do
            await asyncio.sleep(0)
        assert not proxy._open_writers
        client.close()
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_a_refusing_or_absent_proxy_is_a_connection_error(
    fake: tuple[FakeKiro, str],
) -> None:
    service, base = fake
    tokens = service.issue_social_account()
    async with (
        Socks5Proxy(username="alice", password="right") as socks,
        HttpProxy(username="bob", password="right") as http_proxy,
        KiroClient(endpoints(base), ClientOptions(connect_timeout_s=2.0)) as client,
    ):
        wrong_socks = socks.url.replace("right", "wrong")
        with pytest.raises(UpstreamConnectionError) as caught:
            await client.usage_limits(account_from(tokens, wrong_socks))
        assert "wrong" not in str(caught.value)
        assert socks.targets == []
        closed = f"socks5://127.0.0.1:{http_proxy.port + 0}"
        account = account_from(tokens, closed.replace(str(http_proxy.port), "1"))
        with pytest.raises(UpstreamConnectionError):
            await client.usage_limits(account)
        # An HTTP proxy's 407 is aiohttp's own error, mapped the same way.
        wrong_http = dataclasses.replace(
            account_from(tokens), proxy_url=http_proxy.url.replace("right", "wrong")
        )
        with pytest.raises(UpstreamConnectionError):
            await client.usage_limits(wrong_http)
        assert http_proxy.targets == []


async def test_a_device_login_goes_through_the_new_accounts_proxy(
    fake: tuple[FakeKiro, str],
) -> None:
    service, base = fake
    service.set_device_flow(DeviceFlow(pending_polls=0, interval_s=1))
    async with (
        HttpProxy() as global_proxy,
        Socks5Proxy() as own,
        # A new connection per call, so the proxy counts every call it relayed.
        KiroClient(
            endpoints(base), ClientOptions(proxy_url=global_proxy.url, keep_alive=False)
        ) as client,
    ):
        started = await login.start(client, proxy_url=own.url)
        assert started.proxy_url == own.url
        credentials = await login.poll(client, started)
        assert credentials is not None
        assert len(own.targets) == 3  # register, device authorization, token
        assert global_proxy.targets == []


# -- https:// proxies and ca_file -----------------------------------------------------------


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path / "tls")


@pytest.fixture
async def https_fake(certs: Certificates) -> AsyncIterator[tuple[FakeKiro, str]]:
    """The fake Kiro behind TLS with the test CA's certificate (as Kiro behind a company CA)."""
    service = FakeKiro()
    runner = web.AppRunner(build_app(service), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_context()).start()
        yield service, f"https://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_an_https_proxy_with_a_company_ca_relays_every_call(
    fake: tuple[FakeKiro, str], certs: Certificates
) -> None:
    """TLS to the proxy itself, verified against `ca_file`; the http target is forwarded inside."""
    service, base = fake
    port = int(base.rsplit(":", 1)[1])
    tokens = service.issue_social_account()
    # A new connection per call, so the proxy counts every call it relayed.
    options = ClientOptions(ca_file=certs.ca_file, idle_timeout_s=2.0, keep_alive=False)
    async with (
        HttpProxy(username="carol", password="s3cret", tls=certs.server_context()) as proxy,
        KiroClient(endpoints(base), options) as client,
    ):
        assert proxy.url.startswith("https://carol:")
        await everything(client, account_from(tokens, proxy.url), tokens, service)
        assert len(proxy.targets) >= 4
        assert set(proxy.targets) == {("127.0.0.1", port)}
        assert set(proxy.offered) == {("carol", "s3cret")}
        assert all(head.startswith((b"GET /", b"POST /")) for head in proxy.seen)
        assert redact_url(proxy.url) == f"https://carol:***@127.0.0.1:{proxy.port}"
        assert "s3cret" not in repr(next(iter(client._pools))[1].route)


@pytest.mark.parametrize("trusted", ["system roots only", "another CA"])
async def test_an_https_proxy_with_an_untrusted_certificate_is_a_connection_error(
    fake: tuple[FakeKiro, str], certs: Certificates, tmp_path: Path, trusted: str
) -> None:
    service, base = fake
    tokens = service.issue_social_account()
    other = make_certificates(tmp_path / "other").ca_file if trusted == "another CA" else None
    async with (
        HttpProxy(username="carol", password="s3cret", tls=certs.server_context()) as proxy,
        KiroClient(endpoints(base), ClientOptions(ca_file=other, connect_timeout_s=2.0)) as client,
    ):
        with pytest.raises(UpstreamConnectionError, match="certificate not trusted") as caught:
            await client.usage_limits(account_from(tokens, proxy.url))
        message = str(caught.value)
        assert "s3cret" not in message
        assert tokens.access_token not in message
        assert proxy.targets == []
        assert proxy.offered == []  # refused before any credential went out


async def test_ca_file_covers_an_https_kiro_direct_and_through_each_proxy_kind(
    https_fake: tuple[FakeKiro, str], certs: Certificates
) -> None:
    """One context for the connector: the target's TLS directly, inside an https proxy's CONNECT
    tunnel (TLS in TLS), and behind a SOCKS5 proxy (aiohttp_socks takes the connector's)."""
    service, base = https_fake
    tokens = service.issue_social_account()
    options = ClientOptions(ca_file=certs.ca_file, idle_timeout_s=2.0)
    async with (
        HttpProxy(tls=certs.server_context()) as https_proxy,
        Socks5Proxy() as socks,
        KiroClient(endpoints(base), options) as client,
    ):
        for proxy_url in (DIRECT, https_proxy.url, socks.url):
            await client.usage_limits(account_from(tokens, proxy_url))
        assert len(https_proxy.targets) == len(socks.targets) == 1
        assert https_proxy.seen[0].startswith(b"\x16\x03")  # a TLS handshake inside the tunnel
    async with KiroClient(endpoints(base), ClientOptions()) as untrusting:
        with pytest.raises(UpstreamConnectionError, match="certificate not trusted"):
            await untrusting.usage_limits(account_from(tokens, DIRECT))
