"""Bridges a stored account record to what the upstream client needs."""

from __future__ import annotations

from kirod.storage.accounts import AccountRecord
from kirod.upstream.client import UpstreamAccount
from kirod.upstream.secrets import AuthKind, Credentials


def to_upstream(record: AccountRecord) -> UpstreamAccount:
    return UpstreamAccount(
        id=record.id,
        region=record.region,
        auth_region=record.auth_region,
        auth_kind=AuthKind(record.auth_kind),
        profile_arn=record.profile_arn,
        credentials=Credentials.from_json(record.credentials),
        proxy_url=record.proxy_url,
    )
