"""`kiroctl accounts set-profile` and the IdC registration expiry in `accounts list --json`,
against a live daemon and the fake Kiro."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import start_daemon


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake, {"KIROD_KIRO_ENDPOINT": fake.base_url + "/{region}"})
    try:
        yield proc
    finally:
        proc.kill()


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(epoch))


def test_set_profile_and_the_registration_expiry(
    daemon: DaemonProcess, fake: ThreadedFake, tmp_path: Path
) -> None:
    tokens = fake.fake.issue_idc_account(
        provider="Enterprise", region="eu-west-1", profile_region="eu-central-1", extra_profiles=2
    )
    token = {
        "accessToken": tokens.access_token,
        "refreshToken": tokens.refresh_token,
        "expiresAt": iso(tokens.expires_at),
        "clientIdHash": "b" * 40,
        "authMethod": "IdC",
        "provider": "Enterprise",
        "region": tokens.region,
    }
    registration = {
        "clientId": tokens.client_id,
        "clientSecret": tokens.client_secret,
        "expiresAt": iso(time.time() + 86400),
    }
    body = {
        "content_b64": base64.b64encode(json.dumps(token).encode()).decode(),
        "companion_b64": base64.b64encode(json.dumps(registration).encode()).decode(),
        "label": "corp",
    }
    daemon.client.request("POST", "/accounts/import", body, timeout=30)

    listed = kiroctl(daemon, "accounts", "list", "--json")
    assert listed.exit_code == 0, listed.output
    [account] = json.loads(listed.stdout)["accounts"]
    assert account["status"] == "needs_profile"
    assert account["registration_expired"] is False
    assert account["registration_expires_at"] > time.time()
    assert "kiroctl accounts set-profile" in account["status_reason"]
    table = kiroctl(daemon, "accounts", "list")
    assert "needs profile" in table.stdout

    bad = kiroctl(daemon, "accounts", "set-profile", "corp", "arn:aws:codewhisperer:oops")
    assert bad.exit_code != 0
    assert "profile ARN" in bad.output

    done = kiroctl(daemon, "accounts", "set-profile", "corp", tokens.profile_arn)
    assert done.exit_code == 0, done.output
    assert "now uses" in done.stdout
    assert "eu-central-1" in done.stdout
    assert "active" in done.stdout
    shown: dict[str, Any] = json.loads(kiroctl(daemon, "accounts", "list", "--json").stdout)
    [account] = shown["accounts"]
    assert (account["profile_arn"], account["region"]) == (tokens.profile_arn, "eu-central-1")
