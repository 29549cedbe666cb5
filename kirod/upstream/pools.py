"""Upstream connection pools: one per account, host and proxy route, each reused safely.

A pool is an aiohttp session over a connector of its own, so a connection (and the proxy tunnel
it may be) never serves two accounts; credentials travel per call, so a token rotation keeps the
pool. With reuse on (`upstream_keep_alive`, the default) three rules keep it safe:

- An idle connection is not reused once `keep_alive_timeout_s` has passed (aiohttp checks at
  each checkout; its cleanup timer closes it within as long again). Servers and proxies close
  idle connections on timers of their own: an AWS load balancer after 60 s, common proxies after
  30 to 60 s. Reusing a connection near that moment races its close, so the default, 15 s (also
  aiohttp's), stays well under each, while an agent's calls, seconds apart, still find theirs.
- A request whose reused connection is closed or reset before any of its answer arrived is sent
  once more, on a new connection (`Pool.request`). That is the race above: the server closed or
  reset the connection, or shut its side of it, as the request crossed the close on the wire, so
  it never took the request. aiohttp resends an idempotent request once by itself (RFC 9112
  §9.3.1.1) and never a POST, which every chat is; kirod resends a POST on that evidence only,
  never after a new connection failed, and never once a response began: from its first byte on,
  the answer, and the credits it costs, belong to that attempt.
- Bounds: a pool opens at most `POOL_CONNECTIONS` connections at once, and at most
  `max_idle_pools` pools with no request in flight are kept: beyond that the least recently used
  is closed, its idle connections with it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace

import aiohttp
from aiohttp.client import IDEMPOTENT_METHODS

from kirod import log
from kirod.upstream.errors import UpstreamConnectionError
from kirod.upstream.proxies import Route, effective_proxy, route

logger = logging.getLogger(__name__)

KEEP_ALIVE_TIMEOUT_S = 15.0
POOL_CONNECTIONS = 16
"""Connections one pool opens at once. An account runs at most 10 chats at a time (the maximum of
`account_inference_concurrency`) besides its usage, model and token calls, so none waits here in
practice; a request beyond it waits for a connection instead of opening one more."""
MAX_IDLE_POOLS = 32
ONE_WRITE_MAX_BYTES = 2**20  # aiohttp's TOO_LARGE_BYTES_BODY

# What a connection the server had already given up on raises from `session.request`: it closed
# (ServerDisconnectedError) or reset (ClientOSError) it, or the transport was found closing as the
# request was written (ClientConnectionResetError). aiohttp resends idempotent requests on the
# first two.
_STALE = (
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientConnectionResetError,
)

PoolKey = tuple[str, str, str | None]
"""(owner: an account's id, or a login's; base URL; effective proxy URL or None)."""


def _body(data: bytes | None) -> bytes | io.BytesIO | None:
    """Bytes go out in one write; above aiohttp's limit for that, a file-like body is streamed in
    chunks instead (aiohttp warns that one large write can hold the loop)."""
    if data is None or len(data) <= ONE_WRITE_MAX_BYTES:
        return data
    return io.BytesIO(data)


class _Attempt:
    """What aiohttp's tracing says of one request (its `trace_request_ctx`)."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


async def _on_reuse(
    session: aiohttp.ClientSession,
    context: SimpleNamespace,
    params: aiohttp.TraceConnectionReuseconnParams,
) -> None:
    attempt = context.trace_request_ctx
    if isinstance(attempt, _Attempt):
        attempt.reused = True


def _resendable(method: str, exc: Exception, attempt: _Attempt) -> bool:
    """May `method` go again on a new connection after `exc` (one of `_STALE`)?

    Only if its connection came from the pool: a new connection failing is the network, for the
    dispatch pipeline to judge. `session.request` raising means no complete response head
    arrived. A reset after part of a head would pass for none (aiohttp counts no bytes received);
    that takes a server resetting in the middle of writing its head, which it writes whole.
    """
    if not attempt.reused or method in IDEMPOTENT_METHODS:  # aiohttp resent those already
        return False
    return not isinstance(exc, aiohttp.ClientConnectorError)


class Pool:
    """One account's connections to one host through one route, and its requests in flight."""

    def __init__(
        self,
        route: Route,
        session: aiohttp.ClientSession,
        fresh: Callable[[], aiohttp.ClientSession],
    ) -> None:
        self.route = route
        self.session = session
        self.active = 0
        self._new_fresh = fresh
        self._fresh: aiohttp.ClientSession | None = None  # never reuses: where resends go

    @property
    def closed(self) -> bool:
        return self.session.closed

    async def request(
        self, method: str, url: str, *, headers: Mapping[str, str], data: bytes | None
    ) -> aiohttp.ClientResponse:
        """Send one request and return its response once the head arrived (aiohttp's errors
        propagate); resent once on a new connection when its reused one was stale."""
        attempt = _Attempt()
        try:
            return await self.session.request(
                method,
                url,
                headers=headers,
                data=_body(data),
                proxy=self.route.request_proxy,
                trace_request_ctx=attempt,
            )
        except _STALE as exc:
            if not _resendable(method, exc, attempt):
                raise
            log.event(logger, "upstream_connection_stale", error=type(exc).__name__)
        if self._fresh is None:
            self._fresh = self._new_fresh()
        return await self._fresh.request(
            method, url, headers=headers, data=_body(data), proxy=self.route.request_proxy
        )

    async def close(self) -> None:
        await self.session.close()
        if self._fresh is not None:
            await self._fresh.close()


