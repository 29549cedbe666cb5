"""`kiroctl doctor`'s reachability check (kirod.upstream.reach) against real loopback servers:
the fake Kiro in the clear and behind TLS, real proxies, a port nothing listens on. Each failure
names its step and what to do, and never a proxy's password."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kirod.report_types import Reach
from kirod.testing.fake_kiro import FakeKiro
from kirod.testing.fake_kiro.server import build_app
from kirod.testing.proxies import HttpProxy, Socks5Proxy
from kirod.testing.tls import Certificates, make_certificates
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient
from kirod.upstream.reach import reach

PASSWORD = "reach-secret-77"


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path / "tls")


@pytest.fixture
async def kiro(certs: Certificates) -> AsyncIterator[dict[str, str]]:
    """The fake Kiro in the clear and behind TLS with the test CA's certificate."""
    runners = []
    urls = {}
    for name, context in (("http", None), ("https", certs.server_context())):
        runner = web.AppRunner(build_app(FakeKiro()), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
        urls[name] = f"{name}://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield urls
    finally:
        for runner in runners:
            await runner.cleanup()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def check(
    url: str,
    account_proxy: str | None = None,
    *,
    proxy_url: str | None = None,
    ca_file: Path | None = None,
    timeout_s: float = 3.0,
) -> Reach:
    """`url` checked as an account with `account_proxy`; `proxy_url` is the global setting."""
    options = ClientOptions(proxy_url=proxy_url, ca_file=ca_file)
    async with KiroClient(Endpoints(url, url, url), options) as client:
        return await reach(
            client,
            target="kiro",
            region="us-east-1",
            url=url,
            proxy_url=account_proxy,
            accounts=1,
            timeout_s=timeout_s,
        )


async def test_kiro_in_the_clear_answers(kiro: dict[str, str]) -> None:
    result = await check(kiro["http"])
    assert (result.ok, result.failed_at, result.proxy) == (True, None, None)
    assert result.status is not None


async def test_an_untrusted_certificate_says_where_a_company_ca_goes(
    kiro: dict[str, str], certs: Certificates
) -> None:
    refused = await check(kiro["https"])
    assert (refused.ok, refused.failed_at) == (False, "tls")
    assert (
        refused.error == "127.0.0.1's TLS certificate is not trusted: a company CA goes in ca_file"
    )
    trusted = await check(kiro["https"], ca_file=certs.ca_file)
    assert trusted.ok, trusted.error


async def test_nothing_listening_is_a_connection_failure(kiro: dict[str, str]) -> None:
    result = await check(f"http://127.0.0.1:{free_port()}")
    assert (result.ok, result.failed_at) == (False, "connect")
    assert result.error is not None
    assert result.error.startswith("cannot connect to 127.0.0.1 (")


@pytest.mark.parametrize("kind", ["http", "socks5"])
async def test_through_a_proxy_with_a_password_it_answers_and_never_shows_it(
    kiro: dict[str, str], kind: str
) -> None:
    made = HttpProxy if kind == "http" else Socks5Proxy
    async with made(username="dora", password=PASSWORD) as proxy:
        result = await check(kiro["http"], proxy.url)
        assert result.ok, result.error
        shown = f"{kind}://127.0.0.1:{proxy.port}"
        assert result.proxy == shown
        assert proxy.targets  # it went through the proxy
        wrong = proxy.url.replace(PASSWORD, "wrong")
        refused = await check(kiro["http"], wrong)
    assert (refused.ok, refused.failed_at) == (False, "proxy")
    expected = {
        "http": f"the proxy {shown} refused the credentials it was given (407): check the user "
        "and password in its URL",
        "socks5": f"the proxy {shown} refused the connection (ProxyError): check its address "
        "and credentials",
    }
    assert refused.error == expected[kind]
    assert "wrong" not in repr(refused)
    assert PASSWORD not in repr(result)


async def test_the_global_proxy_applies_and_direct_skips_it(kiro: dict[str, str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    through = await check(kiro["http"], proxy_url=dead)
    assert (through.ok, through.failed_at, through.proxy) == (False, "proxy", dead)
    assert through.error == f"cannot connect to the proxy {dead}: is it running? (proxy_url)"
    direct = await check(kiro["http"], "direct", proxy_url=dead)
    assert (direct.ok, direct.proxy) == (True, None)


async def test_a_silent_endpoint_is_a_timeout_within_the_bound() -> None:
    with socket.socket() as silent:  # the kernel accepts; nothing ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        result = await check(f"http://127.0.0.1:{port}", timeout_s=0.5)
    assert (result.ok, result.failed_at) == (False, "timeout")
    assert result.error == (
        "no answer from 127.0.0.1 within 0.5 s: a firewall or a proxy may be holding the connection"
    )
    assert result.ms < 2000
