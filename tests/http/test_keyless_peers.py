"""Who counts as a local program for `ollama_keyless_loopback`: the peer's address and the
`Host` name. Tests bind only to loopback, so a remote peer is judged here, by address."""

from __future__ import annotations

import pytest

from kirod.config.hosts import host_name, loopback_address


@pytest.mark.parametrize(
    ("peer", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # IPv4 on a dual-stack socket
        ("10.0.0.1", False),
        ("192.168.1.5", False),
        ("::ffff:10.0.0.1", False),
        ("fe80::1%eth0", False),
        ("2001:db8::1", False),
        ("localhost", False),  # a peer is an address, never a name
        ("", False),
    ],
)
def test_a_peer_is_local_only_on_a_loopback_address(peer: str, loopback: bool) -> None:
    assert loopback_address(peer) is loopback


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1:5476", "127.0.0.1"),
        ("localhost:5476", "localhost"),
        ("localhost", "localhost"),
        ("[::1]:5476", "::1"),
        ("[::1]", "::1"),
        ("rebound.example:11434", "rebound.example"),
    ],
)
def test_the_host_name_without_its_port(host: str, name: str) -> None:
    assert host_name(host) == name
