"""Whether a Kiro endpoint answers from here, step by step (`kiroctl doctor`): the name resolves,
a connection opens (through the account's proxy), TLS verifies, and an HTTP answer comes.

One GET of the endpoint's base URL, without credentials: any HTTP status means Kiro answered.
Bounded by `timeout_s` in all. Each failure is a sentence naming the step and what to do; never a
proxy's credentials.
"""

from __future__ import annotations

import asyncio
import socket
import time
from urllib.parse import urlsplit

import aiohttp
import aiohttp_socks

from kirod.report_types import Reach
from kirod.upstream.client import KiroClient

PROXY_AUTH = 407  # Proxy Authentication Required


def _proxy_shown(proxy: str | None) -> str | None:
    """scheme://host:port of the proxy, without its user part."""
    if proxy is None:
        return None
    parts = urlsplit(proxy)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}" if parts.hostname else "***"


async def reach(
    client: KiroClient,
    *,
    target: str,
    region: str,
    url: str,
    proxy_url: str | None,
    accounts: int,
    timeout_s: float,
) -> Reach:
    """Check `url` as an account with `proxy_url` (None: the global proxy; `direct`) reaches it."""
    started = time.monotonic()
    path, session = client.one_off(proxy_url)
    shown = _proxy_shown(path.proxy)

    def done(status: int | None = None, failed_at: str | None = None, error: str = "") -> Reach:
        return Reach(
            target=target,
            region=region,
            url=url,
            proxy=shown,
            accounts=accounts,
            ok=failed_at is None,
            ms=round((time.monotonic() - started) * 1000, 1),
            status=status,
            failed_at=failed_at,
            error=error or None,
        )

    via = f" through the proxy {shown}" if shown else ""
    parts = urlsplit(url)
    # Through a proxy the proxy resolves Kiro's name; kirod resolves the proxy's.
    proxy_parts = urlsplit(path.proxy) if path.proxy else None
    name = (proxy_parts or parts).hostname or ""
    port = (proxy_parts or parts).port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(timeout_s):
            try:
                await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                what = "the proxy's name" if proxy_parts else "Kiro's name"
                return done(
                    failed_at="dns",
                    error=f"{what} {name} does not resolve ({exc.strerror}): check your DNS "
                    "or network",
                )
            async with session.get(
                url, proxy=path.request_proxy, allow_redirects=False
            ) as response:
                if response.status == PROXY_AUTH and path.request_proxy:
                    # The proxy's answer, not Kiro's: an http:// target is not tunnelled.
                    return done(
                        failed_at="proxy",
                        error=f"the proxy {shown} refused the credentials it was given "
                        f"({PROXY_AUTH}): check the user and password in its URL",
                    )
                return done(status=response.status)
    except TimeoutError:
        return done(
            failed_at="timeout",
            error=f"no answer from {parts.hostname}{via} within {timeout_s:g} s: a firewall or "
            "a proxy may be holding the connection",
        )
    except aiohttp.ClientHttpProxyError as exc:
        return done(
            failed_at="proxy",
            error=f"the proxy {shown} refused the tunnel ({exc.status}): check the user and "
            "password in its URL, and that it allows Kiro's host",
        )
    except (aiohttp.ClientProxyConnectionError, aiohttp_socks.ProxyConnectionError):
        return done(
            failed_at="proxy",
            error=f"cannot connect to the proxy {shown}: is it running? (proxy_url)",
        )
    except aiohttp_socks.ProxyError as exc:
        return done(
            failed_at="proxy",
            error=f"the proxy {shown} refused the connection ({type(exc).__name__}): check "
            "its address and credentials",
        )
    except aiohttp.ClientConnectorCertificateError:
        return done(
            failed_at="tls",
            error=f"{parts.hostname}'s TLS certificate is not trusted{via}: a company CA goes "
            "in ca_file",
        )
    except aiohttp.ClientSSLError as exc:
        return done(failed_at="tls", error=f"TLS with {parts.hostname} failed{via}: {exc.strerror}")
    except aiohttp.ClientConnectorError as exc:
        return done(
            failed_at="connect",
            error=f"cannot connect to {parts.hostname}{via} ({exc.strerror}): check your "
            "network, firewall or proxy_url",
        )
    except aiohttp.ClientError as exc:
        return done(
            failed_at="http", error=f"{parts.hostname} answered badly{via}: {type(exc).__name__}"
        )
    finally:
        await session.close()
