"""API regions (docs/UPSTREAM.md §5.1), external-IdP refresh (docs/UPSTREAM.md §5.5), OIDC
registration expiry and profile listing, through `KiroClient` against the fake Kiro on loopback."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kirod.credentials import refresh as auth
from kirod.credentials.importers import parse_kiro_cli, parse_kiro_ide
from kirod.credentials.regions import RegionError, api_region, mapped_api_region
from kirod.testing.fake_kiro import FakeKiro, Reply, TokenSet, running_fake
from kirod.testing.fake_kiro.tokens import EXTERNAL_IDP_TOKEN_PATH
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient, UpstreamAccount
from kirod.upstream.errors import CredentialImportError, Failure, RefreshError, UpstreamHttpError
from kirod.upstream.secrets import AuthKind, Credentials

EU_ARN = "arn:aws:codewhisperer:eu-central-1:123456789012:profile/ABCDEF"


# -- the region map --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auth_region", "expected"),
    [
        ("us-east-1", "us-east-1"),
        ("us-east-2", "us-east-1"),
        ("us-west-2", "us-east-1"),
        ("ap-southeast-2", "us-east-1"),
        ("ap-northeast-2", "us-east-1"),
        ("sa-east-1", "us-east-1"),
        ("eu-west-1", "eu-central-1"),
        ("eu-north-1", "eu-central-1"),
        ("eu-central-2", "eu-central-1"),
        ("eu-central-1", "eu-central-1"),
    ],
)
def test_the_auth_region_maps_to_an_api_region(auth_region: str, expected: str) -> None:
    assert mapped_api_region(auth_region) == expected
    assert api_region(None, auth_region) == expected


def test_the_profile_region_wins_and_the_default_is_us_east_1() -> None:
    assert api_region(EU_ARN, "us-east-2") == "eu-central-1"
    assert api_region(None, None) == "us-east-1"


@pytest.mark.parametrize("region", ["me-south-1", "ca-central-1", "cn-north-1", "us-gov-west-1"])
def test_a_region_without_a_kiro_host_is_an_error_naming_it(region: str) -> None:
    with pytest.raises(RegionError, match=region):
        mapped_api_region(region)


@pytest.mark.parametrize(
    ("arn", "problem"),
    [
        ("arn:aws:codewhisperer:ap-southeast-1:123456789012:profile/X", "ap-southeast-1"),
        ("arn:aws:codewhisperer:us-east-1:1234:profile/X", "not arn:aws:codewhisperer"),
        ("arn:aws:iam:us-east-1:123456789012:profile/X", "not arn:aws:codewhisperer"),
    ],
)
def test_a_bad_profile_arn_is_refused(arn: str, problem: str) -> None:
    with pytest.raises(RegionError, match=problem):
        api_region(arn, None)


def idc_token_file(region: str, arn: str | None = None) -> bytes:
    doc = {
        "accessToken": "aoa" + "a" * 100,
        "refreshToken": "aor" + "r" * 200,
        "expiresAt": "2030-01-01T00:00:00.000Z",
        "clientIdHash": "0" * 40,
        "authMethod": "IdC",
        "provider": "Enterprise",
        "region": region,
    }
    if arn:
        doc["profileArn"] = arn
    return json.dumps(doc).encode()


REGISTRATION = json.dumps(
    {"clientId": "cid", "clientSecret": "csecret", "expiresAt": "2030-01-01T00:00:00Z"}
).encode()


def test_an_import_sets_the_api_region_from_the_idc_region_or_the_profile() -> None:
    assert parse_kiro_ide(idc_token_file("eu-north-1"), REGISTRATION).region == "eu-central-1"
    assert parse_kiro_ide(idc_token_file("us-east-2"), REGISTRATION).region == "us-east-1"
    with_arn = parse_kiro_ide(idc_token_file("us-east-2", EU_ARN), REGISTRATION)
    assert (with_arn.region, with_arn.auth_region) == ("eu-central-1", "us-east-2")


def test_an_import_from_a_region_without_a_kiro_host_is_refused_naming_it() -> None:
    with pytest.raises(CredentialImportError, match="me-south-1"):
        parse_kiro_ide(idc_token_file("me-south-1"), REGISTRATION)
    bad_arn = "arn:aws:codewhisperer:ap-south-1:123456789012:profile/X"
    with pytest.raises(CredentialImportError, match="ap-south-1"):
        parse_kiro_ide(idc_token_file("us-east-1", bad_arn), REGISTRATION)


# -- against the fake ------------------------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeKiro, str]]:
    async with running_fake() as (service, base_url):
        yield service, base_url


@pytest.fixture
async def client(fake: tuple[FakeKiro, str]) -> AsyncIterator[KiroClient]:
    base = fake[1]
    endpoints = Endpoints(kiro=base + "/{region}", auth=base, oidc=base)
    async with KiroClient(endpoints, ClientOptions(idle_timeout_s=2.0)) as kiro:
        yield kiro


def account_of(
    tokens: TokenSet, kind: AuthKind, region: str, base: str = "", **changes: object
) -> UpstreamAccount:
    credentials = Credentials(
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        expires_at=tokens.expires_at,
        client_id=tokens.client_id,
        client_secret=tokens.client_secret,
        client_secret_expires_at=tokens.client_secret_expires_at,
        token_endpoint=base + EXTERNAL_IDP_TOKEN_PATH if kind is AuthKind.EXTERNAL_IDP else None,
    )
    credentials = dataclasses.replace(credentials, **changes)  # type: ignore[arg-type]
    return UpstreamAccount(
        id=tokens.account_id,
        region=region,
        auth_region=tokens.region,
        auth_kind=kind,
        profile_arn=tokens.profile_arn,
        credentials=credentials,
    )


def chat_body(profile_arn: str | None) -> dict[str, object]:
    body: dict[str, object] = {
        "conversationState": {
            "conversationId": "3f1c1f55-3fd0-4c7d-9d36-2b4a6bd0c9a1",
            "chatTriggerType": "MANUAL",
            "currentMessage": {
                "userInputMessage": {
                    "content": "hi",
                    "modelId": "claude-sonnet-4.5",
                    "origin": "AI_EDITOR",
                }
            },
        }
    }
    if profile_arn:
        body["profileArn"] = profile_arn
    return body


async def chat(client: KiroClient, account: UpstreamAccount) -> None:
    async with client.chat(account, chat_body(account.profile_arn)) as chunks:
        async for _ in chunks:
            pass


async def test_every_call_of_an_eu_account_goes_to_the_eu_host(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_idc_account(provider="Enterprise", region="eu-central-1")
    account = account_of(tokens, AuthKind.IDC, "eu-central-1")
    service.enqueue(Reply(text="hallo"))
    await chat(client, account)
    await client.usage_limits(account)
    await client.list_models(account)
    await client.mcp(account, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    await client.list_profiles(account, account.region)
    seen = {(r.operation, r.region) for r in service.requests()}
    assert seen == {
        ("chat", "eu-central-1"),
        ("usage", "eu-central-1"),
        ("models", "eu-central-1"),
        ("mcp", "eu-central-1"),
        ("profiles", "eu-central-1"),
    }


async def test_a_profile_sent_to_another_regions_host_is_improperly_formed(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_idc_account(provider="Enterprise", region="eu-central-1")
    with pytest.raises(UpstreamHttpError) as error:
        await chat(client, account_of(tokens, AuthKind.IDC, "us-east-1"))
    assert error.value.status == 400
    assert error.value.failure is Failure.BAD_REQUEST
    assert "Improperly formed request" in error.value.upstream_message


async def test_profiles_are_listed_per_region_following_next_token(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_idc_account(
        provider="Enterprise", region="us-east-2", profile_region="us-east-1", extra_profiles=3
    )
    account = account_of(tokens, AuthKind.IDC, "us-east-1")
    us = [p["arn"] for p in await client.list_profiles(account, "us-east-1")]
    eu = [p["arn"] for p in await client.list_profiles(account, "eu-central-1")]
    assert us[0] == tokens.profile_arn
    assert len(us) == 2  # the own profile and the second extra one, one page each
    assert len(eu) == 2
    assert all(":us-east-1:" in arn for arn in us)
    assert all(":eu-central-1:" in arn for arn in eu)
    assert len(service.requests("profiles")) == 4  # nextToken followed


async def test_external_idp_refresh_is_a_form_post_to_the_tenant(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, base = fake
    tokens = service.issue_external_idp_account()
    assert tokens.refresh_token is not None
    assert tokens.refresh_token.startswith("1.AXoA")
    account = account_of(tokens, AuthKind.EXTERNAL_IDP, "us-east-1", base, scopes=("api://x/y",))
    refreshed = await auth.refresh(client, account)
    assert refreshed.credentials.access_token != tokens.access_token
    assert refreshed.credentials.expires_at is not None
    assert refreshed.credentials.expires_at > time.time() + 3000
    [sent] = service.requests("external_idp_token")
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
    form = urllib.parse.parse_qs(sent.body.decode())
    assert form == {
        "grant_type": ["refresh_token"],
        "client_id": [tokens.client_id],
        "refresh_token": [tokens.refresh_token],
        "scope": ["api://x/y"],
    }
    assert "authorization" not in sent.headers

    # The renewed token works on every Kiro call because each carries TokenType: EXTERNAL_IDP.
    renewed = dataclasses.replace(account, credentials=refreshed.credentials)
    service.enqueue(Reply(text="ok"))
    await chat(client, renewed)
    await client.usage_limits(renewed)
    await client.list_models(renewed)
    for request in service.requests():
        if request.operation != "external_idp_token":
            assert request.headers["tokentype"] == "EXTERNAL_IDP"


async def test_the_fake_refuses_an_external_idp_token_without_its_token_type(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_external_idp_account()
    as_social = account_of(tokens, AuthKind.SOCIAL, "us-east-1")  # no TokenType header
    with pytest.raises(UpstreamHttpError) as error:
        await client.usage_limits(as_social)
    assert error.value.failure is Failure.BEARER


async def test_a_revoked_external_idp_refresh_token_is_permanent(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, base = fake
    tokens = service.issue_external_idp_account()
    assert tokens.refresh_token is not None
    service.revoke_refresh_token(tokens.refresh_token)
    with pytest.raises(RefreshError) as error:
        await auth.refresh(client, account_of(tokens, AuthKind.EXTERNAL_IDP, "us-east-1", base))
    assert error.value.permanent
    assert tokens.refresh_token not in str(error.value)


async def test_an_external_idp_account_without_its_endpoint_cannot_refresh(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_external_idp_account()
    account = account_of(tokens, AuthKind.EXTERNAL_IDP, "us-east-1", token_endpoint=None)
    with pytest.raises(RefreshError, match="token endpoint") as error:
        await auth.refresh(client, account)
    assert error.value.permanent
    assert service.requests() == []


async def test_an_expired_oidc_registration_needs_a_new_login(
    fake: tuple[FakeKiro, str], client: KiroClient
) -> None:
    service, _ = fake
    tokens = service.issue_idc_account(provider="Enterprise")
    account = account_of(tokens, AuthKind.IDC, "us-east-1", client_secret_expires_at=1.0)
    assert auth.registration_expired(account.credentials)
    with pytest.raises(RefreshError, match="registration has expired") as error:
        await auth.refresh(client, account)
    assert error.value.permanent
    assert service.requests() == []  # no call that could only fail
    live = account_of(tokens, AuthKind.IDC, "us-east-1")
    assert not auth.registration_expired(live.credentials)
    await auth.refresh(client, live)


# -- external-IdP importers --------------------------------------------------------------------


def test_kiro_ide_external_idp_file_with_a_short_refresh_token() -> None:
    token = {
        "accessToken": "eyJ0eXAiOiJKV1Qi.payload.sig",
        "refreshToken": "1.AXoAshort-entra-token",
        "expiresAt": "2030-01-01T00:00:00.000Z",
        "authMethod": "external_idp",
        "provider": "ExternalIdp",
        "tokenEndpoint": "https://login.microsoftonline.com/tenant/oauth2/v2.0/token",
        "issuerUrl": "https://login.microsoftonline.com/tenant/v2.0",
        "clientId": "11111111-2222-3333-4444-555555555555",
        "scopes": ["api://kiro/.default", "offline_access"],
    }
    account = parse_kiro_ide(json.dumps(token).encode())
    assert account.auth_kind is AuthKind.EXTERNAL_IDP
    assert account.credentials.refresh_token == "1.AXoAshort-entra-token"
    assert account.credentials.token_endpoint == token["tokenEndpoint"]
    assert account.credentials.scopes == ("api://kiro/.default", "offline_access")
    assert (account.region, account.profile_arn) == ("us-east-1", None)


def test_a_plain_http_token_endpoint_is_refused_unless_on_loopback() -> None:
    token = {
        "accessToken": "a.b.c",
        "refreshToken": "1.AXoA-x",
        "authMethod": "external_idp",
        "clientId": "client",
        "tokenEndpoint": "http://idp.example.com/token",
    }
    with pytest.raises(CredentialImportError, match="https"):
        parse_kiro_ide(json.dumps(token).encode())
    token["tokenEndpoint"] = "http://127.0.0.1:9/extidp/oauth2/token"
    assert parse_kiro_ide(json.dumps(token).encode()).credentials.token_endpoint


def test_kiro_cli_external_idp_entry(tmp_path: Path) -> None:
    path = tmp_path / "data.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT)")
        entry = {
            "access_token": "a.b.c",
            "refresh_token": "0.ARwA-okta-or-entra",
            "expires_at": "2030-01-01T00:00:00.123456789Z",
            "issuer_url": "https://example.okta.com",
            "token_endpoint": "https://example.okta.com/oauth2/v1/token",
            "client_id": "0oa-public",
            "scopes": "openid offline_access",
        }
        conn.execute(
            "INSERT INTO auth_kv VALUES (?, ?)", ("kirocli:external-idp:token", json.dumps(entry))
        )
        conn.execute(
            "INSERT INTO state VALUES (?, ?)",
            ("api.codewhisperer.profile", json.dumps({"arn": EU_ARN, "profile_name": "p"})),
        )
    conn.close()
    [account] = parse_kiro_cli(path.read_bytes())
    assert account.auth_kind is AuthKind.EXTERNAL_IDP
    assert account.credentials.refresh_token == "0.ARwA-okta-or-entra"
    assert account.credentials.scopes == ("openid", "offline_access")
    assert (account.region, account.profile_arn) == ("eu-central-1", EU_ARN)


async def test_the_fake_tenant_refuses_a_json_refresh(fake: tuple[FakeKiro, str]) -> None:
    service, base = fake
    tokens = service.issue_external_idp_account()
    body = {
        "grant_type": "refresh_token",
        "client_id": tokens.client_id,
        "refresh_token": tokens.refresh_token,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(base + EXTERNAL_IDP_TOKEN_PATH, json=body) as response,
    ):
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_request"
