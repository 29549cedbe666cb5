"""`kirod`'s options as its user meets them: the help generated from the declarations, the same
boolean spellings everywhere, numbers that must be finite, API keys long enough, a warning for a
misspelt `KIROD_*` variable, and a first start that says where things are and what to do next."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kirod.config import OPTIONS, Kind, Option, load_settings
from kirod.daemon.main import build_parser, metavar
from kirod.errors import ConfigError
from kirod.testing.daemon import DaemonProcess


def help_text(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "400")  # one option a line: no wrapping inside the checks
    return build_parser().format_help()


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_help_shows_type_default_choices_env_and_config_key(
    option: Option, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The option's entry: its line, and the next when the flag and metavar fill the first.
    text = help_text(monkeypatch)
    start = text.index(f"\n  {option.flag} ")
    end = text.find("\n  -", start + 1)
    line = " ".join(text[start:end].split())
    shape = f"[{metavar(option)}]" if option.kind is Kind.BOOL else metavar(option)
    assert line.startswith(f"{option.flag} {shape} ")
    assert "VALUE" not in line
    assert f"Type: {option.describe_type()};" in line
    assert "default: " in line
    assert f"env: {option.env};" in line
    assert f"config: {option.name}." in line
    for choice in option.choices:
        assert choice in line.split("Type:")[0]  # in the metavar as well as the type


def test_help_names_the_config_variable_and_default_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    text = help_text(monkeypatch)
    assert "env: KIROD_CONFIG" in text
    assert f"default: {tmp_path / 'kirod' / 'config.toml'}" in text
    assert re.search(r"--port INT .*default: 5476;", text)
    assert "--log-level {debug,info,warning,error}" in text


def test_kirod_help_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kirod", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "KIROD_ACCOUNT_SELECTION_STRATEGY" in result.stdout


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"), **extra}


def settings_from(tmp_path: Path, where: str, name: str, raw: str) -> object:
    """Set option `name` to `raw` through a flag, the environment or the config file."""
    option = next(option for option in OPTIONS if option.name == name)
    env = env_for(tmp_path)
    flags: dict[str, object] = {}
    config = None
    if where == "flag":
        flags = {k: v for k, v in vars(build_parser().parse_args([raw])).items() if v is not None}
        flags.pop("config", None)
    elif where == "env":
        env[option.env] = raw
    else:
        config = tmp_path / "config.toml"
        config.write_text(f"{name} = {raw}\n")
    return getattr(load_settings(flags, env=env, config_path=config), name)


@pytest.mark.parametrize(
    ("where", "raw", "expected"),
    [
        ("flag", "--allow-remote", True),
        ("flag", "--allow-remote=yes", True),
        ("flag", "--allow-remote=OFF", False),
        ("flag", "--allow-remote=0", False),
        ("flag", "--no-allow-remote", False),
        ("env", "yes", True),
        ("env", "Off", False),
        ("env", "1", True),
        ("file", "true", True),
        ("file", '"yes"', True),
        ("file", '"off"', False),
        ("file", "1", True),
        ("file", "0", False),
    ],
)
def test_booleans_take_the_same_spellings_everywhere(
    tmp_path: Path, where: str, raw: str, expected: bool
) -> None:
    assert settings_from(tmp_path, where, "allow_remote", raw) is expected


def test_a_bad_boolean_is_refused_everywhere(tmp_path: Path) -> None:
    for where, raw in (("flag", "--allow-remote=maybe"), ("env", "maybe"), ("file", "2")):
        with pytest.raises(ConfigError, match="expected boolean"):
            settings_from(tmp_path, where, "allow_remote", raw)


@pytest.mark.parametrize("where", ["flag", "env", "file"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("name", ["shutdown_drain_s", "max_connections"])
def test_numbers_reject_inf_and_nan_alike(
    tmp_path: Path, where: str, value: str, name: str
) -> None:
    flag = "--" + name.replace("_", "-")
    raw = f"{flag}={value}" if where == "flag" else value
    with pytest.raises(ConfigError, match=f"invalid value for '{name}'"):
        settings_from(tmp_path, where, name, raw)


@pytest.mark.parametrize(
    ("where", "raw"),
    [
        ("flag", "--api-keys=0123456789abcdef,short-key"),
        ("env", "0123456789abcdef, short-key"),
        ("file", '["0123456789abcdef", "short-key"]'),
    ],
)
def test_short_api_keys_are_refused_with_a_reason(tmp_path: Path, where: str, raw: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from(tmp_path, where, "api_keys", raw)
    message = str(refused.value)
    assert "item 2 has 9 characters, fewer than 16" in message
    assert "can be guessed" in message
    assert "short-key" not in message
    accepted = {
        "flag": "--api-keys=0123456789abcdef",
        "env": "0123456789abcdef",
        "file": '["0123456789abcdef"]',
    }
    assert settings_from(tmp_path, where, "api_keys", accepted[where]) == ("0123456789abcdef",)


@pytest.mark.parametrize(
    ("where", "raw"),
    [
        ("flag", "--cors-origins=http://localhost:3210/,HTTPS://Chat.Example.com:443"),
        ("env", "http://localhost:3210/, HTTPS://Chat.Example.com:443"),
        ("file", '["http://localhost:3210/", "HTTPS://Chat.Example.com:443"]'),
    ],
)
def test_cors_origins_are_written_as_browsers_send_them(
    tmp_path: Path, where: str, raw: str
) -> None:
    assert settings_from(tmp_path, where, "cors_origins", raw) == (
        "http://localhost:3210",
        "https://chat.example.com",
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://[0:0::1]:8080", "http://[::1]:8080"),
        ("http://bücher.example", "http://xn--bcher-kva.example"),
        ("chrome-extension://abcdefghijklmnop", "chrome-extension://abcdefghijklmnop"),
        ("http://127.0.0.1:80", "http://127.0.0.1"),
    ],
)
def test_cors_origins_of_other_shapes(tmp_path: Path, raw: str, expected: str) -> None:
    assert settings_from(tmp_path, "env", "cors_origins", raw) == (expected,)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("*", "wildcards are not allowed"),
        ("https://*.example.com", "wildcards are not allowed"),
        ("null", "opaque origin 'null'"),
        ("http://localhost:3210/chat", "without a path"),
        ("http://localhost:3210?x=1", "without a path"),
        ("localhost:3210", "scheme://host"),
        ("http://user@localhost", "scheme://host"),
        ("http://localhost:99999", "scheme://host"),
        ("http://local host", "scheme://host"),
        ("file:///home/me/page.html", "scheme://host"),
    ],
)
def test_cors_origins_refuse_what_is_no_exact_origin(tmp_path: Path, raw: str, reason: str) -> None:
    for where, value in (
        ("env", f"http://ok.example, {raw}"),
        ("file", f'["http://ok.example", "{raw}"]'),
    ):
        with pytest.raises(ConfigError) as refused:
            settings_from(tmp_path, where, "cors_origins", value)
        message = str(refused.value)
        assert message.startswith("invalid value for 'cors_origins' from "), message
        assert f"item 2 ({raw!r})" in message
        assert reason in message


@pytest.mark.parametrize(
    ("where", "raw"),
    [
        ("flag", "--allowed-hosts=host.docker.internal,[fd00::2]:5476"),
        ("env", "host.docker.internal, [fd00::2]:5476"),
        ("file", '["host.docker.internal", "[fd00::2]:5476"]'),
    ],
)
def test_allowed_hosts_from_every_source(tmp_path: Path, where: str, raw: str) -> None:
    assert settings_from(tmp_path, where, "allowed_hosts", raw) == (
        "host.docker.internal",
        "[fd00::2]:5476",
    )
    assert settings_from(tmp_path, "env", "allowed_hosts", "*") == ("*",)


@pytest.mark.parametrize(
    "raw", ["http://host.docker.internal", "host/path", "two words", "*.example.com", "bü.example"]
)
def test_allowed_hosts_refuse_what_no_host_header_holds(tmp_path: Path, raw: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from(tmp_path, "file", "allowed_hosts", f'["ok.example", "{raw}"]')
    message = str(refused.value)
    assert message.startswith("invalid value for 'allowed_hosts' from "), message
    assert f"item 2 ({raw!r}): expected a host name" in message


def test_first_start_says_where_things_are_and_warns_of_unknown_variables(
    short_tmp: Path,
) -> None:
    proc = DaemonProcess(short_tmp / "first", env={"KIROD_PROT": "1", "KIROD_LOG_LEVEL": "info"})
    try:
        proc.wait_ready()
    finally:
        assert proc.stop() == 0
    lines = proc.log().splitlines()
    [warning] = [line for line in lines if "unknown_environment_variable" in line]
    assert "variable=KIROD_PROT" in warning
    assert "did you mean KIROD_PORT?" in warning
    [first] = [line for line in lines if "api_key_created" in line]
    assert f"path={proc.api_key_file}" in first
    assert f"database={proc.state_dir / 'kirod.db'}" in first
    assert f"control={proc.socket_path}" in first
    assert "kiroctl accounts login" in first
    assert "kiroctl accounts import" in first
    events = [line.split()[3] for line in lines if " info " in line]
    assert events == ["api_key_created", "ready", "shutdown", "stopped"], lines
