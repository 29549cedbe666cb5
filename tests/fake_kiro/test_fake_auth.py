"""The fake's auth endpoints: social refresh and PKCE login, SSO OIDC refresh and device flow."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import aiohttp
import pytest
from yarl import URL

from kirod.testing.fake_kiro import DeviceFlow, DeviceOutcome, FakeKiro, TokenSet, running_fake
from tests.fake_kiro.fake_bodies import body, user

Served = tuple[FakeKiro, str]
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


async def post(
    session: aiohttp.ClientSession, url: str, data: Any
) -> tuple[int, dict[str, Any], dict[str, str]]:
    async with session.post(url, json=data) as response:
        return response.status, await response.json(), dict(response.headers)


async def chat_status(session: aiohttp.ClientSession, url: str, access_token: str) -> int:
    headers = {"Authorization": f"Bearer {access_token}"}
    async with session.post(
        url + "/generateAssistantResponse", json=body(user()), headers=headers
    ) as response:
        await response.read()
        return response.status


def test_token_shapes() -> None:
    fake = FakeKiro()
    social, idc, key = (
        fake.issue_social_account(),
        fake.issue_idc_account(),
        fake.issue_api_key_account(),
    )
    assert social.access_token.startswith("aoa")
    assert social.refresh_token is not None
    assert social.refresh_token.startswith("aor")
    assert len(social.refresh_token) >= 100
    assert social.profile_arn.startswith("arn:aws:codewhisperer:us-east-1:")
    assert (idc.client_id, idc.client_secret) != (None, None)
    assert key.access_token.startswith("ksk_")
    issued = set(fake.issued_secrets())
    for token in (
        social.access_token,
        social.refresh_token,
        idc.access_token,
        idc.client_secret,
        key.access_token,
    ):
        assert token in issued
    assert social.account_id != idc.account_id
    assert "aoa" not in repr(social)
    assert social.to_json()["accessToken"] == social.access_token


# Social


async def test_social_refresh_keeps_the_refresh_token(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    account = fake.issue_social_account()
    status, tokens, _ = await post(
        session, url + "/refreshToken", {"refreshToken": account.refresh_token}
    )
    assert status == 200
    assert set(tokens) == {"accessToken", "expiresIn", "profileArn", "refreshToken"}
    assert tokens["refreshToken"] == account.refresh_token
    assert tokens["accessToken"] != account.access_token
    assert (tokens["expiresIn"], tokens["profileArn"]) == (3600, account.profile_arn)
    assert (
        await chat_status(session, url, tokens["accessToken"]) == 400
    )  # authorized: no profileArn
    assert tokens["accessToken"] in fake.issued_secrets()
    assert fake.requests("social_refresh")[0].json == {"refreshToken": account.refresh_token}


async def test_social_refresh_rotation(session: aiohttp.ClientSession) -> None:
    async with running_fake(FakeKiro(rotate_refresh_tokens=True)) as (fake, url):
        account = fake.issue_social_account()
        _, first, _ = await post(
            session, url + "/refreshToken", {"refreshToken": account.refresh_token}
        )
        assert first["refreshToken"] != account.refresh_token
        assert first["refreshToken"] in fake.issued_secrets()
        status, error, _ = await post(
            session, url + "/refreshToken", {"refreshToken": account.refresh_token}
        )
        assert (status, error) == (400, {"message": "Invalid refresh token provided"})
        status, _, _ = await post(
            session, url + "/refreshToken", {"refreshToken": first["refreshToken"]}
        )
        assert status == 200


@pytest.mark.parametrize(
    "payload", [{"refreshToken": "aorUnknown"}, {}, {"refreshToken": 5}, ["x"]]
)
async def test_social_refresh_invalid(
    served: Served, session: aiohttp.ClientSession, payload: Any
) -> None:
    _, url = served
    status, error, _ = await post(session, url + "/refreshToken", payload)
    assert (status, error) == (400, {"message": "Invalid refresh token provided"})


async def test_social_refresh_refuses_other_kinds_and_revoked(
    served: Served, session: aiohttp.ClientSession
) -> None:
    fake, url = served
    idc, social = fake.issue_idc_account(), fake.issue_social_account()
    assert (await post(session, url + "/refreshToken", {"refreshToken": idc.refresh_token}))[
        0
    ] == 400
    assert social.refresh_token is not None
    fake.revoke_refresh_token(social.refresh_token)
    assert (await post(session, url + "/refreshToken", {"refreshToken": social.refresh_token}))[
        0
    ] == 400


async def test_social_pkce_login(served: Served, session: aiohttp.ClientSession) -> None:
    _, url = served
    verifier = "v" * 64
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    )
    redirect = "http://127.0.0.1:19876/oauth/callback"
    params = {
        "idp": "Google",
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st8",
    }
    async with session.get(url + "/login", params=params, allow_redirects=False) as response:
        assert response.status == 302
        location = URL(response.headers["Location"])
    assert str(location.with_query(None)) == redirect
    assert location.query["state"] == "st8"
    code = location.query["code"]
    wrong = {"code": code, "code_verifier": "w" * 64, "redirect_uri": redirect}
    assert (await post(session, url + "/oauth/token", wrong))[0] == 400  # and the code is spent

    async with session.get(url + "/login", params=params, allow_redirects=False) as response:
        code = URL(response.headers["Location"]).query["code"]
    exchange = {"code": code, "code_verifier": verifier, "redirect_uri": redirect}
    status, tokens, _ = await post(session, url + "/oauth/token", exchange)
    assert status == 200
    assert tokens["profileArn"].startswith("arn:aws:codewhisperer:")
    assert tokens["refreshToken"].startswith("aor")
    assert (await post(session, url + "/oauth/token", exchange))[0] == 400  # single use
    async with session.get(
        url + "/login", params={"redirect_uri": redirect}, allow_redirects=False
    ) as response:
        assert response.status == 400


# OIDC


async def test_oidc_refresh(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account = fake.issue_idc_account()
    request = {
        "clientId": account.client_id,
        "clientSecret": account.client_secret,
        "grantType": "refresh_token",
        "refreshToken": account.refresh_token,
    }
    status, tokens, _ = await post(session, url + "/token", request)
    assert status == 200
    assert tokens["tokenType"] == "Bearer"
    assert tokens["expiresIn"] == 3600
    assert tokens["refreshToken"] == account.refresh_token
    assert "profileArn" not in tokens
    assert await chat_status(session, url, tokens["accessToken"]) == 400  # authorized: no ARN

    status, error, headers = await post(
        session, url + "/token", {**request, "refreshToken": "aorNope"}
    )
    assert (status, error) == (
        400,
        {"error": "invalid_grant", "error_description": "Invalid refresh token provided"},
    )
    assert headers["x-amzn-errortype"] == "InvalidGrantException"


async def test_oidc_refresh_rotation(session: aiohttp.ClientSession) -> None:
    async with running_fake(FakeKiro(rotate_refresh_tokens=True)) as (fake, url):
        account = fake.issue_idc_account()
        request = {
            "clientId": account.client_id,
            "clientSecret": account.client_secret,
            "grantType": "refresh_token",
            "refreshToken": account.refresh_token,
        }
        _, tokens, _ = await post(session, url + "/token", request)
        assert tokens["refreshToken"] != account.refresh_token
        status, error, _ = await post(session, url + "/token", request)
        assert (status, error["error"]) == (400, "invalid_grant")


def snake_case(account: TokenSet) -> dict[str, Any]:
    return {
        "client_id": account.client_id,
        "client_secret": account.client_secret,
        "grant_type": "refresh_token",
        "refresh_token": account.refresh_token,
    }


async def test_oidc_refresh_client_errors(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    account, other = fake.issue_idc_account(), fake.issue_idc_account()
    status, error, headers = await post(session, url + "/token", snake_case(account))
    assert (status, error["error"]) == (401, "invalid_client")
    assert headers["x-amzn-errortype"] == "InvalidClientException"
    camel = {
        "clientId": account.client_id,
        "clientSecret": "wrong",
        "grantType": "refresh_token",
        "refreshToken": account.refresh_token,
    }
    assert (await post(session, url + "/token", camel))[0] == 401
    async with session.post(url + "/token", data=snake_case(account)) as response:  # a form
        assert response.status == 401
    # Another client's refresh token is not this client's grant.
    mixed = {
        "clientId": other.client_id,
        "clientSecret": other.client_secret,
        "grantType": "refresh_token",
        "refreshToken": account.refresh_token,
    }
    assert (await post(session, url + "/token", mixed))[1]["error"] == "invalid_grant"
    bad_grant = {
        "clientId": account.client_id,
        "clientSecret": account.client_secret,
        "grantType": "password",
    }
    assert (await post(session, url + "/token", bad_grant))[1]["error"] == "unsupported_grant_type"


async def register_and_authorize(
    session: aiohttp.ClientSession, url: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    registration = {
        "clientName": "kirod",
        "clientType": "public",
        "scopes": ["codewhisperer:completions"],
        "grantTypes": [DEVICE_GRANT, "refresh_token"],
    }
    status, client, _ = await post(session, url + "/client/register", registration)
    assert status == 200
    assert client["clientSecretExpiresAt"] > client["clientIdIssuedAt"]
    start = {
        "clientId": client["clientId"],
        "clientSecret": client["clientSecret"],
        "startUrl": "https://view.awsapps.com/start",
    }
    status, device, _ = await post(session, url + "/device_authorization", start)
    assert status == 200
    return client, device


async def poll(
    session: aiohttp.ClientSession, url: str, client: dict[str, Any], device: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    request = {
        "clientId": client["clientId"],
        "clientSecret": client["clientSecret"],
        "deviceCode": device["deviceCode"],
        "grantType": DEVICE_GRANT,
    }
    status, answer, _ = await post(session, url + "/token", request)
    return status, answer


async def test_device_flow_success(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    fake.set_device_flow(
        DeviceFlow(pending_polls=2, slow_down_polls=1, interval_s=1, subscription="KIRO PRO+")
    )
    client, device = await register_and_authorize(session, url)
    assert device["interval"] == 1
    assert device["expiresIn"] == 600
    assert device["verificationUriComplete"].endswith(device["userCode"])
    answers = [await poll(session, url, client, device) for _ in range(4)]
    assert [(status, answer.get("error")) for status, answer in answers[:3]] == [
        (400, "authorization_pending"),
        (400, "authorization_pending"),
        (400, "slow_down"),
    ]
    status, tokens = answers[3]
    assert status == 200
    assert tokens["tokenType"] == "Bearer"
    assert await chat_status(session, url, tokens["accessToken"]) == 400  # authorized: no ARN
    [account] = [a for a in fake.tokens.accounts() if a.client_id == client["clientId"]]
    assert account.usage.subscription == "KIRO PRO+"
    # The grant is spent; the new refresh token works with the registered client.
    assert (await poll(session, url, client, device))[1]["error"] == "invalid_grant"
    refresh = {
        "clientId": client["clientId"],
        "clientSecret": client["clientSecret"],
        "grantType": "refresh_token",
        "refreshToken": tokens["refreshToken"],
    }
    assert (await post(session, url + "/token", refresh))[0] == 200


@pytest.mark.parametrize("outcome", [DeviceOutcome.ACCESS_DENIED, DeviceOutcome.EXPIRED_TOKEN])
async def test_device_flow_failures(
    served: Served, session: aiohttp.ClientSession, outcome: DeviceOutcome
) -> None:
    fake, url = served
    fake.set_device_flow(DeviceFlow(pending_polls=1, outcome=outcome))
    client, device = await register_and_authorize(session, url)
    assert (await poll(session, url, client, device))[1]["error"] == "authorization_pending"
    status, answer = await poll(session, url, client, device)
    assert (status, answer["error"]) == (400, outcome.value)


async def test_device_code_expiry(served: Served, session: aiohttp.ClientSession) -> None:
    fake, url = served
    fake.set_device_flow(DeviceFlow(pending_polls=0, expires_in_s=0))
    client, device = await register_and_authorize(session, url)
    assert (await poll(session, url, client, device))[1]["error"] == "expired_token"


async def test_device_flow_client_checks(served: Served, session: aiohttp.ClientSession) -> None:
    _, url = served
    status, error, _ = await post(session, url + "/client/register", {"clientName": "x"})
    assert (status, error["error"]) == (400, "invalid_request")
    client, _ = await register_and_authorize(session, url)
    status, _, _ = await post(
        session,
        url + "/device_authorization",
        {"clientId": client["clientId"], "clientSecret": "nope"},
    )
    assert status == 401
    _, other = await register_and_authorize(session, url)
    assert (await poll(session, url, client, other))[1]["error"] == "invalid_grant"  # not its code
