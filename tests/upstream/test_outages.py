"""`Outages`: a connection no route to a host makes is the machine's; one that fails while
another route to the host connects is the route's own; the first connection clears it."""

from __future__ import annotations

from kirod.report_types.status import Outage
from kirod.upstream.outages import Outages

HOST = "q.us-east-1.amazonaws.com"
PROXY = "http://127.0.0.1:3128"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_route_failing_is_the_machines_until_it_connects() -> None:
    clock = Clock()
    outages = Outages(clock)
    assert outages.failed(HOST, None, "ClientConnectorDNSError: Name or service not known")
    clock.now += 5
    assert outages.failed(HOST, None, "ClientConnectorError: Connection refused")
    # The outage keeps its first moment and words.
    assert outages.current() == (
        Outage(HOST, 1000.0, "ClientConnectorDNSError: Name or service not known"),
    )
    outages.connected(HOST, None)
    assert outages.current() == ()


def test_a_route_that_was_connecting_fails_alone_while_another_connects() -> None:
    outages = Outages(Clock())
    outages.connected(HOST, None)
    outages.connected(HOST, PROXY)
    assert not outages.failed(HOST, PROXY, "proxy ProxyConnectionError")
    assert outages.current() == ()
    # The direct route fails too: no route is known to connect any more.
    assert outages.failed(HOST, None, "ClientConnectorError: Connection refused")
    assert [outage.host for outage in outages.current()] == [HOST]
    # The proxy connecting again clears it.
    outages.connected(HOST, PROXY)
    assert outages.current() == ()


def test_hosts_are_told_apart() -> None:
    outages = Outages(Clock())
    outages.connected("oidc.us-east-1.amazonaws.com", None)
    assert outages.failed(HOST, None, "ClientConnectorError: Connection refused")
    assert [outage.host for outage in outages.current()] == [HOST]
