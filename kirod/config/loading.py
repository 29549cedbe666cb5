"""Loading the settings: each option from its flag, else its `KIROD_*` environment variable, else
the config file, else its default; then the checks that span options (a non-loopback host needs
allow_remote, endpoint templates are URLs, the CA file loads)."""

from __future__ import annotations

import difflib
import os
import ssl
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kirod import paths
from kirod.config.hosts import is_loopback
from kirod.config.option import ENV_PREFIX, Option
from kirod.config.settings import Settings
from kirod.config.table import OPTIONS, OPTIONS_BY_NAME, REMOVED
from kirod.config.values import coerce
from kirod.errors import ConfigError

CONFIG_ENV = "KIROD_CONFIG"


def default_value(
    option: Option, env: Mapping[str, str] | None = None, platform: str = sys.platform
) -> Any:
    """What `option` is when nothing sets it (for the factories: here, now)."""
    if option.default_factory is not None:
        return option.default_factory(os.environ if env is None else env, platform)
    return option.default


def default_config_file(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Path:
    """The config file read when neither --config nor KIROD_CONFIG names one."""
    return paths.config_file(os.environ if env is None else env, platform)


# KIROD_* variables that are not options but are still read.
OTHER_ENV = (CONFIG_ENV,)


def unknown_env(env: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """Each `KIROD_*` variable that sets nothing, with the option it most looks like."""
    env = os.environ if env is None else env
    known = {option.env for option in OPTIONS} | set(OTHER_ENV)
    found: list[tuple[str, str | None]] = []
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            found.append((name, close[0] if close else None))
    return found


# The file's `[alerts]` table holds options by their short names.
_ALERTS_TABLE = {"webhook": "alerts_webhooks", "desktop": "alerts_desktop"}


def _flatten_alerts(data: dict[str, Any], source: str) -> None:
    """`[[alerts.webhook]]` and `[alerts] desktop` as the `alerts_*` options they set."""
    table = data.pop("alerts", None)
    if table is None:
        return
    if not isinstance(table, dict):
        raise ConfigError(f"'alerts' in {source} must be a table ([alerts] or [[alerts.webhook]])")
    for key, item in table.items():
        name = _ALERTS_TABLE.get(key)
        if name is None:
            raise ConfigError(f"unknown option 'alerts.{key}' in {source}")
        if name in data:
            raise ConfigError(f"{source} sets both 'alerts.{key}' and {name!r}")
        data[name] = item


def _check_known(keys: Sequence[str], source: str) -> None:
    for key in keys:
        if key in OPTIONS_BY_NAME:
            continue
        if key in REMOVED:
            raise ConfigError(f"option {key!r} in {source} was removed: {REMOVED[key]}")
        raise ConfigError(f"unknown option {key!r} in {source}")


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    _flatten_alerts(data, str(path))
    _check_known(list(data), str(path))
    return data


def _config_file(
    env: Mapping[str, str], config_path: Path | None, platform: str
) -> tuple[Path, dict[str, Any] | None]:
    """The config file to read and its values; None when the default file does not exist."""
    explicit = config_path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    file_path = explicit or paths.config_file(env, platform)
    if explicit is None and not file_path.exists():
        return file_path, None
    return file_path, read_config_file(file_path)


def _value(
    option: Option,
    flags: Mapping[str, object],
    env: Mapping[str, str],
    file_path: Path,
    file_values: Mapping[str, Any],
    platform: str,
) -> Any:
    """One option's value: flag > environment > config file > default."""
    if flags.get(option.name) is not None:
        return coerce(option, flags[option.name], option.flag)
    if option.env in env:
        return coerce(option, env[option.env], option.env)
    if option.name in file_values:
        return coerce(option, file_values[option.name], str(file_path))
    return default_value(option, env, platform)


def load_option(
    name: str,
    flags: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    platform: str = sys.platform,
) -> Any:
    """One option resolved as `load_settings` resolves it, the others left unchecked: for
    `kirod demo`, which runs its own kirod and takes only a setting or two from the user's."""
    env = os.environ if env is None else env
    file_path, file_values = _config_file(env, config_path, platform)
    return _value(OPTIONS_BY_NAME[name], flags or {}, env, file_path, file_values or {}, platform)


def load_settings(
    flags: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    platform: str = sys.platform,
) -> Settings:
    """Resolve every option. `flags` maps option names to raw command-line values."""
    env = dict(os.environ) if env is None else dict(env)
    flags = dict(flags or {})
    _check_known(list(flags), "command-line flags")
    file_path, file_values = _config_file(env, config_path, platform)
    values = {
        option.name: _value(option, flags, env, file_path, file_values or {}, platform)
        for option in OPTIONS
    }
    settings = Settings(**values, config_path=file_path if file_values is not None else None)
    if not settings.allow_remote and not is_loopback(settings.host):
        raise ConfigError(
            f"host {settings.host!r} is not a loopback address; set allow_remote = true to expose "
            "the API to the network"
        )
    for name in ("kiro_endpoint", "kiro_auth_endpoint", "oidc_endpoint"):
        template = getattr(settings, name)
        if not urlsplit(template.replace("{region}", "r")).scheme.startswith("http"):
            raise ConfigError(f"invalid value for {name!r}: {template!r} (expected an http(s) URL)")
    if settings.ca_file is not None:
        check_ca_file(settings.ca_file)
    return settings


def check_ca_file(path: Path) -> None:
    """Refuse a `ca_file` that TLS could not load: checked at start, not at the first request."""
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except ssl.SSLError:
        # before OSError: SSLError is one (ssl.SSLError's text is OpenSSL's, not useful here)
        raise ConfigError(
            f"invalid value for 'ca_file': {str(path)!r} holds no PEM certificate"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"invalid value for 'ca_file': cannot read {str(path)!r} ({exc.strerror})"
        ) from None
