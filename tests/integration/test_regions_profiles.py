"""Regions, profile discovery, enterprise IdC and external IdP end to end: the real daemon, its
control API and kiroctl's typed client, against the fake Kiro serving both API regions.

The daemon's Kiro endpoint is `<fake>/{region}`, so the fake sees which region's host each call
went to (a leading `/us-east-1/` or `/eu-central-1/` path segment).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.localapi.client import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DeviceFlow, FakeKiro, Reply, ThreadedFake, TokenSet
from kirod.testing.fake_kiro.tokens import BUILDER_ID_PROFILE_ARN, EXTERNAL_IDP_TOKEN_PATH
from tests.support.kiro_env import start_daemon

MODEL = "claude-sonnet-4-6"


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake, {"KIROD_KIRO_ENDPOINT": fake.base_url + "/{region}"})
    try:
        yield proc
    finally:
        proc.kill()
        log = proc.log()
        for secret in fake.fake.issued_secrets():
            assert secret not in log


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(epoch))


def enterprise_files(tokens: TokenSet, *, secret_expires_at: float | None = None) -> dict[str, str]:
    """Kiro IDE's token file of an IAM Identity Center login and its client registration; like
    the IDE's, it carries no profile ARN."""
    token = {
        "accessToken": tokens.access_token,
        "refreshToken": tokens.refresh_token,
        "expiresAt": iso(tokens.expires_at),
        "clientIdHash": "a" * 40,
        "authMethod": "IdC",
        "provider": "Enterprise",
        "region": tokens.region,
        "startUrl": "https://d-1234567890.awsapps.com/start",
    }
    expiry = tokens.client_secret_expires_at if secret_expires_at is None else secret_expires_at
    assert expiry is not None
    registration = {
        "clientId": tokens.client_id,
        "clientSecret": tokens.client_secret,
        "expiresAt": iso(expiry),
    }
    return {
        "content_b64": base64.b64encode(json.dumps(token).encode()).decode(),
        "companion_b64": base64.b64encode(json.dumps(registration).encode()).decode(),
    }


def import_files(daemon: DaemonProcess, body: dict[str, str]) -> dict[str, Any]:
    answer = daemon.client.request("POST", "/accounts/import", body, timeout=30)
    [account] = answer["accounts"]
    assert isinstance(account, dict)
    return account


def ask(daemon: DaemonProcess, service: FakeKiro, account_id: str) -> str:
    """One chat through the daemon, answered by `account_id`'s own script."""
    service.enqueue(Reply(text=f"answer from {account_id}"), account_id=account_id)
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as claude:
        message = claude.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    block = message.content[0]
    assert block.type == "text"
    return block.text


def search(daemon: DaemonProcess, service: FakeKiro) -> None:
    """Claude Code's WebSearch side call through the daemon; the search's results came back."""
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as claude:
        message = claude.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "Perform a web search for the query: kiro"}],
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    assert [block.type for block in message.content][:2] == [
        "server_tool_use",
        "web_search_tool_result",
    ]
    assert message.content[1].content[0].url == "https://example.com/kiro/1"  # type: ignore[union-attr,index]
    assert not service.requests("chat")


def only_this(daemon: DaemonProcess, account_id: str) -> None:
    """Disable every other account so the next chat goes to `account_id`."""
    for account in daemon.client.accounts():
        if account.id != account_id and account.status != "disabled":
            daemon.client.disable_account(account.id)


