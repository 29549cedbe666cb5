"""Settings: declarations, precedence, errors that name the key, default paths."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kirod import paths
from kirod.config import (
    DEFAULT_PORT,
    OPTIONS,
    REMOVED,
    Settings,
    load_option,
    load_service_env,
    load_settings,
)
from kirod.daemon.main import build_parser
from kirod.errors import ConfigError
from kirod.testing.tls import make_certificates


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), **extra}


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_every_option_is_a_settings_field_and_a_flag() -> None:
    fields = {field.name for field in dataclasses.fields(Settings)} - {"config_path"}
    assert fields == {option.name for option in OPTIONS}
    flags = {action.dest for action in build_parser()._actions}
    assert {option.name for option in OPTIONS} <= flags
    for option in OPTIONS:
        assert option.env == "KIROD_" + option.name.upper()
        assert option.help


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings(env=env_for(tmp_path), platform="linux")
    home = tmp_path / "home"
    assert settings.host == "127.0.0.1"
    assert settings.port == DEFAULT_PORT
    assert settings.state_dir == home / ".local" / "state" / "kirod"
    assert settings.socket_path == home / ".local" / "state" / "kirod" / "run" / "kirod.sock"
    assert settings.api_key_file == home / ".config" / "kirod" / "api-key"
    assert settings.max_request_body_bytes == 10 * 1024 * 1024
    assert settings.shutdown_drain_s == 10
    assert settings.account_inference_concurrency == 10
    assert settings.enable_chat_completions is False
    assert settings.allow_remote is False
    assert settings.proxy_url is None
    assert settings.kiro_endpoint == "https://q.{region}.amazonaws.com"
    assert settings.kiro_auth_endpoint == "https://prod.{region}.auth.desktop.kiro.dev"
    assert settings.oidc_endpoint == "https://oidc.{region}.amazonaws.com"
    assert settings.config_path is None


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    config = write_config(tmp_path, "port = 1111\nlog_level = 'debug'\nshutdown_drain_s = 3\n")
    env = env_for(tmp_path, KIROD_PORT="2222", KIROD_LOG_LEVEL="warning")
    settings = load_settings({"port": "3333"}, env=env, config_path=config)
    assert settings.port == 3333  # flag
    assert settings.log_level == "warning"  # env
    assert settings.shutdown_drain_s == 3.0  # file
    assert settings.request_timeout_s == 600.0  # default
    assert settings.config_path == config


def test_default_config_file_is_read_from_xdg(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "kirod").mkdir(parents=True)
    (xdg / "kirod" / "config.toml").write_text("port = 4444\n")
    settings = load_settings(env=env_for(tmp_path, XDG_CONFIG_HOME=str(xdg)))
    assert settings.port == 4444
    env = env_for(tmp_path, KIROD_CONFIG=str(write_config(tmp_path, "port = 5555\n")))
    assert load_settings(env=env).port == 5555


def test_unknown_and_removed_keys_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown option 'prot'"):
        load_settings(env=env_for(tmp_path), config_path=write_config(tmp_path, "prot = 1\n"))
    for key, instruction in REMOVED.items():
        config = write_config(tmp_path, f"{key} = 'x'\n")
        with pytest.raises(ConfigError, match=f"'{key}'.*was removed") as error:
            load_settings(env=env_for(tmp_path), config_path=config)
        assert instruction in str(error.value)


@pytest.mark.parametrize(
    ("source", "key", "value", "expected"),
    [
        ("env", "port", "eighty", "integer"),
        ("env", "port", "70000", "integer from 0 to 65535"),
        ("env", "account_inference_concurrency", "11", "integer from 1 to 10"),
        ("env", "account_inference_concurrency", "0", "integer from 1 to 10"),
        ("env", "enable_chat_completions", "maybe", "boolean"),
        ("env", "log_format", "xml", "one of text, json"),
        ("env", "shutdown_drain_s", "nan", "number"),
        ("env", "proxy_url", "ftp://proxy", "http(s) URL"),
        ("file", "port", "'80'", None),
        ("file", "port", "true", "integer"),
        ("file", "api_keys", "[1, 2]", "list of strings"),
        ("file", "max_request_body_bytes", "10", "integer >= 1024"),
    ],
)
def test_bad_values_name_key_value_and_type(
    tmp_path: Path, source: str, key: str, value: str, expected: str | None
) -> None:
    env = env_for(tmp_path)
    config = None
    if source == "env":
        env["KIROD_" + key.upper()] = value
    else:
        config = write_config(tmp_path, f"{key} = {value}\n")
    if expected is None:  # a string that parses as the type is accepted from TOML too
        load_settings(env=env, config_path=config)
        return
    with pytest.raises(ConfigError) as error:
        load_settings(env=env, config_path=config)
    message = str(error.value)
    assert repr(key) in message
    assert f"(expected {expected}" in message
    if key not in ("proxy_url", "api_keys"):  # secrets are never echoed
        assert value.strip("'") in message


def test_secret_values_are_not_echoed_in_errors(tmp_path: Path) -> None:
    env = env_for(tmp_path, KIROD_PROXY_URL="socks9://user:hunter2@proxy")
    with pytest.raises(ConfigError) as error:
        load_settings(env=env)
    assert "hunter2" not in str(error.value)
    config = write_config(tmp_path, 'api_keys = ["sk-live-secret-key-1234", 7]\n')
    with pytest.raises(ConfigError) as malformed:
        load_settings(env=env_for(tmp_path), config_path=config)
    assert "api_keys" in str(malformed.value)
    assert "sk-live-secret-key-1234" not in str(malformed.value)


def test_lists_and_booleans_from_env(tmp_path: Path) -> None:
    env = env_for(
        tmp_path,
        KIROD_API_KEYS="key-alpha-0123456789, key-beta-0123456789,,key-gamma-0123456789",
        KIROD_ENABLE_CHAT_COMPLETIONS="yes",
    )
    settings = load_settings(env=env)
    assert settings.api_keys == (
        "key-alpha-0123456789",
        "key-beta-0123456789",
        "key-gamma-0123456789",
    )
    assert settings.enable_chat_completions is True
    assert "key-alpha-0123456789" not in repr(settings)
    assert settings.redacted()["api_keys"] == ["<redacted>"] * 3


def test_one_option_resolves_as_the_settings_do_without_judging_the_others(
    tmp_path: Path,
) -> None:
    """`kirod demo` reads the user's `enable_chat_completions` alone: a setting it does not use
    (a host that would need allow_remote) is no error there."""
    name = "enable_chat_completions"
    config = write_config(tmp_path, "enable_chat_completions = true\n")
    env = env_for(tmp_path, KIROD_HOST="0.0.0.0")
    assert load_option(name, env=env) is False
    assert load_option(name, env=env, config_path=config) is True
    assert load_option(name, env={**env, "KIROD_CONFIG": str(config)}) is True
    off = {**env, "KIROD_ENABLE_CHAT_COMPLETIONS": "off"}
    assert load_option(name, env=off, config_path=config) is False  # env over file
    assert load_option(name, {name: "yes"}, env=off, config_path=config) is True  # flag first
    with pytest.raises(ConfigError, match="KIROD_ENABLE_CHAT_COMPLETIONS"):
        load_option(name, env={**env, "KIROD_ENABLE_CHAT_COMPLETIONS": "maybe"})
    with pytest.raises(ConfigError, match="does not exist"):
        load_option(name, env=env, config_path=tmp_path / "missing.toml")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_non_loopback_host_needs_allow_remote(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError, match="allow_remote"):
        load_settings({"host": host}, env=env_for(tmp_path))
    assert load_settings({"host": host, "allow_remote": "true"}, env=env_for(tmp_path)).host == host


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_fine(tmp_path: Path, host: str) -> None:
    assert load_settings({"host": host}, env=env_for(tmp_path)).host == host


def test_malformed_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env=env_for(tmp_path), config_path=write_config(tmp_path, "port = \n"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(env=env_for(tmp_path), config_path=tmp_path / "missing.toml")


def test_platform_paths() -> None:
    home = {"HOME": "/home/u"}
    assert paths.socket_path({**home, "XDG_RUNTIME_DIR": "/run/user/1"}) == Path(
        "/run/user/1/kirod/kirod.sock"
    )
    mac = {"HOME": "/Users/u", "TMPDIR": "/var/folders/x/T/"}
    assert paths.socket_path(mac, "darwin") == Path("/var/folders/x/T/kirod/kirod.sock")
    assert paths.state_dir(mac, "darwin") == Path("/Users/u/Library/Application Support/kirod")
    assert paths.config_dir(mac, "darwin") == Path("/Users/u/Library/Application Support/kirod")
    assert paths.state_dir({**home, "XDG_STATE_HOME": "/s"}) == Path("/s/kirod")
    assert paths.config_dir({**home, "XDG_CONFIG_HOME": "/c"}, "darwin") == Path("/c/kirod")


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert load_service_env({}).watchdog_interval_s is None
    assert load_service_env({"WATCHDOG_USEC": "2000000"}).watchdog_interval_s == 1.0
    assert (
        load_service_env({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}).watchdog_interval_s
        is None
    )


def test_model_aliases_from_a_toml_table_env_and_flags(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        'model_fallback = "strict"\n[model_aliases]\n"claude-opus-5-5" = "claude-opus-4.7"\n',
    )
    settings = load_settings(env=env_for(tmp_path), config_path=config)
    assert settings.model_fallback == "strict"
    assert settings.model_aliases == {"claude-opus-5-5": "claude-opus-4.7"}
    from_env = load_settings(
        env=env_for(tmp_path, KIROD_MODEL_ALIASES=" a = b , fast=claude-haiku-4.5 ,")
    )
    assert from_env.model_aliases == {"a": "b", "fast": "claude-haiku-4.5"}
    flagged = load_settings({"model_aliases": "x=y"}, env=env_for(tmp_path))
    assert flagged.model_aliases == {"x": "y"}
    assert load_settings(env=env_for(tmp_path)).model_aliases == {}


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ('[model_aliases]\n"a" = 1\n', "config"),
        ('model_aliases = ["a"]\n', "config"),
        ("a=,b=c", "env"),
        ("nothing-here", "env"),
    ],
)
def test_bad_model_aliases_name_the_option(tmp_path: Path, text: str, source: str) -> None:
    if source == "config":
        config: Path | None = write_config(tmp_path, text)
        env = env_for(tmp_path)
    else:
        config, env = None, env_for(tmp_path, KIROD_MODEL_ALIASES=text)
    with pytest.raises(ConfigError, match="model_aliases"):
        load_settings(env=env, config_path=config)


def test_ca_file_takes_a_pem_bundle_and_refuses_anything_else(tmp_path: Path) -> None:
    ca_file = make_certificates(tmp_path / "tls").ca_file
    assert load_settings(env=env_for(tmp_path)).ca_file is None
    assert load_settings(env=env_for(tmp_path, KIROD_CA_FILE=str(ca_file))).ca_file == ca_file
    config = write_config(tmp_path, f"ca_file = {str(ca_file)!r}\n")
    assert load_settings(env=env_for(tmp_path), config_path=config).ca_file == ca_file
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    for bad, says in [
        (tmp_path / "missing.pem", "cannot read"),
        (tmp_path, "cannot read"),
        (garbage, "holds no PEM certificate"),
    ]:
        with pytest.raises(ConfigError, match=says) as error:
            load_settings(env=env_for(tmp_path, KIROD_CA_FILE=str(bad)))
        assert "'ca_file'" in str(error.value)
        assert str(bad) in str(error.value)
