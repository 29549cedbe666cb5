"""Which `Host` values the public API answers to (`kirod.config.hosts.ApiHosts`): loopback names
on any port, the listen address, an IP literal the connection reached, `allowed_hosts`; never a
rebound name. The daemon's own answers are in tests/integration/test_host_check.py."""

from __future__ import annotations

import pytest

from kirod.config.hosts import ApiHosts

DEFAULT = ApiHosts("127.0.0.1")


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:5476",
        "127.0.0.1",
        "localhost:5476",
        "localhost",
        "LocalHost:5476",
        "[::1]:5476",
        "[::1]",
        "127.0.0.1:9000",  # an SSH tunnel or a port mapping changes the port, not the name
        "127.8.9.10:5476",
    ],
)
def test_loopback_names_pass_by_default(host: str) -> None:
    assert DEFAULT.admits(host, "127.0.0.1")


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:5476",
        "evil.example",
        "localhost.evil.example:5476",
        "127.0.0.1.nip.io:5476",
        "localhost.:5476",
        "host.docker.internal:5476",
        "192.0.2.10:5476",  # an address this connection did not reach
        "",
        "127.0.0.1:5476:5476",
    ],
)
def test_any_other_name_is_refused_by_default(host: str) -> None:
    assert not DEFAULT.admits(host, "127.0.0.1")


def test_no_host_header_passes() -> None:
    assert DEFAULT.admits(None, "127.0.0.1")


def test_the_listen_address_passes() -> None:
    remote = ApiHosts("192.0.2.10")
    assert remote.admits("192.0.2.10:5476", "192.0.2.10")
    assert ApiHosts("2001:db8::5").admits("[2001:DB8::5]:5476")
    assert ApiHosts("kirod.lan").admits("KIROD.lan:5476")
    assert not remote.admits("evil.example:5476", "192.0.2.10")


def test_a_wildcard_bind_passes_the_address_each_connection_reached() -> None:
    wildcard = ApiHosts("0.0.0.0")
    assert wildcard.admits("192.168.1.5:5476", "192.168.1.5")
    assert wildcard.admits("192.168.1.5:5476", "::ffff:192.168.1.5")  # a dual-stack socket
    assert wildcard.admits("[fd00::7]:5476", "fd00::7")
    assert not wildcard.admits("192.168.1.6:5476", "192.168.1.5")
    assert not wildcard.admits("myhost.lan:5476", "192.168.1.5")  # names need allowed_hosts


def test_allowed_hosts_pass_on_any_port() -> None:
    allowed = ApiHosts("127.0.0.1", ("host.docker.internal", "Kirod.Example:80", "[fd00::2]"))
    assert allowed.admits("host.docker.internal:5476")
    assert allowed.admits("host.docker.internal")
    assert allowed.admits("kirod.example:8080")
    assert allowed.admits("[fd00::2]:5476")
    assert allowed.admits("localhost:5476")
    assert not allowed.admits("docker.internal:5476")


def test_a_star_turns_the_check_off() -> None:
    assert ApiHosts("127.0.0.1", ("*",)).admits("anything.example:1")
