"""A fake Kiro on loopback, one social account of it, and a client pointed at it (`loopback`);
the same with the exchange tests' model route (`kiro`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kirod.testing.fake_kiro import FakeKiro, running_fake
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient, UpstreamAccount
from kirod.upstream.exchange import Route
from kirod.upstream.secrets import AuthKind, Credentials
from tests.upstream.exchange_env import CONVERSATION, SONNET

Loopback = tuple[FakeKiro, KiroClient, UpstreamAccount]


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    async with running_fake() as (service, base):
        tokens = service.issue_social_account()
        account = UpstreamAccount(
            id=tokens.account_id,
            region=tokens.region,
            auth_region=tokens.region,
            auth_kind=AuthKind.SOCIAL,
            profile_arn=tokens.profile_arn,
            credentials=Credentials(
                access_token=tokens.access_token,
                refresh_token=tokens.refresh_token,
                expires_at=tokens.expires_at,
            ),
        )
        endpoints = Endpoints(kiro=base, auth=base, oidc=base)
        async with KiroClient(endpoints, ClientOptions(idle_timeout_s=2.0)) as client:
            yield service, client, account


@pytest.fixture
def kiro(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> tuple[FakeKiro, KiroClient, Route]:
    service, client, account = loopback
    return service, client, Route(account, SONNET, "claude-sonnet-4-5", CONVERSATION)
