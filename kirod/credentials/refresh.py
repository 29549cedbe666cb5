"""Token refresh for each kind of account (docs/KIRO-PROTOCOL.md §5.2, §5.3; external IdP:
docs/UPSTREAM.md §5.5).

These functions only talk HTTP; single-flight and persistence (compare-and-swap on the account's
generation) belong to the account layer, which calls `refresh` when a token nears expiry.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import RefreshError, UpstreamError, UpstreamHttpError
from kirod.upstream.secrets import AuthKind, Credentials

DEFAULT_EXPIRES_IN_S = 3600
# OAuth / Kiro answers that mean the refresh token (or the client registration) is dead.
PERMANENT_CODES = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})


@dataclass(frozen=True)
class Refreshed:
    credentials: Credentials
    profile_arn: str | None  # social refresh reports the account's profile; OIDC does not


def needs_refresh(credentials: Credentials, window_s: float, now: float | None = None) -> bool:
    if credentials.expires_at is None or credentials.refresh_token is None:
        return False
    return credentials.expires_at - (time.time() if now is None else now) <= window_s


def _permanent(error: UpstreamHttpError) -> bool:
    if error.reason in PERMANENT_CODES:
        return True
    text = error.upstream_message.lower()
    if "invalid refresh token" in text or "client is expired" in text:
        return True
    return error.status in (400, 401)


def _string(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) and value else None


def registration_expired(credentials: Credentials, now: float | None = None) -> bool:
    """Whether the OIDC client registration (IdC, Builder ID) is past `clientSecretExpiresAt`:
    then no refresh can succeed and the account needs a new login (which registers anew)."""
    expiry = credentials.client_secret_expires_at
    return expiry is not None and expiry <= (time.time() if now is None else now)


async def _external_idp_refresh(client: KiroClient, account: UpstreamAccount) -> dict[str, Any]:
    """The tenant's own OAuth token endpoint (Entra ID, Okta; docs/UPSTREAM.md §5.5): a form post
    as a public client (no secret), answered in snake_case."""
    credentials = account.credentials
    if not credentials.token_endpoint or not credentials.client_id:
        raise RefreshError(
            "the account has no token endpoint or client id for its identity provider; "
            "import it again from Kiro IDE or kiro-cli",
            permanent=True,
        )
    assert credentials.refresh_token is not None
    fields = {
        "grant_type": "refresh_token",
        "client_id": credentials.client_id,
        "refresh_token": credentials.refresh_token,
    }
    if credentials.scopes:
        fields["scope"] = " ".join(credentials.scopes)
    return await client.post_form(
        account.id, credentials.token_endpoint, fields, proxy_url=account.proxy_url
    )


def _expires_at(doc: dict[str, Any]) -> float:
    expires_in = doc.get("expiresIn", doc.get("expires_in"))
    seconds = expires_in if isinstance(expires_in, int | float) and expires_in > 0 else None
    return time.time() + float(seconds or DEFAULT_EXPIRES_IN_S)


async def refresh(client: KiroClient, account: UpstreamAccount) -> Refreshed:
    """Exchange the account's refresh token for a new access token (and maybe a new refresh one)."""
    credentials = account.credentials
    if account.auth_kind is AuthKind.API_KEY or not credentials.refresh_token:
        raise RefreshError("this account has no refresh token; log in again", permanent=True)
    try:
        if account.auth_kind is AuthKind.SOCIAL:
            url = f"{client.endpoints.auth_url(account.auth_region)}/refreshToken"
            doc = await client.post_json(
                account.id,
                url,
                {"refreshToken": credentials.refresh_token},
                proxy_url=account.proxy_url,
            )
        elif account.auth_kind in (AuthKind.BUILDER_ID, AuthKind.IDC):
            if not credentials.client_id or not credentials.client_secret:
                raise RefreshError("the account's client registration is missing", permanent=True)
            if registration_expired(credentials):
                raise RefreshError(
                    "the account's OIDC client registration has expired "
                    "(clientSecretExpiresAt passed); log in again",
                    permanent=True,
                )
            url = f"{client.endpoints.oidc_url(account.auth_region)}/token"
            doc = await client.post_json(
                account.id,
                url,
                {
                    "clientId": credentials.client_id,
                    "clientSecret": credentials.client_secret,
                    "grantType": "refresh_token",
                    "refreshToken": credentials.refresh_token,
                },
                proxy_url=account.proxy_url,
            )
        else:
            doc = await _external_idp_refresh(client, account)
    except UpstreamHttpError as exc:
        if _permanent(exc):
            raise RefreshError(
                f"the refresh token was rejected ({exc.reason or exc.status}); log in again",
                permanent=True,
            ) from None
        raise RefreshError(f"token refresh failed ({exc.status})", permanent=False) from None
    except RefreshError:
        raise
    except UpstreamError as exc:
        raise RefreshError(f"token refresh failed: {exc}", permanent=False) from None

    access_token = _string(doc, "accessToken") or _string(doc, "access_token")
    if access_token is None:
        raise RefreshError("the refresh answer carried no access token", permanent=False)
    renewed = dataclasses.replace(
        credentials,
        access_token=access_token,
        refresh_token=(
            _string(doc, "refreshToken")
            or _string(doc, "refresh_token")
            or credentials.refresh_token
        ),
        expires_at=_expires_at(doc),
    )
    return Refreshed(credentials=renewed, profile_arn=_string(doc, "profileArn"))
