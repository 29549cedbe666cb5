"""Default locations for configuration, state and the control socket.

Linux follows the XDG base directory spec. macOS keeps config and state under
`~/Library/Application Support/kirod` unless XDG variables are set explicitly, and puts the
socket under the per-user `$TMPDIR`. Every function takes the environment as an argument so that
callers (and tests) decide which environment is meant; only this module and `config` read it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kirod.errors import ConfigError

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
STATE_DIR_ENV = "KIROD_STATE_DIR"
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
    value = _config_value("socket_path", env, platform)
    return Path(value).expanduser() if value else socket_path(env, platform)


def client_database_path(
    env: Mapping[str, str] | None = None, platform: str = sys.platform
) -> Path:
    """Where kiroctl finds the database when no daemon tells it: the daemon's precedence for
    `state_dir` minus its flags (`KIROD_STATE_DIR`, the config file, the default)."""
    env = os.environ if env is None else env
    if env.get(STATE_DIR_ENV):
        return StatePaths(Path(env[STATE_DIR_ENV]).expanduser()).database
    value = _config_value("state_dir", env, platform)
    return StatePaths(Path(value).expanduser() if value else state_dir(env, platform)).database


def _config_value(key: str, env: Mapping[str, str], platform: str) -> str | None:
    """`key` of the config file (`KIROD_CONFIG`, else the default), when it is a non-empty
    string; None without a file, or with one that does not parse."""
    path = Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else config_file(env, platform)
    try:
        text = path.read_text()
    except OSError:
        return None
    if not text:
        return None
    import tomllib  # only when there is a file: it costs every kiroctl run some 3 ms

    try:
        value = tomllib.loads(text).get(key)
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None


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


def ensure_private_dir(path: Path, *, tighten: bool = True, fix: str | None = None) -> None:
    """Make sure `path` is a directory only this user can change; create what is missing, 0700.

    Only directories created here are given mode 0700. An existing one is checked, not changed:
    it must be a directory this user can write, owned by this user (or root) and writable by
    no one else. `tighten` (for kirod's own state directory) also takes group and other access
    away from an existing directory this user owns, when it grants no write access to others.
    Failures raise `ConfigError` naming the path and, with `fix`, what to do about it.
    """
    fix = f"; {fix}" if fix else ""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ConfigError(f"cannot use {path}: {exc.strerror}{fix}") from None
    if info is None:
        try:
            with private_umask():
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the directory {path}: {_reason(path, exc)}{fix}"
            ) from None
        info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} is not a directory{fix}")
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (os.geteuid(), 0):
        raise ConfigError(f"the directory {path} belongs to another user (uid {info.st_uid}){fix}")
    if mode & 0o022:
        raise ConfigError(
            f"the directory {path} is writable by other users (mode {mode:04o}); kirod keeps "
            f"its files only in a private directory{fix}"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"the directory {path} is not writable by this user{fix}")
    if tighten and mode & 0o077 and info.st_uid == os.geteuid():
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise ConfigError(f"cannot make {path} private: {exc.strerror}{fix}") from None


@contextlib.contextmanager
def private_umask(mask: int = 0o077) -> Iterator[None]:
    """Create files, directories and sockets meanwhile with `mask` taken away, from the start.

    A chmod afterwards would leave a moment in which others can open the path. The umask is
    process-wide, so hold this only around the calls that create something.
    """
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def write_private(path: Path, data: bytes) -> None:
    """Create `path` (0600) holding `data`; never replaces or follows anything already there.

    Raises `FileExistsError` if the path exists (a dangling symlink too), or the `OSError` that
    stopped the file being created or written; a file left half-written is removed.
    """
    with private_umask():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _reason(path: Path, exc: OSError) -> str:
    """Why a directory cannot be made, naming the ancestor at fault when it is not one."""
    for parent in path.parents:
        with contextlib.suppress(OSError):
            if parent.exists() and not parent.is_dir():
                return f"{parent} is not a directory"
            if parent.is_dir():
                break
    return exc.strerror or type(exc).__name__
