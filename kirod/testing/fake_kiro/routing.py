"""Which operation a request names (docs/KIRO-PROTOCOL.md §1.3), and which region's host it reached.

IDE paths name theirs by suffix (`…/getUsageLimits`, `…/generateAssistantResponse`, …), the CLI's
`POST /` by `x-amz-target`, JSON or awsJson1.0 alike.
"""

from __future__ import annotations

from aiohttp import web

from kirod.testing.fake_kiro.tokens import EXTERNAL_IDP_TOKEN_PATH

API_REGIONS = ("us-east-1", "eu-central-1")
"""Regions the fake serves; tests tell them apart with `Endpoints(kiro=base + "/{region}")`."""


def host_region(path: str) -> tuple[str | None, str]:
    """(region, rest of the path): a leading `/us-east-1` or `/eu-central-1` segment names the
    host's region; a path without one is answered as by a host of every region."""
    first, _, rest = path.lstrip("/").partition("/")
    if first in API_REGIONS:
        return first, "/" + rest
    return None, path


def operation_of(request: web.Request, path: str) -> str | None:
    """The operation a request names, by `x-amz-target` on `/` or by path suffix
    (docs/KIRO-PROTOCOL.md §1.3)."""
    path = path.rstrip("/")
    if not path:
        target = request.headers.get("x-amz-target", "")
        return _TARGET_OPERATIONS.get(target.rpartition(".")[2])
    for suffix, operation in _PATH_OPERATIONS:
        if path.endswith(suffix):
            return operation
    return None


_TARGET_OPERATIONS = {
    "GenerateAssistantResponse": "chat",
    "SendMessage": "chat",
    "GetUsageLimits": "usage",
    "ListAvailableModels": "models",
    "ListAvailableProfiles": "profiles",
    "GetProfile": "profile",
    "InvokeMCP": "mcp",
}

# Longest suffixes first: `/oauth/token` must win over `/token`.
_PATH_OPERATIONS = (
    ("/generateAssistantResponse", "chat"),
    ("/getUsageLimits", "usage"),
    ("/ListAvailableModels", "models"),
    ("/ListAvailableProfiles", "profiles"),
    ("/mcp", "mcp"),
    ("/setUserPreference", "preference"),
    ("/refreshToken", "social_refresh"),
    ("/login", "social_login"),
    (EXTERNAL_IDP_TOKEN_PATH, "external_idp_token"),
    ("/oauth/token", "social_token"),
    ("/client/register", "oidc_register"),
    ("/device_authorization", "oidc_device"),
    ("/token", "oidc_token"),
)

OPERATIONS = frozenset(_TARGET_OPERATIONS.values()) | {name for _, name in _PATH_OPERATIONS}
"""Every operation the fake answers (`server.py` has a handler for each)."""
