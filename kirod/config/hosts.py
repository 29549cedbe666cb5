"""Host names: which are loopback, how a `Host` header splits, and which `Host` values the public
listener answers to.

Checking `Host` defeats DNS rebinding: a page on evil.example whose name was rebound to 127.0.0.1
reaches the listener, but its requests still say `Host: evil.example`. Two rules use the helpers
here:

- the console (`kirod.http.console.app.served_hosts`) answers only to the loopback names with the
  listener's own port, plus its bound address with `console_remote`: its session cookie is per
  port, and its `Origin` check compares with `Host`;
- the API (`ApiHosts`, checked by `kirod.http.hosts`) answers to a loopback name on any port (an
  SSH tunnel or a container's port mapping changes the port, and no rebinding page can name
  loopback), to the address it was bound to, to the local address a connection reached by IP (a
  wildcard bind: an IP literal is no rebinding either), and to the names `allowed_hosts` lists.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
ANY_HOST: Final = "*"


def is_loopback(host: str) -> bool:
    """Whether a host name or address (`[::1]` too) is this machine's loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_address(host: str) -> bool:
    """Whether a peer's address is loopback (an IPv4 one mapped on a dual-stack socket too)."""
    address = _address(host)
    return address is not None and address.is_loopback


def host_name(host: str) -> str:
    """The name in a `Host` value, without its port (`[::1]:5476` → `::1`)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def url_host(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host.strip('[]')}]" if ":" in host else host


def loopback_hosts(port: int) -> frozenset[str]:
    """The `Host` values a browser sends for this listener on loopback."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES) | (
        frozenset(LOOPBACK_NAMES) if port == 80 else frozenset()
    )


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class ApiHosts:
    """The `Host` values the public API answers to: see the module's docstring.

    `listen_host` is the `host` setting; `allowed` the `allowed_hosts` setting, names with or
    without a port (ports are never compared), or `*` for any.
    """

    __slots__ = ("_any", "_names")

    def __init__(self, listen_host: str, allowed: Iterable[str] = ()) -> None:
        listed = tuple(allowed)
        self._any = ANY_HOST in listed
        names = (host_name(name).lower() for name in (listen_host, *listed))
        self._names = frozenset(name for name in names if name)

    def admits(self, host: str | None, local_address: str | None = None) -> bool:
        """Whether a request naming `host` (None: no `Host` header, which no browser sends) on a
        connection to `local_address` is answered."""
        if host is None or self._any:
            return True
        name = host_name(host).lower()
        if name in self._names or is_loopback(name):
            return True
        if local_address is None:
            return False
        named = _address(name)
        return named is not None and named == _address(local_address)
