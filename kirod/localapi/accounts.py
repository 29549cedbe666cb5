"""Control routes for accounts: list, get, import, remove, enable, disable, set the proxy, refresh,
probe, overage, and device-code logins. Each parses its request, calls `AccountRegistry` or
`Logins` once, and answers JSON. Secrets never leave the daemon."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from kirod.config import Settings
from kirod.control.logins import MAX_WAIT_S
from kirod.errors import ControlError, ControlNotFound, InvalidControlRequest
from kirod.localapi.control import CONTROL, json_body
from kirod.localapi.keys import credits_limit

_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")


def max_body_bytes(settings: Settings) -> int:
    """The largest import request: the file and a companion, base64-encoded, in JSON."""
    return (settings.import_max_bytes + 4 * 1024 * 1024) * 4 // 3 + 64 * 1024


def _decode_b64(body: dict[str, Any], key: str) -> bytes | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidControlRequest(f"{key} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidControlRequest(f"{key} is not valid base64") from None


async def list_accounts(request: web.Request) -> web.Response:
    return web.json_response({"accounts": await request.app[CONTROL].accounts.all()})


async def get_account(request: web.Request) -> web.Response:
    return web.json_response(
        await request.app[CONTROL].accounts.get(request.match_info["account_id"])
    )


async def remove_account(request: web.Request) -> web.Response:
    await request.app[CONTROL].accounts.remove(request.match_info["account_id"])
    return web.json_response({"removed": True})


async def import_accounts(request: web.Request) -> web.Response:
    """Body: {"content_b64", "companion_b64"?, "label"?} for a file, or {"api_key"}."""
    control = request.app[CONTROL]
    settings = control.settings
    if (request.content_length or 0) > max_body_bytes(settings):
        limit = settings.import_max_bytes
        raise ControlError(413, "too_large", f"the import exceeds import_max_bytes ({limit})")
    body = await json_body(request)
    label = body.get("label")
    if "api_key" in body:
        key = body["api_key"]
        if not isinstance(key, str):
            raise InvalidControlRequest("api_key must be a string")
        if label is not None and not isinstance(label, str):
            raise InvalidControlRequest("label must be a string")
        imported = await control.accounts.import_api_key(key, label)
    else:
        content = _decode_b64(body, "content_b64")
        if content is None:
            raise InvalidControlRequest("give content_b64 or api_key")
        companion = _decode_b64(body, "companion_b64")
        if label is not None and not isinstance(label, str):
            raise InvalidControlRequest("label must be a string")
        imported = await control.accounts.import_upload(content, companion, label)
    return web.json_response({"accounts": imported}, status=201)


async def enable_account(request: web.Request) -> web.Response:
    return web.json_response(
        await request.app[CONTROL].accounts.enable(request.match_info["account_id"])
    )


async def disable_account(request: web.Request) -> web.Response:
    return web.json_response(
        await request.app[CONTROL].accounts.disable(request.match_info["account_id"])
    )


async def set_account_proxy(request: web.Request) -> web.Response:
    """Body: {"proxy_url": URL | "direct" | null}; null goes back to the global proxy_url."""
    body = await json_body(request)
    if "proxy_url" not in body:
        raise InvalidControlRequest('give proxy_url: a proxy URL, "direct", or null')
    proxy_url = body["proxy_url"]
    if proxy_url is not None and not isinstance(proxy_url, str):
        raise InvalidControlRequest("proxy_url must be a string or null")
    return web.json_response(
        await request.app[CONTROL].accounts.set_proxy(request.match_info["account_id"], proxy_url)
    )


async def set_account_profile(request: web.Request) -> web.Response:
    """Body: {"profile_arn": ARN}: the Kiro profile the account uses (ends `needs_profile`)."""
    body = await json_body(request)
    profile_arn = body.get("profile_arn")
    if not isinstance(profile_arn, str) or not profile_arn.strip():
        raise InvalidControlRequest(
            "give profile_arn: arn:aws:codewhisperer:<region>:<account>:profile/<id>"
        )
    return web.json_response(
        await request.app[CONTROL].accounts.set_profile(
            request.match_info["account_id"], profile_arn
        )
    )


async def refresh_account(request: web.Request) -> web.Response:
    return web.json_response(
        await request.app[CONTROL].accounts.refresh(request.match_info["account_id"])
    )


async def probe_account(request: web.Request) -> web.Response:
    return web.json_response(
        await request.app[CONTROL].accounts.probe(request.match_info["account_id"])
    )


async def set_account_overage(request: web.Request) -> web.Response:
    """Body: {"enabled": true | false}: overage on or off at Kiro; answers the account probed."""
    body = await json_body(request)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise InvalidControlRequest("give enabled: true or false")
    return web.json_response(
        await request.app[CONTROL].accounts.set_overage(request.match_info["account_id"], enabled)
    )


async def set_account_budget(request: web.Request) -> web.Response:
    """Body: {"credits_per_day", "credits_per_month"} (each null for none) and
    "allow_overage": true | false; the whole set is replaced. Answers the account."""
    body = await json_body(request)
    allow = body.get("allow_overage", False)
    if not isinstance(allow, bool):
        raise InvalidControlRequest("allow_overage must be true or false")
    return web.json_response(
        await request.app[CONTROL].accounts.set_budget(
            request.match_info["account_id"],
            day=credits_limit(body, "credits_per_day"),
            month=credits_limit(body, "credits_per_month"),
            allow_overage=allow,
        )
    )


def _login_target(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The IAM Identity Center start URL and region asked for; None: Builder ID's."""
    start_url = body.get("start_url") or None
    region = body.get("region") or None
    if not isinstance(start_url, str | None) or not isinstance(region, str | None):
        raise InvalidControlRequest("start_url and region must be strings")
    if start_url is not None:
        parts = urlsplit(start_url)
        if parts.scheme != "https" or not parts.hostname:
            raise InvalidControlRequest("start_url must be an https URL such as https://d-…/start")
    if region is not None and not _REGION.fullmatch(region):
        raise InvalidControlRequest("region must look like us-east-1")
    return start_url, region


