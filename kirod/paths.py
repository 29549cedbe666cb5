"""Default locations for configuration, state and the control socket.

Linux follows the XDG base directory spec. macOS keeps config and state under
`~/Library/Application Support/kirod` unless XDG variables are set explicitly, and puts the
socket under the per-user `$TMPDIR`. Every function takes the environment as an argument so that
callers (and tests) decide which environment is meant; only this module and `config` read it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP = "kirod"
CONFIG_FILE = "config.toml"
API_KEY_FILE = "api-key"
LOCK_FILE = "kirod.lock"
DATABASE_FILE = "kirod.db"
SOCKET_FILE = "kirod.sock"
INSTALL_KEY_FILE = "install.key"
SYSTEMD_UNIT = "kirod.service"
LAUNCHD_LABEL = "dev.kirod"
SOCKET_ENV = "KIROD_SOCKET_PATH"
CONFIG_ENV = "KIROD_CONFIG"


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _is_macos(platform: str) -> bool:
    return platform == "darwin"


def config_dir(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg) / APP
    if _is_macos(platform):
        return _home(env) / "Library" / "Application Support" / APP
    return _home(env) / ".config" / APP


def state_dir(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    xdg = env.get("XDG_STATE_HOME")
    if xdg:
        return Path(xdg) / APP
    if _is_macos(platform):
        return _home(env) / "Library" / "Application Support" / APP
    return _home(env) / ".local" / "state" / APP


def socket_path(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """`$XDG_RUNTIME_DIR/kirod/kirod.sock`; without a runtime dir, a private per-user place.

    The fallback never uses a shared directory such as /tmp directly, where another user could
    create the path first: on macOS `$TMPDIR` is already per-user, elsewhere the state dir is.
    """
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / APP / SOCKET_FILE
    if _is_macos(platform) and env.get("TMPDIR"):
        return Path(env["TMPDIR"]) / APP / SOCKET_FILE
    return state_dir(env, platform) / "run" / SOCKET_FILE


def config_file(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    return config_dir(env, platform) / CONFIG_FILE


def service_file(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """Where `kiroctl service install` puts the per-user service: a launchd agent on macOS, a
    systemd user unit elsewhere."""
    if _is_macos(platform):
        return _home(env) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    xdg = env.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else _home(env) / ".config"
    return base / "systemd" / "user" / SYSTEMD_UNIT


def client_socket_path(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Path:
    """Where kiroctl finds the control socket: the daemon's own precedence, minus its flags.

    `KIROD_SOCKET_PATH`, then `socket_path` in the config file, then the default. A config file
    that cannot be read is the daemon's to report; here it only means "not set there".
    """
    env = os.environ if env is None else env
    if env.get(SOCKET_ENV):
        return Path(env[SOCKET_ENV]).expanduser()
    path = Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else config_file(env, platform)
    try:
        text = path.read_text()
    except OSError:
        text = ""
    value = None
    if text:
        import tomllib  # only when there is a file: it costs every kiroctl run some 3 ms

        try:
            value = tomllib.loads(text).get("socket_path")
        except ValueError:
            value = None
    if isinstance(value, str) and value:
        return Path(value).expanduser()
    return socket_path(env, platform)


def credential_files(home: Path, platform: str = sys.platform) -> dict[str, Path]:
    """Where other Kiro tools keep their credentials by default, for `kiroctl accounts import`.

    `kiro-ide-registrations` is the directory holding the `{clientIdHash}.json` files an IdC token
    names. kiro-cli follows `dirs::data_local_dir()`; opencode-kiro-auth uses `~/.config/opencode`
    on macOS too (neither honours XDG variables).
    """
    sso_cache = home / ".aws" / "sso" / "cache"
    if _is_macos(platform):
        kiro_cli = home / "Library" / "Application Support" / "kiro-cli"
    else:
        kiro_cli = home / ".local" / "share" / "kiro-cli"
    opencode = home / ".config" / "opencode"
    return {
        "kiro-ide": sso_cache / "kiro-auth-token.json",
        "kiro-ide-registrations": sso_cache,
        "kiro-cli": kiro_cli / "data.sqlite3",
        "opencode-kiro-auth": opencode / "kiro.db",
        "opencode-kiro-auth-legacy": opencode / "kiro-accounts.json",
    }


@dataclass(frozen=True)
class StatePaths:
    """Files kept in the state directory."""

    root: Path

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def database(self) -> Path:
        return self.root / DATABASE_FILE

    @property
    def install_key(self) -> Path:
        return self.root / INSTALL_KEY_FILE


def ensure_private_dir(path: Path) -> None:
    """Create `path` (and parents) as 0700, and tighten it if it already exists."""
    old = os.umask(0o077)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old)
    if os.name == "posix":
        os.chmod(path, 0o700)
