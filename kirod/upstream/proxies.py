"""Per-account proxies: which proxy an account's traffic takes, and how a transport reaches it.

An account's `proxy_url` is None (use the global `proxy_url` setting, if any), `direct` (no
proxy even when a global one is set), or a proxy URL: `http://` and `https://` proxies go through
aiohttp's own proxy support (a plain forward for http targets, CONNECT for https ones);
`socks5://` (names resolved locally) and `socks5h://` (names resolved by the proxy) go through an
`aiohttp_socks.ProxyConnector`. Precedence: account > global > none.

A proxy URL may carry credentials; `kirod.log.redact_url` is how it is ever shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
from aiohttp_socks import ProxyConnector, ProxyType

from kirod.log import redact_url

DIRECT = "direct"
HTTP_SCHEMES = ("http", "https")
SOCKS_SCHEMES = ("socks5", "socks5h")
SCHEMES = HTTP_SCHEMES + SOCKS_SCHEMES
MAX_URL_CHARS = 2048


class ProxyUrlError(ValueError):
    """A proxy URL kirod cannot use; the message says why and never repeats a password."""


def check_proxy_url(value: str) -> str:
    """`value` as stored: `direct`, or a proxy URL with a known scheme, a host and a port.

    Raises `ProxyUrlError` otherwise.
    """
    text = value.strip()
    if text.lower() == DIRECT:
        return DIRECT
    if not text or len(text) > MAX_URL_CHARS or any(c <= " " or c == "\x7f" for c in text):
        raise ProxyUrlError("a proxy URL must be one line without spaces, at most 2048 characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProxyUrlError(
            f"{redact_url(text)!s} is not a valid URL (is the port a number from 1 to 65535?)"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ProxyUrlError(
            f"proxy scheme {scheme or '(none)'!r} is not supported; use one of "
            + ", ".join(f"{name}://" for name in SCHEMES)
            + " or 'direct'"
        )
    if not parts.hostname:
        raise ProxyUrlError("a proxy URL needs a host, e.g. http://proxy.example:3128")
    if port is None or port == 0:
        raise ProxyUrlError(f"a proxy URL needs a port, e.g. {scheme}://{parts.hostname}:1080")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ProxyUrlError("a proxy URL has no path, query or fragment: scheme://host:port")
    return text.rstrip("/")


def effective_proxy(account_proxy: str | None, global_proxy: str | None) -> str | None:
    """The proxy URL an account's traffic takes; None: straight to the host."""
    if account_proxy == DIRECT:
        return None
    return account_proxy or global_proxy or None


@dataclass(frozen=True)
class Route:
    """How one transport reaches the network: `request_proxy` goes on each request (aiohttp's
    http(s) proxies); a SOCKS proxy lives in the connector instead."""

    # the effective proxy URL (the transport's cache key); out of repr: it may hold a password
    proxy: str | None = field(repr=False)
    request_proxy: str | None = field(repr=False)
    socks: bool

    def connector(self, **options: Any) -> aiohttp.TCPConnector:
        """A new connector for one session, with `options` (TCPConnector's)."""
        if not self.socks or self.proxy is None:
            return aiohttp.TCPConnector(**options)
        parts = urlsplit(self.proxy)
        # check_proxy_url made sure of both
        assert parts.hostname is not None
        assert parts.port is not None
        return ProxyConnector(
            host=parts.hostname,
            port=parts.port,
            proxy_type=ProxyType.SOCKS5,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            rdns=parts.scheme.lower() == "socks5h",
            **options,
        )


def route(proxy: str | None) -> Route:
    """The route for an effective proxy URL (see `effective_proxy`)."""
    if proxy is None:
        return Route(proxy=None, request_proxy=None, socks=False)
    socks = urlsplit(proxy).scheme.lower() in SOCKS_SCHEMES
    return Route(proxy=proxy, request_proxy=None if socks else proxy, socks=socks)
