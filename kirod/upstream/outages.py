"""Kiro's hosts this machine cannot reach: one condition of the machine, not a fault of each
account (docs/RELIABILITY.md, "Network outages").

A connection to a host goes through a route: direct, or a proxy (the global one, or an account's
own). When a connection cannot be made at all (DNS, refused, TLS to the host, the proxy down) and
no other route to that host is known to connect, the machine cannot reach Kiro: the failure is
`Failure.UNREACHABLE`, which rests no account, and the host is down until the first connection to
it succeeds, whichever account or route makes it. When another route to the host does connect,
the failing route is an account's own (its proxy is down): `Failure.NETWORK`, which the breaker
counts against that account.

A route is "known to connect" from its last connection that succeeded until one through it fails:
at start nothing is known, so a first failure is the machine's until some route proves otherwise.
The request path pays a dict lookup and a set membership test per upstream request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kirod import log
from kirod.report_types.status import Outage

logger = logging.getLogger(__name__)

RouteKey = str | None
"""A route to a host: the effective proxy URL, None for direct (kept in memory, never shown)."""


class Outages:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._connecting: dict[str, set[RouteKey]] = {}  # host → routes known to connect
        self._down: dict[str, Outage] = {}  # host → since when no route to it connects

    def connected(self, host: str, route: RouteKey) -> None:
        """A connection to `host` through `route` was made (any answer, even an error status)."""
        routes = self._connecting.get(host)
        if routes is None:
            self._connecting[host] = {route}
        elif route not in routes:
            routes.add(route)
        if self._down and (outage := self._down.pop(host, None)) is not None:
            log.event(
                logger,
                "kiro_reachable",
                host=host,
                down_s=round(self._clock() - outage.since, 1),
            )

    def failed(self, host: str, route: RouteKey, detail: str) -> bool:
        """No connection to `host` through `route` could be made. True: the machine's (no other
        route to the host is known to connect), and the host is down; False: the route's own."""
        routes = self._connecting.get(host)
        if routes:
            routes.discard(route)
            if routes:
                return False
        if host not in self._down:
            self._down[host] = Outage(host=host, since=self._clock(), detail=detail)
            log.event(logger, "kiro_unreachable", level=logging.WARNING, host=host, detail=detail)
        return True

    def current(self) -> tuple[Outage, ...]:
        """The hosts down now, the longest down first."""
        return tuple(sorted(self._down.values(), key=lambda outage: outage.since))
