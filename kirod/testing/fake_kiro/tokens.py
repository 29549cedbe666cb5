"""Every credential the fake hands out: accounts, access and refresh tokens, API keys, OIDC
clients, device codes and PKCE codes (docs/KIRO-PROTOCOL.md §5).

Tokens look like Kiro's (access `aoa…`, refresh `aor…` of ~230 characters, API keys `ksk_…`) and
are high-entropy, so a leak scan over logs finds them unambiguously; `issued()` lists every
secret ever minted for exactly that purpose. Thread-safe: tests mint accounts from their own
thread while the server runs on another.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import itertools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kirod.testing.fake_kiro.usage import Usage

BUILDER_ID_PROFILE_ARN = "arn:aws:codewhisperer:us-east-1:638616132270:profile/AAAACCCCXXXX"
"""The default profile kiro-cli uses for Builder ID logins (docs/KIRO-PROTOCOL.md §5.4)."""

API_KEY_TOKEN_TYPE = "API_KEY"  # noqa: S105 - the `tokentype` header value for `ksk_` keys
EXTERNAL_IDP_TOKEN_TYPE = "EXTERNAL_IDP"  # noqa: S105 - the header every external-IdP call needs
EXTERNAL_IDP_TOKEN_PATH = "/extidp/oauth2/token"  # noqa: S105 - the fake tenant's token endpoint
OIDC_SCOPES = ("codewhisperer:completions", "codewhisperer:analysis", "codewhisperer:conversations")


class AuthKind(enum.StrEnum):
    SOCIAL = "social"  # Google / GitHub via Kiro's auth service; refresh at /refreshToken
    IDC = "idc"  # Builder ID or IAM Identity Center via SSO OIDC; refresh at /token
    API_KEY = "api_key"  # headless `ksk_` key, sent with `tokentype: API_KEY`; no refresh
    EXTERNAL_IDP = "external_idp"  # Entra/Okta token, `TokenType: EXTERNAL_IDP`; form refresh


class DeviceOutcome(enum.StrEnum):
    SUCCESS = "success"
    ACCESS_DENIED = "access_denied"
    EXPIRED_TOKEN = "expired_token"  # noqa: S105 - an OAuth error code


@dataclass(frozen=True)
class DeviceFlow:
    """How the next device authorizations behave when polled: `pending_polls` answers of
    authorization_pending, then `slow_down_polls` of slow_down, then the outcome."""

    pending_polls: int = 2
    slow_down_polls: int = 0
    outcome: DeviceOutcome = DeviceOutcome.SUCCESS
    interval_s: int = 1
    expires_in_s: int = 600
    subscription: str = "KIRO PRO"


@dataclass(frozen=True)
class Account:
    account_id: str
    kind: AuthKind
    provider: str  # Google, Github, BuilderId, Enterprise, ApiKey
    profile_arn: str
    user_id: str
    email: str
    region: str
    usage: Usage
    client_id: str | None = None
    suspended: bool = False
    # Some external-IdP accounts refuse the root additionalModelRequestFields whatever the model
    # (docs/KIRO-PROTOCOL.md §2.6: the protocol notes' finding, which no 2026 probe contradicts).
    # How the 400 is worded is not published: the fake answers the generic REQUEST_BODY_INVALID.
    refuses_request_fields: bool = False
    extra_profiles: tuple[str, ...] = ()  # more profile ARNs ListAvailableProfiles reports
    # Not yet reached by the 1M GPT-5.6 rollout (per account from 2026-09-14: yupanzi/kiro2claude
    # docs/PITFALLS.md, 2026-10-07): every model has its listed window (`catalog.Model.window`).
    listed_windows: bool = False
    egress_gated: bool = False  # its requests leave from a region Kiro serves no Claude model

    def profiles(self) -> tuple[str, ...]:
        return (self.profile_arn, *self.extra_profiles)


@dataclass(frozen=True)
class TokenSet:
    """An account's current credentials, as a test hands them to kirod."""

    account_id: str
    kind: AuthKind
    provider: str
    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    expires_in: int
    expires_at: float
    profile_arn: str
    region: str
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_secret_expires_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase, close to Kiro IDE's token file plus the registration fields."""
        data = {
            "accountId": self.account_id,
            "authMethod": self.kind.value,
            "provider": self.provider,
            "accessToken": self.access_token,
            "refreshToken": self.refresh_token,
            "expiresIn": self.expires_in,
            "expiresAt": self.expires_at,
            "profileArn": self.profile_arn,
            "region": self.region,
            "clientId": self.client_id,
            "clientSecret": self.client_secret,
            "clientSecretExpiresAt": self.client_secret_expires_at,
        }
        return {key: value for key, value in data.items() if value is not None}


