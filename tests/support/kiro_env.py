"""Shared set-up for end-to-end tests: the fake Kiro service, a daemon pointed at it, an account.

Imported by the end-to-end tests of every folder (not a test module itself).
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake, TokenSet


def kiro_ide_token_file(tokens: TokenSet) -> bytes:
    """A Kiro IDE `kiro-auth-token.json` for a social login, as the IDE writes it."""
    expires = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(tokens.expires_at))
    return json.dumps(
        {
            "accessToken": tokens.access_token,
            "refreshToken": tokens.refresh_token,
            "profileArn": tokens.profile_arn,
            "expiresAt": expires,
            "authMethod": "social",
            "provider": "Google",
        }
    ).encode()


def daemon_env(fake: ThreadedFake, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "KIROD_KIRO_ENDPOINT": fake.base_url,
        "KIROD_KIRO_AUTH_ENDPOINT": fake.base_url,
        "KIROD_OIDC_ENDPOINT": fake.base_url,
        "KIROD_STREAM_IDLE_TIMEOUT_S": "3",
    }
    env.update(extra or {})
    return env


def start_daemon(
    root: Path, fake: ThreadedFake, extra: Mapping[str, str] | None = None
) -> DaemonProcess:
    proc = DaemonProcess(root, env=daemon_env(fake, extra))
    proc.wait_ready()
    return proc


def daemon_from(root: Path, fake: ThreadedFake, package_root: Path) -> DaemonProcess:
    """A daemon run from the copy of the kirod package under `package_root` (another release, as
    a test makes it), not from the checkout; the caller waits for it and kills it."""
    return DaemonProcess(
        root,
        env=daemon_env(fake, {"PYTHONPATH": str(package_root)}),
        command=[sys.executable, "-P", "-m", "kirod"],  # -P: the copy, not the checkout
    )


def import_account(proc: DaemonProcess, tokens: TokenSet) -> dict[str, Any]:
    content = base64.b64encode(kiro_ide_token_file(tokens)).decode()
    answer = proc.client.request("POST", "/accounts/import", {"content_b64": content})
    assert isinstance(answer, dict)
    account: dict[str, Any] = answer["accounts"][0]
    return account
