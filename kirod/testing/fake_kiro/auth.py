"""The auth endpoints: Kiro's social refresh and PKCE login, and AWS SSO OIDC
(docs/KIRO-PROTOCOL.md §5.2 to §5.5).

Handlers get the body already parsed (`{}` when it is not a JSON object). Error bodies follow
each service: Kiro auth answers `{"message": …}`; SSO OIDC answers
`{"error", "error_description"}` with the exception name in `x-amzn-errortype`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from yarl import URL

from kirod.testing.fake_kiro.tokens import OIDC_SCOPES, AuthKind, TokenRegistry, TokenSet

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"

_OIDC_ERRORS: dict[str, tuple[int, str, str]] = {
    "authorization_pending": (400, "AuthorizationPendingException", "Authorization is pending."),
    "slow_down": (400, "SlowDownException", "Client is polling too quickly."),
    "access_denied": (400, "AccessDeniedException", "The user denied the authorization."),
    "expired_token": (400, "ExpiredTokenException", "The device code has expired."),
    "invalid_grant": (400, "InvalidGrantException", "Invalid grant provided"),
    "invalid_client": (401, "InvalidClientException", "Invalid client provided"),
    "invalid_request": (400, "InvalidRequestException", "Invalid request"),
    "unsupported_grant_type": (400, "UnsupportedGrantTypeException", "Unsupported grant type"),
}
"""OIDC error code → (status, x-amzn-errortype, error_description)."""


async def social_refresh(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`POST /refreshToken {refreshToken}`; the refresh token rotates only if configured."""
    token_set = tokens.refresh(data.get("refreshToken"), AuthKind.SOCIAL)
    if token_set is None:
        return web.json_response({"message": "Invalid refresh token provided"}, status=400)
    return web.json_response(_social_tokens(token_set))


async def social_login(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`GET /login?…&code_challenge=…`: approves at once and redirects with a code. A fake-only
    `subscription` parameter sets the plan of the account the code will create."""
    query = request.query
    redirect_uri, challenge = query.get("redirect_uri"), query.get("code_challenge")
    if not redirect_uri or not challenge or query.get("code_challenge_method") != "S256":
        return web.json_response({"message": "Invalid login request."}, status=400)
    code = tokens.start_pkce(challenge, redirect_uri, query.get("subscription", "KIRO PRO"))
    location = URL(redirect_uri).update_query(code=code, state=query.get("state", ""))
    return web.Response(status=302, headers={"Location": str(location)})


async def social_token(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`POST /oauth/token {code, code_verifier, redirect_uri}` → a new social account."""
    token_set = tokens.finish_pkce(
        data.get("code"), data.get("code_verifier"), data.get("redirect_uri")
    )
    if token_set is None:
        return web.json_response({"message": "Invalid authorization code."}, status=400)
    return web.json_response(_social_tokens(token_set))


async def oidc_register(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`POST /client/register` (RegisterClient)."""
    if not isinstance(data.get("clientName"), str) or not isinstance(data.get("clientType"), str):
        return _oidc_error("invalid_request")
    client = tokens.register_client()
    return web.json_response(
        {
            "clientId": client.client_id,
            "clientSecret": client.secret,
            "clientIdIssuedAt": int(tokens.now()),
            "clientSecretExpiresAt": int(client.expires_at),
            "scopes": data.get("scopes", list(OIDC_SCOPES)),
        }
    )


async def oidc_device_authorization(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`POST /device_authorization` (StartDeviceAuthorization)."""
    if not tokens.client_valid(data.get("clientId"), data.get("clientSecret")):
        return _oidc_error("invalid_client")
    device_code, user_code, flow = tokens.start_device_authorization(data["clientId"])
    verification = f"{request.scheme}://{request.host}/device"
    return web.json_response(
        {
            "deviceCode": device_code,
            "userCode": user_code,
            "verificationUri": verification,
            "verificationUriComplete": f"{verification}?user_code={user_code}",
            "expiresIn": flow.expires_in_s,
            "interval": flow.interval_s,
        }
    )


async def oidc_token(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """`POST /token` (CreateToken): camelCase JSON only; snake_case or a form is an unknown
    client, as the real service answers (docs/KIRO-PROTOCOL.md §5.3)."""
    client_id = data.get("clientId")
    if not isinstance(client_id, str) or not tokens.client_valid(
        client_id, data.get("clientSecret")
    ):
        return _oidc_error("invalid_client")
    grant = data.get("grantType")
    if grant == "refresh_token":
        token_set = tokens.refresh(data.get("refreshToken"), AuthKind.IDC, client_id)
        if token_set is None:
            return _oidc_error("invalid_grant", "Invalid refresh token provided")
        return web.json_response(_oidc_tokens(token_set))
    if grant == DEVICE_GRANT:
        result = tokens.poll_device(client_id, data.get("deviceCode"))
        if isinstance(result, str):
            return _oidc_error(result)
        return web.json_response(_oidc_tokens(result))
    return _oidc_error("unsupported_grant_type")


async def external_idp_token(
    tokens: TokenRegistry, request: web.Request, data: dict[str, Any]
) -> web.Response:
    """A tenant's OAuth token endpoint (Entra ID / Okta, docs/UPSTREAM.md §5.5): a form post
    `grant_type=refresh_token&client_id=…&refresh_token=…[&scope=…]` from a public client,
    answered in snake_case; `data` is the parsed form. JSON bodies are refused, as a real
    OAuth endpoint does."""
    if not request.content_type.startswith("application/x-www-form-urlencoded"):
        return _oauth_error(400, "invalid_request", "The request body must be form-encoded.")
    if data.get("grant_type") != "refresh_token":
        return _oauth_error(400, "unsupported_grant_type", "Unsupported grant type.")
    client_id = data.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        return _oauth_error(400, "invalid_request", "client_id is required.")
    token_set = tokens.refresh(data.get("refresh_token"), AuthKind.EXTERNAL_IDP, client_id)
    if token_set is None:
        return _oauth_error(400, "invalid_grant", "AADSTS70000: The refresh token is invalid.")
    return web.json_response(
        {
            "token_type": "Bearer",
            "scope": data.get("scope", ""),
            "expires_in": token_set.expires_in,
            "access_token": token_set.access_token,
            "refresh_token": token_set.refresh_token,
        }
    )


def _oauth_error(status: int, code: str, description: str) -> web.Response:
    return web.json_response({"error": code, "error_description": description}, status=status)


def _social_tokens(token_set: TokenSet) -> dict[str, Any]:
    return {
        "accessToken": token_set.access_token,
        "expiresIn": token_set.expires_in,
        "profileArn": token_set.profile_arn,
        "refreshToken": token_set.refresh_token,
    }


def _oidc_tokens(token_set: TokenSet) -> dict[str, Any]:
    return {
        "accessToken": token_set.access_token,
        "expiresIn": token_set.expires_in,
        "refreshToken": token_set.refresh_token,
        "tokenType": "Bearer",
        "idToken": None,
    }


def _oidc_error(code: str, description: str | None = None) -> web.Response:
    status, error_type, default = _OIDC_ERRORS[code]
    return web.json_response(
        {"error": code, "error_description": description or default},
        status=status,
        headers={"x-amzn-errortype": error_type},
    )
