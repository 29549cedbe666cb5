"""Every kiroctl command against a live daemon and the fake Kiro service, text and --json."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import Result

from kirod import __version__
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import (
    DeviceFlow,
    DeviceOutcome,
    Fault,
    Script,
    ThreadedFake,
    TokenSet,
)
from tests.support.kiro_env import kiro_ide_token_file, start_daemon
from tests.support.kiroctl import KIROCTL, ask_on_a_terminal, kiroctl

FAST = 0.05


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def piped(daemon: DaemonProcess, *args: str) -> str:
    """kiroctl's output through a real pipe, as `kiroctl … | less` reads it."""
    result = subprocess.run(
        [*KIROCTL, "--socket", str(daemon.socket_path), *args],
        capture_output=True,  # pipes, not a terminal
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_aligned(table: str) -> None:
    """Each column's cells start where its header does, two spaces after the column before."""
    header, *rows = table.splitlines()
    starts = [match.start() for match in re.finditer(r"(?<!\S)\S+(?: \S+)*", header)]
    assert rows, table
    for row in rows:
        for start in starts[1:]:
            assert row[start - 2 : start] == "  ", (start, table)
            assert row[start] != " ", (start, table)


def test_status_without_accounts_is_degraded(daemon: DaemonProcess) -> None:
    result = kiroctl(daemon, "status")
    assert result.exit_code == 4
    assert "degraded" in result.stdout
    assert "! no usable account" in result.stdout
    assert "kiroctl accounts login" in result.stdout


def test_import_a_kiro_ide_file_then_status_is_healthy(
    daemon: DaemonProcess, fake: ThreadedFake, tmp_path: Path
) -> None:
    token_file = tmp_path / "kiro-auth-token.json"
    token_file.write_bytes(kiro_ide_token_file(fake.fake.issue_social_account()))
    imported = kiroctl(daemon, "accounts", "import", str(token_file), "--label", "ide")
    assert imported.exit_code == 0, imported.output
    assert "Imported ide (" in imported.stdout
    assert str(token_file) in imported.stdout

    status = kiroctl(daemon, "status")
    assert status.exit_code == 0, status.output
    assert "healthy" in status.stdout
    assert status.stdout.startswith(f"kirod {__version__} - serving - up ")  # ASCII off a tty
    assert f"\n  kiroctl      {__version__}\n" in status.stdout  # both versions
    assert "ide" in status.stdout
    assert "pacing" not in status.stdout  # off by default
    assert "paced" not in status.stdout
    doc = json.loads(kiroctl(daemon, "status", "--json").stdout)
    assert set(doc) == {"kiroctl", "health", "status", "accounts"}
    assert doc["kiroctl"] == doc["status"]["version"] == __version__
    assert doc["health"] == doc["status"]["health"] == "healthy"
    assert {"version", "state", "listeners", "problems", "accounts", "maintenance"} <= set(
        doc["status"]
    )
    assert doc["accounts"][0]["label"] == "ide"
    assert doc["status"]["pacing"]["spacing_s"] == 0
    assert doc["status"]["pacing"]["accounts"] == []


def live_kiro_cli_store(path: Path, tokens: TokenSet) -> sqlite3.Connection:
    """kiro-cli's store in WAL mode with its login written after the last checkpoint: the row is
    in `data.sqlite3-wal` only, as while kiro-cli runs. The caller keeps the connection open."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript(
        "CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT);"
        "CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB);"
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    token = {
        "access_token": tokens.access_token,
        "refresh_token": tokens.refresh_token,
        "expires_at": time.strftime("%Y-%m-%dT%H:%M:%S.123456789Z", time.gmtime(tokens.expires_at)),
        "provider": "github",
        "profile_arn": tokens.profile_arn,
    }
    conn.execute("INSERT INTO auth_kv VALUES ('kirocli:social:token', ?)", (json.dumps(token),))
    conn.commit()
    return conn


def test_import_a_live_kiro_cli_store_reads_its_wal(
    daemon: DaemonProcess, fake: ThreadedFake, tmp_path: Path
) -> None:
    store = tmp_path / "data.sqlite3"
    with closing(live_kiro_cli_store(store, fake.fake.issue_social_account())):
        assert b"kirocli:social:token" not in store.read_bytes()  # a plain copy would miss it
        result = kiroctl(daemon, "accounts", "import", str(store), "--json")
    [account] = as_json(result)["accounts"]
    assert account["created"] is True
    assert account["label"] == "Github (kiro-cli)"
    refreshed = kiroctl(daemon, "accounts", "refresh", account["id"][:8])
    assert refreshed.exit_code == 0, refreshed.output  # the token from the WAL is the live one
    assert "Refreshed Github (kiro-cli)" in refreshed.stdout


def test_import_without_a_path_looks_in_the_default_places(
    daemon: DaemonProcess, fake: ThreadedFake, tmp_path: Path
) -> None:
    cache = tmp_path / ".aws" / "sso" / "cache"
    nothing = kiroctl(daemon, "accounts", "import", env={"HOME": str(tmp_path)})
    assert nothing.exit_code == 1
    assert "found no Kiro credentials" in nothing.stderr
    assert str(cache / "kiro-auth-token.json") in nothing.stderr

    cache.mkdir(parents=True)
    (cache / "kiro-auth-token.json").write_bytes(
        kiro_ide_token_file(fake.fake.issue_social_account())
    )
    found = kiroctl(daemon, "accounts", "import", env={"HOME": str(tmp_path)})
    assert found.exit_code == 0, found.output
    assert f"from {cache / 'kiro-auth-token.json'}" in found.stdout


def test_import_a_kiro_api_key_from_stdin(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    key = fake.fake.issue_api_key_account().access_token
    result = kiroctl(daemon, "accounts", "import", "--api-key", stdin=key + "\n")
    assert result.exit_code == 0, result.output
    assert "Imported Kiro API key" in result.stdout
    assert key not in result.output


def test_accounts_list(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    listed = as_json(kiroctl(daemon, "accounts", "list", "--json"))["accounts"]
    assert {"id", "label", "auth_kind", "status", "usage", "expires_at", "last_error"} <= set(
        listed[0]
    )
    text = kiroctl(daemon, "accounts", "list")
    assert text.exit_code == 0
    assert "TOKEN EXPIRES" in text.stdout
    assert "Github (kiro-cli)" in text.stdout
    shown = json.dumps(listed) + text.stdout
    for secret in fake.fake.issued_secrets():
        assert secret not in shown


def test_account_actions_by_label(daemon: DaemonProcess) -> None:
    disabled = kiroctl(daemon, "accounts", "disable", "github")
    assert disabled.exit_code == 0, disabled.output
    assert "Disabled Github (kiro-cli)" in disabled.stdout
    assert "disabled" in disabled.stdout
    assert kiroctl(daemon, "accounts", "enable", "Github (kiro-cli)").exit_code == 0
    probed = kiroctl(daemon, "accounts", "probe", "github")
    assert probed.exit_code == 0, probed.output
    assert "resets" in probed.stdout
    removed = kiroctl(daemon, "accounts", "remove", "github", "--yes")
    assert removed.exit_code == 0
    listed = as_json(kiroctl(daemon, "accounts", "list", "--json"))["accounts"]
    assert "Github (kiro-cli)" not in {account["label"] for account in listed}


def test_remove_asks_on_a_terminal_and_needs_yes_elsewhere(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    key = fake.fake.issue_api_key_account().access_token
    assert (
        kiroctl(daemon, "accounts", "import", "--api-key", "--label", "spare", stdin=key).exit_code
        == 0
    )
    [spare] = [
        a
        for a in as_json(kiroctl(daemon, "accounts", "list", "--json"))["accounts"]
        if a["label"] == "spare"
    ]

    piped = kiroctl(daemon, "accounts", "remove", "spare")
    assert piped.exit_code == 2
    assert "--yes" in piped.stderr
    short = kiroctl(daemon, "accounts", "remove", spare["id"][:3], "--yes")
    assert short.exit_code == 2
    assert "is too short to name an account" in short.stderr
    assert "at least 4 characters" in short.stderr

    code, seen = ask_on_a_terminal(daemon, "n", "accounts", "remove", "spare")
    assert code == 1, seen
    assert "Remove spare (" in seen
    assert "spare" in kiroctl(daemon, "accounts", "list").stdout
    code, seen = ask_on_a_terminal(daemon, "y", "accounts", "remove", spare["id"][:4])
    assert code == 0, seen
    assert "Removed spare" in seen
    assert "spare" not in kiroctl(daemon, "accounts", "list").stdout


def test_keys_create_list_revoke(daemon: DaemonProcess) -> None:
    created = as_json(
        kiroctl(
            daemon,
            "keys",
            "create",
            "ci",
            "--models",
            "claude-haiku-*",
            "--models",
            "claude-sonnet-4-6, claude-opus-*",
            "--rpm",
            "30",
            "--cache",
            "--json",
        )
    )
    assert created["secret"].startswith("sk-kirod-")
    assert created["key"]["models"] == ["claude-haiku-*", "claude-sonnet-4-6", "claude-opus-*"]
    assert created["key"]["rpm"] == 30
    assert created["key"]["cache"] is True

    plain = kiroctl(daemon, "keys", "create", "dev")
    assert plain.exit_code == 0
    assert plain.stdout.strip().startswith("sk-kirod-")  # only the key on stdout: KEY=$(…)
    assert "shown only now" in plain.stderr

    listed = as_json(kiroctl(daemon, "keys", "list", "--json"))["keys"]
    assert {key["name"] for key in listed} >= {"default", "ci", "dev"}
    assert set(listed[0]) == {
        "id",
        "name",
        "prefix",
        "created_at",
        "last_used_at",
        "models",
        "rpm",
        "cache",
        "budget",
    }
    text = kiroctl(daemon, "keys", "list").stdout
    assert "claude-haiku-*, claude-sonnet-4-6, claude-opus-*" in text
    assert created["secret"] not in text
    assert_aligned(piped(daemon, "keys", "list"))

    assert kiroctl(daemon, "keys", "revoke", "ci").exit_code == 2  # not a terminal: --yes
    too_short = kiroctl(daemon, "keys", "revoke", "de", "--yes")  # "dev" and "default"
    assert too_short.exit_code == 2
    assert "is too short to name a key" in too_short.stderr
    assert "at least 4 characters" in too_short.stderr
    assert kiroctl(daemon, "keys", "revoke", "ci", "--yes").exit_code == 0
    names = {key["name"] for key in as_json(kiroctl(daemon, "keys", "list", "--json"))["keys"]}
    assert "ci" not in names


def test_stats_break_requests_down_by_key_name(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake, {})
    try:
        import_account(proc, fake.fake.issue_social_account(), "only")
        secret = kiroctl(proc, "keys", "create", "stats-probe").stdout.strip()
        with anthropic.Anthropic(base_url=proc.base_url, api_key=secret, max_retries=0) as client:
            for _ in range(2):
                client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=50,
                    messages=[{"role": "user", "content": "hi"}],
                )
        listed = as_json(kiroctl(proc, "keys", "list", "--json"))["keys"]
        [probe] = [key for key in listed if key["name"] == "stats-probe"]
        [group] = as_json(kiroctl(proc, "stats", "--json"))["keys"]
        assert (group["key"], group["requests"], group["errors"]) == (probe["id"], 2, 0)
        text = kiroctl(proc, "stats").stdout
        assert re.search(r"^KEY +REQUESTS +ERRORS +CREDITS$", text, re.MULTILINE), text
        assert re.search(r"^stats-probe +2 +0 ", text, re.MULTILINE), text
        assert probe["id"] not in text
    finally:
        proc.stop()


def test_models_stats_config_version(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    # An account of its own, whose catalog is read by a first request: the test does not lean
    # on what the module's earlier tests left (run alone, the directory was still "static").
    content = base64.b64encode(kiro_ide_token_file(fake.fake.issue_social_account())).decode()
    daemon.client.import_accounts(content=content, label="catalog")
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
        )
    models = as_json(kiroctl(daemon, "models", "--json"))
    assert models["source"] == "accounts"
    assert "claude-sonnet-4-6" in {row["id"] for row in models["models"]}
    assert models["families"]["opus"] == "claude-opus-5.5"  # the fake's newest opus
    text = kiroctl(daemon, "models").stdout
    assert "claude-sonnet-4.6" in text
    assert "newest model of their Claude line, or of their GPT tier" in text
    clients = {(row["client"], row["id"]): row for row in models["clients"]}
    codex = clients[("Codex 0.171.0", "gpt-6.2-sol")]
    assert (codex["role"], codex["served"], codex["via"]) == ("default", "gpt-5.6-sol", "tier")
    claude_code = clients[("Claude Code 2.1.332", "claude-opus-5-5")]
    assert (claude_code["role"], claude_code["served"], claude_code["via"]) == (
        "default",
        "claude-opus-5.5",
        "exact",
    )
    assert clients[("Claude Code 2.1.332", "fable")]["served"] is None  # the fake offers none
    assert re.search(
        r"^Codex 0\.171\.0 +default +gpt-6\.2-sol +gpt-5\.6-sol +the newest GPT sol model",
        text,
        re.MULTILINE,
    ), text
    assert re.search(r"^opus +claude-opus-5\.5 +family$", text, re.MULTILINE), text

    stats = as_json(kiroctl(daemon, "stats", "--since", "1h", "--json"))
    keys = {
        "requests",
        "succeeded",
        "success_rate",
        "ttfb_ms",
        "accounts",
        "models",
        "keys",
        "days",
    }
    assert keys <= set(stats)
    assert stats["since"] == pytest.approx(time.time() - 3600, abs=60)
    assert "requests" in kiroctl(daemon, "stats").stdout
    bad_since = kiroctl(daemon, "stats", "--since", "yesterday-ish")
    assert bad_since.exit_code == 2

    config = as_json(kiroctl(daemon, "config", "--json"))
    assert config["settings"]["socket_path"] == str(daemon.socket_path)
    assert "socket_path" in kiroctl(daemon, "config").stdout

    assert as_json(kiroctl(daemon, "version", "--json")) == {
        "kiroctl": __version__,
        "kirod": __version__,
    }


def test_login_approved(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    fake.fake.set_device_flow(DeviceFlow(pending_polls=1, interval_s=FAST))
    result = kiroctl(daemon, "accounts", "login", "--no-browser")
    assert result.exit_code == 0, result.output
    assert "/device?user_code=" in result.stdout
    assert "Added user" in result.stdout

    fake.fake.set_device_flow(DeviceFlow(pending_polls=1, interval_s=FAST))
    lines = kiroctl(daemon, "accounts", "login", "--no-browser", "--json")
    assert lines.exit_code == 0, lines.output
    pending, approved = (json.loads(line) for line in lines.stdout.splitlines())
    assert pending["state"] == "pending"
    assert pending["user_code"]
    assert approved["state"] == "approved"
    assert approved["account"]["auth_kind"] == "builder_id"


@pytest.mark.parametrize(
    ("outcome", "hint"),
    [(DeviceOutcome.ACCESS_DENIED, "choose Allow"), (DeviceOutcome.EXPIRED_TOKEN, "expired")],
)
def test_login_denied_or_expired_exits_6(
    daemon: DaemonProcess, fake: ThreadedFake, outcome: DeviceOutcome, hint: str
) -> None:
    fake.fake.set_device_flow(DeviceFlow(pending_polls=0, outcome=outcome, interval_s=FAST))
    result = kiroctl(daemon, "accounts", "login", "--no-browser")
    assert result.exit_code == 6
    assert hint in result.stderr
    assert "kiroctl accounts login" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda sig: sig.name)
def test_a_login_whose_kiroctl_is_stopped_is_cancelled(
    daemon: DaemonProcess, fake: ThreadedFake, sig: signal.Signals
) -> None:
    fake.fake.set_device_flow(DeviceFlow(pending_polls=100_000, interval_s=FAST))
    proc = subprocess.Popen(
        [
            *KIROCTL,
            "--socket",
            str(daemon.socket_path),
            "accounts",
            "login",
            "--no-browser",
            "--json",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pending = json.loads(proc.stdout.readline())
        assert pending["state"] == "pending"
        time.sleep(0.3)  # into the wait
        proc.send_signal(sig)
        rest, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    final = json.loads(rest.splitlines()[-1])
    assert final["id"] == pending["id"]
    assert final["state"] == "cancelled"
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert daemon.client.request("GET", f"/logins/{pending['id']}")["state"] == "cancelled"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(daemon: DaemonProcess, shell: str) -> None:
    result = kiroctl(daemon, "completion", shell)
    assert result.exit_code == 0
    assert "_KIROCTL_COMPLETE" in result.stdout


def test_status_and_list_show_paced_and_held_accounts(fake: ThreadedFake, short_tmp: Path) -> None:
    """Pacing on (account_rpm 1); a second entry of the same login, throttled by Kiro, holds the
    first one with a shared back-off."""
    env = {"KIROD_ACCOUNT_RPM": "1", "KIROD_QUEUE_TIMEOUT_S": "0.5"}
    proc = start_daemon(short_tmp, fake, env)
    try:
        tokens = fake.fake.issue_social_account()
        import_account(proc, tokens, "first")
        ask = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with anthropic.Anthropic(
            base_url=proc.base_url, api_key=proc.api_key, max_retries=0
        ) as client:
            client.messages.create(**ask)
            status = kiroctl(proc, "status")
            assert status.exit_code == 0, status.output
            assert "one start per account every 1m (account_rpm 1," in status.stdout
            [row] = [line for line in status.stdout.splitlines() if "first" in line]
            assert "paced" in row
            assert "in 5" in row  # its next start, a minute after the first

            copy = dataclasses.replace(tokens, refresh_token=f"{tokens.refresh_token}-copy")
            import_account(proc, copy, "second")
            fake.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=30))
            with pytest.raises(anthropic.RateLimitError):
                client.messages.create(**ask)
        listed = kiroctl(proc, "accounts", "list")
        assert listed.exit_code == 0, listed.output
        [row] = [line for line in listed.stdout.splitlines() if "first" in line]
        assert "held: shared back-off" in row
        doc = as_json(kiroctl(proc, "status", "--json"))
        held = [item for item in doc["status"]["pacing"]["accounts"] if item["held_until"]]
        assert len(held) == 2  # the login's both entries
    finally:
        proc.kill()
        fake.fake.clear_scripts()


def import_account(proc: DaemonProcess, tokens: TokenSet, label: str) -> None:
    content = base64.b64encode(kiro_ide_token_file(tokens)).decode()
    proc.client.request("POST", "/accounts/import", {"content_b64": content, "label": label})


def test_shutdown(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        result = kiroctl(proc, "shutdown")
        assert result.exit_code == 0
        assert proc.wait(15) == 0
    finally:
        proc.kill()
