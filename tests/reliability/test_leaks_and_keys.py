"""Security checks the rest of the suite does not make: no control-API answer and no error body
carries a secret, for every kind of account and every control route; the key gate compares a
presented key against every stored digest.

Log lines are scanned for the same secrets by tests/conftest.py, across the whole session; modes,
browser refusal, the control API's absence on TCP and the loopback-only bind are in
tests/integration/test_lifecycle.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.http.auth import KeyGate
from kirod.localapi.client import ControlError
from kirod.storage.keys import UNRESTRICTED, UsableKey, hash_key
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DeviceFlow, FakeKiro, Fault, Script, ThreadedFake, TokenSet
from tests.reliability.reliability_env import (
    PATHS,
    Transcript,
    post,
    request_body,
    secrets_of,
    start,
)

# -- the key gate -------------------------------------------------------------------------------


def test_the_gate_compares_a_key_against_every_stored_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which key matched, or whether any did, must not show in how many comparisons ran."""
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def counting(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # the standard library's, not ours
    configured = [f"sk-config-{n}-{secrets.token_urlsafe(16)}" for n in range(2)]
    stored = [f"sk-kirod-{secrets.token_urlsafe(32)}" for _ in range(5)]
    gate = KeyGate(configured)
    gate.load(UsableKey(f"key-{n}", hash_key(key), UNRESTRICTED) for n, key in enumerate(stored))
    every = 2 + 5
    for presented, expected in [
        (configured[0], f"config-{hash_key(configured[0])[:12]}"),
        (stored[0], "key-0"),
        (stored[-1], "key-4"),
        ("sk-kirod-wrong", None),
        ("", None),
        ("\udcff\udcfe not UTF-8", None),  # what aiohttp makes of header bytes that are not UTF-8
    ]:
        compared.clear()
        assert gate.match(presented) == expected
        assert len(compared) == every
        # digests of equal length, never the keys themselves
        assert all(len(a) == len(b) == 64 for a, b in compared)
        assert all(presented not in (a, b) for a, b in compared if presented)


def test_stored_digests_are_sha256_of_the_utf8_key() -> None:
    """The surrogate-tolerant hashing changes nothing for a key that is text."""
    key = "sk-kirod-ключ-" + secrets.token_urlsafe(8)
    assert hash_key(key) == hashlib.sha256(key.encode("utf-8")).hexdigest()


# -- answers ------------------------------------------------------------------------------------


def test_the_scan_finds_a_planted_secret() -> None:
    """The scanner every module relies on: tokens inside runs, at edges, and odd-shaped ones."""
    record = Transcript()
    token = "aor" + secrets.token_urlsafe(172)
    key = "sk-kirod-" + secrets.token_urlsafe(32)
    record.add("json", json.dumps({"detail": f"refresh {token} failed"}))
    record.add("glued", f"Bearer{key}tail".encode())
    record.add("odd", "a secret with spaces, in a sentence")
    record.add("clean", {"id": secrets.token_hex(16)})
    found = record.leaks([token, key, "secret with spaces", "aoa" + secrets.token_urlsafe(120)])
    assert sorted(found) == [
        ("glued", key[:8] + "…"),
        ("json", token[:8] + "…"),
        ("odd", "secret w…"),
    ]


def ide_file(tokens: TokenSet) -> dict[str, str]:
    """A Kiro IDE token file (and, for Builder ID, its client registration) as an import body."""
    expires = "2030-01-01T00:00:00.000Z"
    if tokens.client_id is None:
        document: dict[str, Any] = {
            "accessToken": tokens.access_token,
            "refreshToken": tokens.refresh_token,
            "profileArn": tokens.profile_arn,
            "expiresAt": expires,
            "authMethod": "social",
            "provider": "Google",
        }
        return {"content_b64": base64.b64encode(json.dumps(document).encode()).decode()}
    client_hash = hashlib.sha1(tokens.client_id.encode()).hexdigest()  # noqa: S324 - a file name
    document = {
        "accessToken": tokens.access_token,
        "refreshToken": tokens.refresh_token,
        "expiresAt": expires,
        "clientIdHash": client_hash,
        "authMethod": "IdC",
        "provider": "BuilderId",
        "region": "us-east-1",
    }
    registration = {
        "clientId": tokens.client_id,
        "clientSecret": tokens.client_secret,
        "expiresAt": expires,
    }
    return {
        "content_b64": base64.b64encode(json.dumps(document).encode()).decode(),
        "companion_b64": base64.b64encode(json.dumps(registration).encode()).decode(),
    }


@pytest.fixture(scope="module")
def env(transcript: Transcript) -> Iterator[tuple[FakeKiro, DaemonProcess, dict[str, str]]]:
    """A daemon with a social, a Builder ID and an API-key account; kind → kirod account id."""
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    with ThreadedFake() as fake:
        proc = start(root, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"})
        try:
            service = fake.fake
            ids = {
                "social": transcript.control(
                    proc, "POST", "/accounts/import", ide_file(service.issue_social_account())
                )["accounts"][0]["id"],
                "idc": transcript.control(
                    proc, "POST", "/accounts/import", ide_file(service.issue_idc_account())
                )["accounts"][0]["id"],
                "api_key": transcript.control(
                    proc,
                    "POST",
                    "/accounts/import",
                    {"api_key": service.issue_api_key_account().access_token},
                )["accounts"][0]["id"],
            }
            yield service, proc, ids
            assert "unhandled_error" not in proc.log()
            assert not transcript.leaks(secrets_of([proc]))
        finally:
            assert proc.stop() == 0
            shutil.rmtree(root, ignore_errors=True)


def control(
    transcript: Transcript, proc: DaemonProcess, method: str, path: str, body: Any = None
) -> Any:
    """A control call whose answer, or error, joins the transcript."""
    try:
        return transcript.control(proc, method, path, body)
    except ControlError as exc:
        transcript.add(f"control {method} {path} error", f"{exc.code} {exc}")
        return exc


def test_every_control_route_answers_without_a_secret(
    env: tuple[FakeKiro, DaemonProcess, dict[str, str]], transcript: Transcript
) -> None:
    service, proc, ids = env
    seen_before = len(transcript)
    for path in ("/status", "/config", "/stats", "/pool", "/models", "/accounts", "/keys"):
        control(transcript, proc, "GET", path)
    for account_id in ids.values():
        for method, action in [
            ("GET", ""),
            ("POST", "/refresh"),
            ("POST", "/probe"),
            ("POST", "/disable"),
            ("POST", "/enable"),
        ]:
            control(transcript, proc, method, f"/accounts/{account_id}{action}")
    created = control(transcript, proc, "POST", "/keys", {"name": "scoped", "models": ["claude-*"]})
    control(transcript, proc, "DELETE", f"/keys/{created['key']['id']}")
    service.set_device_flow(DeviceFlow(pending_polls=100, interval_s=1))
    login = control(transcript, proc, "POST", "/logins", {})
    control(transcript, proc, "GET", f"/logins/{login['id']}")
    control(transcript, proc, "DELETE", f"/logins/{login['id']}")
    assert len(transcript) - seen_before >= 25
    assert not transcript.leaks(secrets_of([proc]))


def test_failed_refreshes_and_upstream_errors_name_no_secret(
    env: tuple[FakeKiro, DaemonProcess, dict[str, str]], transcript: Transcript
) -> None:
    service, proc, ids = env
    # Dead logins: the refresh fails and says so, without quoting the token it sent.
    for kind in ("social", "idc"):
        account = control(transcript, proc, "GET", f"/accounts/{ids[kind]}")
        assert account["status"] == "active"
    for fake_account in service.tokens.accounts():
        for token in service.refresh_tokens(fake_account.account_id):
            service.revoke_refresh_token(token)
        service.expire_account_tokens(fake_account.account_id)
    for kind in ("social", "idc", "api_key"):
        failed = control(transcript, proc, "POST", f"/accounts/{ids[kind]}/refresh")
        assert isinstance(failed, ControlError)
        assert failed.code == "refresh_failed"
    # Every protocol's error body when no account can serve, and when Kiro refuses mid-way.
    control(transcript, proc, "POST", f"/accounts/{ids['api_key']}/disable")  # it never expires
    for protocol in PATHS:
        for stream in (False, True):
            answer = post(proc, PATHS[protocol], request_body(protocol, stream), transcript)
            assert answer.status >= 400
    for kind in ids:
        control(transcript, proc, "POST", f"/accounts/{ids[kind]}/enable")
    service.enqueue(Script(fault=Fault.SUSPENDED_403))
    post(proc, PATHS["chat"], request_body("chat", False), transcript)
    accounts = control(transcript, proc, "GET", "/accounts")["accounts"]
    assert {account["status"] for account in accounts} >= {"needs_login"}
    assert not transcript.leaks(secrets_of([proc]))
