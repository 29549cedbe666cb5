"""Where kiroctl looks: the control socket, other tools' credential files, the service file."""

from __future__ import annotations

from pathlib import Path

from kirod.paths import client_socket_path, credential_files, service_file


def test_the_socket_follows_the_daemons_precedence(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/7", "XDG_CONFIG_HOME": str(tmp_path)}
    assert client_socket_path(env, "linux") == Path("/run/user/7/kirod/kirod.sock")
    config = tmp_path / "kirod" / "config.toml"
    config.parent.mkdir()
    config.write_text('socket_path = "/srv/kirod.sock"\n')
    assert client_socket_path(env, "linux") == Path("/srv/kirod.sock")
    other = tmp_path / "other.toml"
    other.write_text('socket_path = "~/k.sock"\n')
    assert client_socket_path({**env, "KIROD_CONFIG": str(other), "HOME": "/h"}, "linux") == (
        Path("~/k.sock").expanduser()
    )
    explicit = {**env, "KIROD_SOCKET_PATH": "/tmp/x.sock"}
    assert client_socket_path(explicit, "linux") == Path("/tmp/x.sock")
    config.write_text("not toml [")
    assert client_socket_path(env, "linux") == Path("/run/user/7/kirod/kirod.sock")


def test_credential_files() -> None:
    home = Path("/home/u")
    linux = credential_files(home, platform="linux")
    assert linux["kiro-ide"] == home / ".aws/sso/cache/kiro-auth-token.json"
    assert linux["kiro-ide-registrations"] == home / ".aws/sso/cache"
    assert linux["kiro-cli"] == home / ".local/share/kiro-cli/data.sqlite3"
    assert linux["opencode-kiro-auth"] == home / ".config/opencode/kiro.db"
    assert linux["opencode-kiro-auth-legacy"] == home / ".config/opencode/kiro-accounts.json"

    mac = credential_files(home, platform="darwin")
    assert mac["kiro-cli"] == home / "Library/Application Support/kiro-cli/data.sqlite3"
    assert mac["kiro-ide"] == linux["kiro-ide"]
    assert mac["opencode-kiro-auth"] == linux["opencode-kiro-auth"]


def test_service_files() -> None:
    assert service_file({"HOME": "/h"}, "linux") == Path("/h/.config/systemd/user/kirod.service")
    assert service_file({"XDG_CONFIG_HOME": "/c"}, "linux") == Path("/c/systemd/user/kirod.service")
    assert service_file({"HOME": "/Users/me"}, "darwin") == Path(
        "/Users/me/Library/LaunchAgents/dev.kirod.plist"
    )
