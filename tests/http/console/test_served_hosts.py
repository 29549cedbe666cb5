"""Where the console is served, and which `Host` values it answers to: loopback by default, a
remote bind only with console_remote, never with console off; the link names a reachable
address."""

from __future__ import annotations

from pathlib import Path

import pytest

from kirod.config import Settings, load_settings
from kirod.http.console.app import link, loopback_hosts, served_hosts
from kirod.http.console.sessions import ConsoleSessions

LOOPBACK = {"127.0.0.1:5476", "localhost:5476", "[::1]:5476"}


def settings(tmp_path: Path, **env: str) -> Settings:
    base = {"HOME": str(tmp_path / "home")}  # no config file there
    return load_settings(
        env=base | {f"KIROD_{k.upper()}": v for k, v in env.items()}, platform="linux"
    )


def test_loopback_serves_the_console_on_loopback_names_only(tmp_path: Path) -> None:
    assert served_hosts(settings(tmp_path), 5476) == LOOPBACK
    assert served_hosts(settings(tmp_path, host="::1"), 5476) == LOOPBACK


def test_the_default_port_80_also_answers_without_a_port() -> None:
    assert {"127.0.0.1", "localhost", "[::1]"} <= loopback_hosts(80)
    assert "127.0.0.1" not in loopback_hosts(8080)


def test_a_remote_bind_serves_no_console_unless_asked(tmp_path: Path) -> None:
    remote = settings(tmp_path, host="192.0.2.10", allow_remote="true")
    assert served_hosts(remote, 5476) is None
    both = settings(tmp_path, host="192.0.2.10", allow_remote="true", console_remote="true")
    assert served_hosts(both, 5476) == LOOPBACK | {"192.0.2.10:5476"}


def test_console_off_serves_none_anywhere(tmp_path: Path) -> None:
    assert served_hosts(settings(tmp_path, console="false"), 5476) is None


@pytest.mark.parametrize(
    ("host", "start"),
    [
        ("127.0.0.1", "http://127.0.0.1:5476/console/#t="),
        ("::1", "http://[::1]:5476/console/#t="),
        ("localhost", "http://localhost:5476/console/#t="),
        ("0.0.0.0", "http://127.0.0.1:5476/console/#t="),
    ],
)
def test_the_link_names_an_address_of_the_listener(tmp_path: Path, host: str, start: str) -> None:
    extra = {"allow_remote": "true", "console_remote": "true"} if host == "0.0.0.0" else {}
    mint = link(ConsoleSessions(60), settings(tmp_path, host=host, **extra), 5476)
    made = mint()
    assert made.url.startswith(start)
    assert made.expires_in_s == 60
    assert mint().url != made.url