async def start_login(request: web.Request) -> web.Response:
    """Body: {"start_url"?, "region"?, "proxy_url"?}; Builder ID in us-east-1 by default.

    `proxy_url` (a URL or "direct") is the new account's own proxy, used by the login too.
    """
    body = await json_body(request)
    start_url, region = _login_target(body)
    proxy_url = body.get("proxy_url")
    if proxy_url is not None and not isinstance(proxy_url, str):
        raise InvalidControlRequest("proxy_url must be a string")
    login = await request.app[CONTROL].logins.start(
        start_url=start_url, region=region, proxy_url=proxy_url
    )
    return web.json_response(login.to_json(), status=201)


async def get_login(request: web.Request) -> web.Response:
    """`?wait=S` answers as soon as the login ends, or after S seconds (at most MAX_WAIT_S)."""
    logins = request.app[CONTROL].logins
    login_id = request.match_info["login_id"]
    try:
        wait_s = float(request.query.get("wait", "0"))
    except ValueError:
        raise InvalidControlRequest("wait must be a number of seconds") from None
    if not 0 <= wait_s <= MAX_WAIT_S:
        raise InvalidControlRequest(f"wait must be from 0 to {MAX_WAIT_S:g}")
    login = await logins.wait(login_id, wait_s) if wait_s else logins.get(login_id)
    if login is None:
        raise ControlNotFound("login")
    return web.json_response(login.to_json())


async def cancel_login(request: web.Request) -> web.Response:
    login = request.app[CONTROL].logins.cancel(request.match_info["login_id"])
    if login is None:
        raise ControlNotFound("login")
    return web.json_response(login.to_json())