class Pools:
    """Every pool of one client, by `PoolKey`, least recently used first."""

    def __init__(
        self,
        *,
        proxy_url: str | None,
        keep_alive: bool,
        keep_alive_timeout_s: float = KEEP_ALIVE_TIMEOUT_S,
        max_idle_pools: int = MAX_IDLE_POOLS,
        ca_file: Path | None,
        timeout: aiohttp.ClientTimeout,
    ) -> None:
        self._proxy_url = proxy_url
        self._keep_alive = keep_alive
        self._keep_alive_timeout_s = keep_alive_timeout_s
        self._max_idle_pools = max_idle_pools
        self._ca_file = ca_file
        self._timeout = timeout
        self._pools: collections.OrderedDict[PoolKey, Pool] = collections.OrderedDict()
        self._tls: ssl.SSLContext | None = None
        self._trace: aiohttp.TraceConfig | None = None
        if keep_alive:
            # Tracing only tells `Pool.request` whether a connection came from the pool.
            self._trace = aiohttp.TraceConfig()
            self._trace.on_connection_reuseconn.append(_on_reuse)

    def __iter__(self) -> Iterator[tuple[PoolKey, Pool]]:
        return iter(list(self._pools.items()))

    @contextlib.asynccontextmanager
    async def lease(self, owner: str, base_url: str, proxy_url: str | None) -> AsyncIterator[Pool]:
        """The pool of `owner` to `base_url` through its proxy (`UpstreamAccount.proxy_url`: None
        for the global one, `direct` for none), counted in flight until the block exits."""
        path = route(effective_proxy(proxy_url, self._proxy_url))
        key = (owner, base_url, path.proxy)
        pool = self._pools.get(key)
        if pool is None or pool.closed:
            fresh = functools.partial(self.session, path, reuse=False)
            pool = Pool(path, self.session(path, reuse=self._keep_alive), fresh)
            self._pools[key] = pool
        else:
            self._pools.move_to_end(key)
        pool.active += 1
        try:
            yield pool
        finally:
            pool.active -= 1
            await self._trim()

    async def _trim(self) -> None:
        """Close the least recently used idle pools beyond `max_idle_pools`."""
        if len(self._pools) <= self._max_idle_pools:
            return
        idle = [key for key, pool in self._pools.items() if pool.active == 0]
        # All out of the table before the first await: a lease meanwhile makes a new pool.
        closing = [self._pools.pop(key) for key in idle[: len(idle) - self._max_idle_pools]]
        for pool in closing:
            await pool.close()

    async def forget(self, owner: str) -> None:
        """Close every pool of `owner` (a removed account), through every proxy it used."""
        closing = [self._pools.pop(key) for key in list(self._pools) if key[0] == owner]
        for pool in closing:
            await pool.close()

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), collections.OrderedDict()
        for pool in pools:
            await pool.close()

    def session(self, path: Route, *, reuse: bool) -> aiohttp.ClientSession:
        """A new session for `path`: kept-alive connections, or one connection per request."""
        keeping = {"keepalive_timeout": self._keep_alive_timeout_s} if reuse else {}
        connector = path.connector(
            force_close=not reuse, limit=POOL_CONNECTIONS, ssl=self._tls_context(), **keeping
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            trust_env=False,
            trace_configs=[self._trace] if reuse and self._trace is not None else None,
        )

    def _tls_context(self) -> ssl.SSLContext | bool:
        """The connector's `ssl`: True (aiohttp's default, the system's roots) or, with a
        `ca_file`, one context for every session. aiohttp verifies an https proxy's certificate
        with the connector's context too, and aiohttp_socks the target's behind a SOCKS proxy."""
        if self._ca_file is None:
            return True
        if self._tls is None:
            context = ssl.create_default_context()  # the system's roots still apply
            try:
                context.load_verify_locations(cafile=self._ca_file)
            except OSError as exc:  # ssl.SSLError too; the settings checked it at start
                raise UpstreamConnectionError(
                    f"cannot load ca_file {str(self._ca_file)!r}: {type(exc).__name__}"
                ) from None
            context.set_alpn_protocols(["http/1.1"])  # as aiohttp's own contexts
            self._tls = context
        return self._tls
