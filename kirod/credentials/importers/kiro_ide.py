"""Kiro IDE's `~/.aws/sso/cache/kiro-auth-token.json` (docs/KIRO-PROTOCOL.md §5.1).

A Builder ID / IAM Identity Center login also needs its OIDC client registration
`{clientIdHash}.json` beside it.
"""

from __future__ import annotations

import re

from kirod.credentials.importers.record import (
    DEFAULT_REGION,
    OIDC_PROVIDERS,
    ImportedAccount,
    Record,
    imported_account,
    json_object,
    social_provider,
)
from kirod.upstream.secrets import AuthKind, Credentials

_KIRO_IDE_FILE = "Kiro IDE token file (kiro-auth-token.json)"

_CLIENT_ID_HASH = re.compile(r"[A-Za-z0-9_-]{1,128}")
_IDE_OIDC_PROVIDERS = {"builderid": AuthKind.BUILDER_ID, "enterprise": AuthKind.IDC}
_IDE_METHODS_BY_PROVIDER = {
    "google": "social",
    "github": "social",
    "builderid": "idc",
    "enterprise": "idc",
    "externalidp": "external_idp",
}


def parse_kiro_ide(
    token_json: str | bytes, registration_json: str | bytes | None = None
) -> ImportedAccount:
    """Parse kiro-auth-token.json; an IdC token also needs its `{clientIdHash}.json`.

    A registration given with a social or external-IdP token is ignored: the cache directory keeps
    registrations of earlier logins, and kiroctl may pass one along.
    """
    token = Record(json_object(token_json, _KIRO_IDE_FILE), _KIRO_IDE_FILE)
    method = _ide_auth_method(token)
    if method == "social":
        return _ide_social(token)
    if method == "idc":
        return _ide_oidc(token, registration_json)
    return _ide_external_idp(token)


def _ide_auth_method(token: Record) -> str:
    method = (token.text("authMethod") or "").lower()
    if method in ("social", "idc", "external_idp"):
        return method
    if method:
        raise token.fail("authMethod is not one of social, IdC, external_idp")
    provider = (token.text("provider") or "").lower()
    if provider in _IDE_METHODS_BY_PROVIDER:  # older files carry only the provider
        return _IDE_METHODS_BY_PROVIDER[provider]
    raise token.fail("authMethod is missing and provider does not tell the login kind")


def _ide_social(token: Record) -> ImportedAccount:
    provider = social_provider(token.text("provider"))
    arn = token.profile_arn("profileArn")
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken"),
        expires_at=token.time("expiresAt"),
        provider=provider,
    )
    return imported_account(AuthKind.SOCIAL, "kiro-ide", credentials, arn, DEFAULT_REGION, provider)


def _ide_oidc(token: Record, registration_json: str | bytes | None) -> ImportedAccount:
    client_id_hash = token.require("clientIdHash")
    if not _CLIENT_ID_HASH.fullmatch(client_id_hash):
        raise token.fail("clientIdHash is not a cache file name")
    provider = token.text("provider")
    kind = _IDE_OIDC_PROVIDERS.get((provider or "").lower())
    if kind is None:
        raise token.fail("provider of an IdC login must be BuilderId or Enterprise")
    if registration_json is None:
        raise token.fail(
            f"an IdC login cannot be refreshed without its client registration: also provide "
            f"~/.aws/sso/cache/{client_id_hash}.json"
        )
    where = f"Kiro IDE client registration ({client_id_hash}.json)"
    registration = Record(json_object(registration_json, where), where)
    if {"accessToken", "refreshToken"} & registration.data.keys():
        raise registration.fail(
            f"this is a token file, not a client registration; provide "
            f"~/.aws/sso/cache/{client_id_hash}.json"
        )
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken"),
        expires_at=token.time("expiresAt"),
        client_id=registration.secret("clientId"),
        client_secret=registration.secret("clientSecret"),
        client_secret_expires_at=registration.time("expiresAt"),
        scopes=registration.scopes("scopes"),
        provider=OIDC_PROVIDERS[kind],
        start_url=token.text("startUrl") or registration.text("startUrl"),
    )
    arn = token.profile_arn("profileArn")
    auth_region = token.region("region") or DEFAULT_REGION
    return imported_account(kind, "kiro-ide", credentials, arn, auth_region)


def _ide_external_idp(token: Record) -> ImportedAccount:
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken", kiro_issued=False),
        expires_at=token.time("expiresAt"),
        client_id=token.secret("clientId"),
        client_secret=token.optional_secret("clientSecret"),
        token_endpoint=token.https_url("tokenEndpoint"),
        scopes=token.scopes("scopes"),
        provider="ExternalIdp",
    )
    # Kiro IDE keeps an external-IdP login's profile ARN in its extension storage, not here.
    arn = token.profile_arn("profileArn")
    return imported_account(AuthKind.EXTERNAL_IDP, "kiro-ide", credentials, arn, DEFAULT_REGION)