def test_an_eu_identity_center_login_finds_its_profile_and_calls_the_eu_host(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    tokens = service.issue_idc_account(
        provider="Enterprise", region="eu-north-1", profile_region="eu-central-1"
    )
    account = import_files(daemon, enterprise_files(tokens))
    assert account["profile_arn"] == tokens.profile_arn  # the only profile Kiro offered
    assert (account["region"], account["auth_region"]) == ("eu-central-1", "eu-north-1")
    assert account["status"] == "active"
    probes = [(r.region, r.headers["x-amz-target"]) for r in service.requests("profiles")]
    assert probes == [
        ("eu-central-1", "AmazonCodeWhispererService.ListAvailableProfiles"),
        ("us-east-1", "AmazonCodeWhispererService.ListAvailableProfiles"),
    ]

    only_this(daemon, account["id"])
    service.clear_requests()
    assert ask(daemon, service, tokens.account_id) == f"answer from {tokens.account_id}"
    [sent] = service.requests("chat")
    assert sent.region == "eu-central-1"
    assert sent.json["profileArn"] == tokens.profile_arn

    service.clear_requests()
    search(daemon, service)
    [call] = service.requests("mcp")
    assert call.region == "eu-central-1"  # the account's API host, as chat
    assert call.json["profileArn"] == tokens.profile_arn
    daemon.client.disable_account(account["id"])


def test_several_profiles_wait_for_set_profile(daemon: DaemonProcess, service: FakeKiro) -> None:
    tokens = service.issue_idc_account(
        provider="Enterprise", region="us-east-2", profile_region="us-east-1", extra_profiles=1
    )
    account = import_files(daemon, enterprise_files(tokens))
    assert account["profile_arn"] is None
    assert account["status"] == "needs_profile"
    shown = daemon.client.account(account["id"])
    assert shown.status == "needs_profile"
    assert shown.status_reason is not None
    assert f"kiroctl accounts set-profile {account['id']} ARN" in shown.status_reason
    extra = service.account(tokens.account_id).extra_profiles[0]
    assert extra in shown.status_reason
    assert tokens.profile_arn in shown.status_reason

    with pytest.raises(ControlError) as error:
        daemon.client.enable_account(account["id"])  # it would only be refused again
    assert error.value.status == 400
    assert f"kiroctl accounts set-profile {account['id']} ARN" in error.value.message
    with pytest.raises(ControlError) as error:
        daemon.client.set_account_profile(account["id"], "arn:aws:codewhisperer:xx")
    assert error.value.status == 400
    assert "arn:aws:codewhisperer:<region>" in error.value.message
    with pytest.raises(ControlError) as error:
        daemon.client.set_account_profile("nope", tokens.profile_arn)
    assert error.value.status == 404

    updated = daemon.client.set_account_profile(account["id"], tokens.profile_arn)
    assert (updated.status, updated.profile_arn, updated.region) == (
        "active",
        tokens.profile_arn,
        "us-east-1",
    )
    only_this(daemon, account["id"])
    daemon.client.enable_account(account["id"])
    service.clear_requests()
    assert ask(daemon, service, tokens.account_id) == f"answer from {tokens.account_id}"
    assert [r.region for r in service.requests("chat")] == ["us-east-1"]
    daemon.client.disable_account(account["id"])


def test_an_import_from_a_region_kiro_does_not_serve_is_refused(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    tokens = service.issue_idc_account(provider="Enterprise", region="me-south-1")
    with pytest.raises(ControlError) as error:
        import_files(daemon, enterprise_files(tokens))
    assert (error.value.status, error.value.code) == (400, "invalid_import")
    assert "me-south-1" in error.value.message
    assert service.requests() == []  # refused before any call
    with pytest.raises(ControlError) as error:
        daemon.client.request(
            "POST",
            "/logins",
            {"start_url": "https://d-1.awsapps.com/start", "region": "me-south-1"},
        )
    assert (error.value.status, error.value.code) == (400, "invalid_region")
    assert "me-south-1" in error.value.message


def test_an_expired_registration_shows_in_the_list_and_needs_login(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    tokens = service.issue_idc_account(provider="Enterprise", profile_region="us-east-1")
    account = import_files(daemon, enterprise_files(tokens, secret_expires_at=time.time() - 60))
    listed = {a["id"]: a for a in daemon.client.request("GET", "/accounts")["accounts"]}
    shown = listed[account["id"]]
    assert shown["registration_expired"] is True
    assert shown["registration_expires_at"] < time.time()
    with pytest.raises(ControlError) as error:
        daemon.client.refresh_account(account["id"])
    assert "registration has expired" in error.value.message
    assert service.requests("oidc_token") == []
    after = next(a for a in daemon.client.accounts() if a.id == account["id"])
    assert after.status == "needs_login"
    assert after.registration_expired
    daemon.client.disable_account(account["id"])


def test_an_external_idp_account_refreshes_at_its_tenant(
    daemon: DaemonProcess, service: FakeKiro, fake: ThreadedFake
) -> None:
    tokens = service.issue_external_idp_account(region="eu-central-1")
    token_file = {
        "accessToken": tokens.access_token,
        "refreshToken": tokens.refresh_token,
        "expiresAt": iso(tokens.expires_at),
        "authMethod": "external_idp",
        "provider": "ExternalIdp",
        "tokenEndpoint": fake.base_url + EXTERNAL_IDP_TOKEN_PATH,
        "issuerUrl": fake.base_url + "/extidp",
        "clientId": tokens.client_id,
        "scopes": ["api://kiro/codewhisperer", "offline_access"],
    }
    body = {"content_b64": base64.b64encode(json.dumps(token_file).encode()).decode()}
    account = import_files(daemon, body)
    # No ARN in the IDE's file: discovery found the one profile, in eu-central-1.
    assert (account["auth_kind"], account["profile_arn"], account["region"]) == (
        "external_idp",
        tokens.profile_arn,
        "eu-central-1",
    )
    assert all(r.headers.get("tokentype") == "EXTERNAL_IDP" for r in service.requests("profiles"))

    refreshed = daemon.client.refresh_account(account["id"])
    assert refreshed.status == "active"
    [sent] = service.requests("external_idp_token")
    assert sent.body.decode().startswith("grant_type=refresh_token&client_id=")
    assert "scope=api%3A%2F%2Fkiro%2Fcodewhisperer+offline_access" in sent.body.decode()

    only_this(daemon, account["id"])
    service.clear_requests()
    assert ask(daemon, service, tokens.account_id) == f"answer from {tokens.account_id}"
    [chat] = service.requests("chat")
    assert (chat.region, chat.headers["tokentype"]) == ("eu-central-1", "EXTERNAL_IDP")
    daemon.client.disable_account(account["id"])


def test_a_device_login_finds_its_profile(daemon: DaemonProcess, service: FakeKiro) -> None:
    service.set_device_flow(DeviceFlow(pending_polls=0, interval_s=0.05))
    login = daemon.client.request("POST", "/logins", {})
    deadline = time.monotonic() + 20
    while login["state"] == "pending" and time.monotonic() < deadline:
        login = daemon.client.request("GET", f"/logins/{login['id']}?wait=2", timeout=10)
    assert login["state"] == "approved"
    account = login["account"]
    assert (account["profile_arn"], account["region"]) == (BUILDER_ID_PROFILE_ARN, "us-east-1")
    assert [r.region for r in service.requests("profiles")] == ["us-east-1", "eu-central-1"]
    daemon.client.disable_account(account["id"])


def test_an_api_key_asks_for_its_own_profile(daemon: DaemonProcess, service: FakeKiro) -> None:
    """A `ksk_` key may not list profiles: GetProfile names its one (docs/UPSTREAM.md §5.3)."""
    tokens = service.issue_api_key_account()
    [imported] = daemon.client.import_accounts(api_key=tokens.access_token)
    account = daemon.client.account(imported.account.id)
    assert (account.auth_kind, account.profile_arn, account.region) == (
        "api_key",
        tokens.profile_arn,
        "us-east-1",
    )
    assert service.requests("profiles") == []
    [asked] = service.requests("profile")
    assert asked.headers["x-amz-target"] == "AmazonCodeWhispererService.GetProfile"
    assert asked.headers["tokentype"] == "API_KEY"

    only_this(daemon, account.id)
    service.clear_requests()
    assert ask(daemon, service, tokens.account_id) == f"answer from {tokens.account_id}"
    [chat] = service.requests("chat")
    assert chat.json["profileArn"] == tokens.profile_arn

    service.clear_requests()
    search(daemon, service)  # MCP takes the key as chat does: `tokentype: API_KEY`
    [call] = service.requests("mcp")
    assert call.headers["tokentype"] == "API_KEY"
    assert call.headers["authorization"] == f"Bearer {tokens.access_token}"
    assert call.headers["x-amzn-kiro-profile-arn"] == call.json["profileArn"] == tokens.profile_arn
    daemon.client.disable_account(account.id)
