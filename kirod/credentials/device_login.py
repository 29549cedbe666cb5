"""Device-code login through AWS SSO OIDC, for Builder ID or an IdC start URL
(docs/KIRO-PROTOCOL.md §5.4).

`start` registers a client and asks for a device code; the caller shows the user code and URL,
then calls `poll` every `interval_s` until it returns credentials. The control API drives this
asynchronously, so neither function sleeps on its own.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass

from kirod.upstream.client import KiroClient
from kirod.upstream.errors import LoginError, UpstreamError, UpstreamHttpError
from kirod.upstream.secrets import AuthKind, Credentials

BUILDER_ID_START_URL = "https://view.awsapps.com/start"
DEFAULT_REGION = "us-east-1"
SCOPES = (
    "codewhisperer:completions",
    "codewhisperer:analysis",
    "codewhisperer:conversations",
)
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_STEP_S = 5


def _new_owner() -> str:
    return f"login-{uuid.uuid4()}"


@dataclass
class DeviceLogin:
    """One login in progress. The user sees `user_code` and `verification_uri_complete`."""

    region: str
    start_url: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_at: float
    interval_s: float
    client_id: str = dataclasses.field(repr=False)
    client_secret: str = dataclasses.field(repr=False)
    client_secret_expires_at: float | None = None
    device_code: str = dataclasses.field(default="", repr=False)
    # The new account's own proxy (`UpstreamAccount.proxy_url`), used for the login's calls too.
    proxy_url: str | None = dataclasses.field(default=None, repr=False)
    # Whose connections the login's calls take: its own, as an account's are, so that two
    # logins (two future accounts) never share one.
    owner: str = dataclasses.field(default_factory=_new_owner, repr=False)

    @property
    def auth_kind(self) -> AuthKind:
        return AuthKind.BUILDER_ID if self.start_url == BUILDER_ID_START_URL else AuthKind.IDC

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires_at


def _text(doc: dict[str, object], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise LoginError("bad_response", f"the login service's answer lacks {key}")
    return value


def _number(doc: dict[str, object], key: str, default: float) -> float:
    value = doc.get(key)
    return float(value) if isinstance(value, int | float) and value > 0 else default


async def start(
    client: KiroClient,
    *,
    start_url: str = BUILDER_ID_START_URL,
    region: str = DEFAULT_REGION,
    proxy_url: str | None = None,
) -> DeviceLogin:
    """Register a public client and request a device code (through `proxy_url`, the new
    account's proxy: None for the global one, `direct` for none)."""
    base = client.endpoints.oidc_url(region)
    owner = _new_owner()
    try:
        registration = await client.post_json(
            owner,
            f"{base}/client/register",
            {
                "clientName": "kirod",
                "clientType": "public",
                "scopes": list(SCOPES),
                "grantTypes": [DEVICE_GRANT, "refresh_token"],
            },
            proxy_url=proxy_url,
        )
        client_id = _text(registration, "clientId")
        client_secret = _text(registration, "clientSecret")
        device = await client.post_json(
            owner,
            f"{base}/device_authorization",
            {"clientId": client_id, "clientSecret": client_secret, "startUrl": start_url},
            proxy_url=proxy_url,
        )
    except UpstreamHttpError as exc:
        raise LoginError(
            exc.reason or "login_failed", f"the login service refused to start ({exc.status})"
        ) from None
    except UpstreamError as exc:
        raise LoginError("unreachable", f"cannot reach the login service: {exc}") from None
    secret_expiry = registration.get("clientSecretExpiresAt")
    return DeviceLogin(
        region=region,
        start_url=start_url,
        user_code=_text(device, "userCode"),
        verification_uri=_text(device, "verificationUri"),
        verification_uri_complete=str(
            device.get("verificationUriComplete") or _text(device, "verificationUri")
        ),
        expires_at=time.time() + _number(device, "expiresIn", 600),
        interval_s=_number(device, "interval", 5),
        client_id=client_id,
        client_secret=client_secret,
        client_secret_expires_at=float(secret_expiry)
        if isinstance(secret_expiry, int | float)
        else None,
        device_code=_text(device, "deviceCode"),
        proxy_url=proxy_url,
        owner=owner,
    )


async def poll(client: KiroClient, login: DeviceLogin) -> Credentials | None:
    """One token poll: credentials when the user approved, None while pending.

    `slow_down` lengthens `login.interval_s`; denial and expiry raise `LoginError`.
    """
    if login.expired:
        raise LoginError("expired_token", "the login code expired; start again")
    try:
        doc = await client.post_json(
            login.owner,
            f"{client.endpoints.oidc_url(login.region)}/token",
            {
                "clientId": login.client_id,
                "clientSecret": login.client_secret,
                "deviceCode": login.device_code,
                "grantType": DEVICE_GRANT,
            },
            proxy_url=login.proxy_url,
        )
    except UpstreamHttpError as exc:
        code = exc.reason or ""
        if code == "authorization_pending":
            return None
        if code == "slow_down":
            login.interval_s += SLOW_DOWN_STEP_S
            return None
        if code == "access_denied":
            raise LoginError(code, "the login was denied in the browser") from None
        if code == "expired_token":
            raise LoginError(code, "the login code expired; start again") from None
        raise LoginError(code or "login_failed", f"login failed ({exc.status})") from None
    except UpstreamError as exc:
        raise LoginError("unreachable", f"cannot reach the login service: {exc}") from None
    expires_in = _number(doc, "expiresIn", 3600)
    return Credentials(
        access_token=_text(doc, "accessToken"),
        refresh_token=_text(doc, "refreshToken"),
        expires_at=time.time() + expires_in,
        client_id=login.client_id,
        client_secret=login.client_secret,
        client_secret_expires_at=login.client_secret_expires_at,
        scopes=SCOPES,
        provider="BuilderId" if login.auth_kind is AuthKind.BUILDER_ID else "Enterprise",
        start_url=login.start_url,
    )