@dataclass
class _Access:
    account_id: str
    expires_at: float


@dataclass(frozen=True)
class OidcClient:
    client_id: str
    secret: str
    expires_at: float


@dataclass
class _Device:
    client_id: str
    flow: DeviceFlow
    expires_at: float
    polls: int = 0


@dataclass(frozen=True)
class _Pkce:
    challenge: str
    redirect_uri: str
    subscription: str


class TokenRegistry:
    """The credential state of the fake. `rotate_refresh` makes every refresh return a new
    refresh token and invalidate the old one (the service may or may not rotate,
    docs/KIRO-PROTOCOL.md §5.2)."""

    def __init__(
        self,
        *,
        access_ttl_s: int = 3600,
        rotate_refresh: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.access_ttl_s = access_ttl_s
        self.rotate_refresh = rotate_refresh
        self.device_flow = DeviceFlow()
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._accounts: dict[str, Account] = {}
        self._access: dict[str, _Access] = {}
        self._refresh: dict[str, str] = {}  # refresh token -> account id
        self._refresh_issued: dict[str, list[str]] = {}  # account id -> its refresh tokens
        self._api_keys: dict[str, str] = {}  # key -> account id
        self._clients: dict[str, OidcClient] = {}
        self._devices: dict[str, _Device] = {}
        self._pkce: dict[str, _Pkce] = {}
        self._issued: list[str] = []

    def now(self) -> float:
        return self._clock()

    # Minting

    def create_account(
        self,
        kind: AuthKind,
        *,
        provider: str | None = None,
        subscription: str = "KIRO PRO",
        region: str = "us-east-1",
        client_id: str | None = None,
        profile_region: str | None = None,
        extra_profiles: int = 0,
    ) -> TokenSet:
        """A new account with fresh credentials; IdC accounts get an OIDC client if none.

        `profile_region`: where its profile lives (default `region`, the login's); with
        `extra_profiles`, ListAvailableProfiles reports that many more, alternately in
        eu-central-1 and us-east-1."""
        with self._lock:
            number = next(self._ids)
            if kind is AuthKind.IDC and client_id is None:
                client_id = self._register_client_locked().client_id
            elif kind is AuthKind.EXTERNAL_IDP and client_id is None:
                client_id = f"{secrets.token_hex(4)}-public-client"  # a public client, no secret
            account = Account(
                account_id=f"acct-{number}",
                kind=kind,
                provider=provider or _DEFAULT_PROVIDER[kind],
                profile_arn=_profile_arn(kind, provider, profile_region or region, number),
                user_id=f"d-{secrets.token_hex(5)}.{secrets.token_hex(8)}",
                email=f"user{number}@example.com",
                region=region,
                usage=Usage.for_plan(subscription, self.now()),
                client_id=client_id,
                extra_profiles=tuple(
                    _profile_arn(kind, "extra", ("eu-central-1", "us-east-1")[i % 2], number, i + 1)
                    for i in range(extra_profiles)
                ),
            )
            self._accounts[account.account_id] = account
            if kind is AuthKind.API_KEY:
                key = self._mint("ksk_", 40)
                self._api_keys[key] = account.account_id
                return self._token_set_locked(account, key, None, expires_in=0)
            refresh = self._mint_refresh_locked(kind)
            self._refresh[refresh] = account.account_id
            self._refresh_issued[account.account_id] = [refresh]
            return self._issue_access_locked(account, refresh)

    def register_client(self) -> OidcClient:
        with self._lock:
            return self._register_client_locked()

    # Lookups

    def authenticate(self, bearer: str, token_type: str | None) -> Account | None:
        """The account behind a bearer, or None if unknown, expired or revoked."""
        with self._lock:
            if bearer.startswith("ksk_"):
                account_id = (
                    self._api_keys.get(bearer) if token_type == API_KEY_TOKEN_TYPE else None
                )
            else:
                access = self._access.get(bearer)
                live = access is not None and self.now() < access.expires_at
                account_id = access.account_id if live and access is not None else None
            account = self._accounts.get(account_id) if account_id else None
            if account is not None and account.kind is AuthKind.EXTERNAL_IDP:
                # Without the header, both Kiro planes answer 403 (docs/UPSTREAM.md §5.5).
                external = (token_type or "").upper() == EXTERNAL_IDP_TOKEN_TYPE
                return account if external else None
            return account

    def account(self, account_id: str) -> Account:
        with self._lock:
            return self._accounts[account_id]

    def accounts(self) -> list[Account]:
        with self._lock:
            return list(self._accounts.values())

    def client_valid(self, client_id: Any, client_secret: Any) -> bool:
        with self._lock:
            client = self._clients.get(client_id) if isinstance(client_id, str) else None
            return (
                client is not None
                and client.secret == client_secret
                and self.now() < client.expires_at
            )

    def issued(self) -> tuple[str, ...]:
        """Every secret ever minted, for leak scans."""
        with self._lock:
            return tuple(self._issued)

    def refresh_tokens(self, account_id: str) -> tuple[str, ...]:
        """Every refresh token issued to the account, oldest first: the last is the newest."""
        with self._lock:
            return tuple(self._refresh_issued.get(account_id, ()))

    # Changes

    def update_account(self, account_id: str, update: Callable[[Account], Account]) -> Account:
        with self._lock:
            account = update(self._accounts[account_id])
            self._accounts[account_id] = account
            return account

    def expire_access_token(self, access_token: str) -> None:
        """Make a token invalid now, as if its hour had passed."""
        with self._lock:
            self._access[access_token].expires_at = self.now() - 1

    def expire_account_tokens(self, account_id: str) -> None:
        with self._lock:
            for access in self._access.values():
                if access.account_id == account_id:
                    access.expires_at = self.now() - 1

    def revoke_refresh_token(self, refresh_token: str) -> None:
        with self._lock:
            self._refresh.pop(refresh_token, None)

    # Refresh and login flows

    def refresh(
        self, refresh_token: Any, kind: AuthKind, client_id: str | None = None
    ) -> TokenSet | None:
        """A new access token for a valid refresh token of `kind` (and client, for OIDC)."""
        with self._lock:
            account_id = (
                self._refresh.get(refresh_token) if isinstance(refresh_token, str) else None
            )
            account = self._accounts.get(account_id) if account_id else None
            if account is None or account.kind is not kind or account.client_id != client_id:
                return None
            if self.rotate_refresh:
                del self._refresh[refresh_token]
                refresh_token = self._mint_refresh_locked(kind)
                self._refresh[refresh_token] = account.account_id
                self._refresh_issued[account.account_id].append(refresh_token)
            return self._issue_access_locked(account, refresh_token)

    def start_device_authorization(self, client_id: str) -> tuple[str, str, DeviceFlow]:
        """Register a device code for the current `device_flow`; return (device, user) codes."""
        with self._lock:
            flow = self.device_flow
            device_code = self._mint("", 32)
            user_code = "-".join(secrets.token_hex(2).upper() for _ in range(2))
            self._devices[device_code] = _Device(client_id, flow, self.now() + flow.expires_in_s)
            return device_code, user_code, flow

    def poll_device(self, client_id: str, device_code: Any) -> TokenSet | str:
        """One poll of /token: the token set, or the OIDC error code to answer."""
        with self._lock:
            device = self._devices.get(device_code) if isinstance(device_code, str) else None
            if device is None or device.client_id != client_id:
                return "invalid_grant"
            device.polls += 1
            flow = device.flow
            if self.now() >= device.expires_at:
                return "expired_token"
            if device.polls <= flow.pending_polls:
                return "authorization_pending"
            if device.polls <= flow.pending_polls + flow.slow_down_polls:
                return "slow_down"
            del self._devices[device_code]
            if flow.outcome is not DeviceOutcome.SUCCESS:
                return flow.outcome.value
        return self.create_account(
            AuthKind.IDC, subscription=flow.subscription, client_id=client_id
        )

    def start_pkce(self, challenge: str, redirect_uri: str, subscription: str) -> str:
        """Remember an S256 challenge; return the authorization code for the redirect."""
        with self._lock:
            code = self._mint("", 32)
            self._pkce[code] = _Pkce(challenge, redirect_uri, subscription)
            return code

    def finish_pkce(self, code: Any, verifier: Any, redirect_uri: Any) -> TokenSet | None:
        """Exchange a code once; None if unknown, reused, or the verifier does not match."""
        with self._lock:
            pkce = self._pkce.pop(code, None) if isinstance(code, str) else None
        if pkce is None or not isinstance(verifier, str) or redirect_uri != pkce.redirect_uri:
            return None
        digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
        if base64.urlsafe_b64encode(digest).decode().rstrip("=") != pkce.challenge:
            return None
        return self.create_account(AuthKind.SOCIAL, subscription=pkce.subscription)

    # Internals (lock held)

    def _mint(self, prefix: str, nbytes: int) -> str:
        token = prefix + secrets.token_urlsafe(nbytes)
        self._issued.append(token)
        return token

    def _mint_refresh_locked(self, kind: AuthKind) -> str:
        """Kiro's `aor…`; an Entra-style `1.AXoA…` (shorter, another shape) for external IdPs."""
        return self._mint("1.AXoA", 60) if kind is AuthKind.EXTERNAL_IDP else self._mint("aor", 172)

    def _register_client_locked(self) -> OidcClient:
        client = OidcClient(self._mint("", 16), self._mint("", 96), self.now() + 90 * 86400)
        self._clients[client.client_id] = client
        return client

    def _issue_access_locked(self, account: Account, refresh_token: str) -> TokenSet:
        access_token = self._mint("aoa", 120)
        expires_at = self.now() + self.access_ttl_s
        self._access[access_token] = _Access(account.account_id, expires_at)
        return self._token_set_locked(account, access_token, refresh_token, self.access_ttl_s)

    def _token_set_locked(
        self, account: Account, access_token: str, refresh_token: str | None, expires_in: int
    ) -> TokenSet:
        client = self._clients.get(account.client_id) if account.client_id else None
        return TokenSet(
            account_id=account.account_id,
            kind=account.kind,
            provider=account.provider,
            access_token=access_token,
            refresh_token=refresh_token,
            expires_in=expires_in,
            expires_at=self.now() + expires_in if expires_in else 0.0,
            profile_arn=account.profile_arn,
            region=account.region,
            client_id=account.client_id,
            client_secret=client.secret if client else None,
            client_secret_expires_at=client.expires_at if client else None,
        )


_DEFAULT_PROVIDER = {
    AuthKind.SOCIAL: "Google",
    AuthKind.IDC: "BuilderId",
    AuthKind.API_KEY: "ApiKey",
    AuthKind.EXTERNAL_IDP: "ExternalIdp",
}


def _profile_arn(
    kind: AuthKind, provider: str | None, region: str, number: int, extra: int = 0
) -> str:
    if kind is AuthKind.IDC and provider in (None, "BuilderId"):
        return BUILDER_ID_PROFILE_ARN
    suffix = f"X{extra}" if extra else ""
    return (
        f"arn:aws:codewhisperer:{region}:{100000000000 + number}:profile/FAKE{number:08d}{suffix}"
    )
