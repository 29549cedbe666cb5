"""Control routes for accounts: list, get, import, remove, enable, disable, refresh, probe, and
device-code logins. Secrets never leave the daemon."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from kirod import log
from kirod.accounts.health import current_status
from kirod.config import Settings
from kirod.localapi.control import CONTROL, ControlError, json_body, not_found
from kirod.localapi.logins import MAX_WAIT_S, TooManyLogins
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.upstream.credentials import Credentials
from kirod.upstream.errors import CredentialImportError, LoginError, RefreshError, UpstreamError
from kirod.upstream.importers import ImportedAccount, ImportLimits, parse_api_key, parse_upload
from kirod.upstream.login import BUILDER_ID_START_URL, DEFAULT_REGION

logger = logging.getLogger("kirod.localapi")

_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")


def max_body_bytes(settings: Settings) -> int:
    """The largest import request: the file and a companion, base64-encoded, in JSON."""
    return (settings.import_max_bytes + 4 * 1024 * 1024) * 4 // 3 + 64 * 1024


def _decode_b64(body: dict[str, Any], key: str) -> bytes | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ControlError(400, "invalid_request", f"{key} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ControlError(400, "invalid_request", f"{key} is not valid base64") from None


def _same_login(record: AccountRecord, imported: ImportedAccount) -> bool:
    """An import of a login we already hold updates it instead of adding a duplicate."""
    stored = Credentials.from_json(record.credentials)
    new = imported.credentials
    if new.refresh_token:
        return stored.refresh_token == new.refresh_token
    return record.auth_kind == imported.auth_kind.value and (
        stored.access_token == new.access_token
    )


async def store_imported(
    store: AccountStore, imported: ImportedAccount
) -> tuple[AccountRecord, bool]:
    """Insert `imported`, or refresh the credentials of the account it duplicates."""
    for record in await store.list():
        if _same_login(record, imported):
            updated = await store.update_credentials(
                record.id, imported.credentials.to_json(), expected_generation=record.generation
            )
            return updated, False
    record = await store.insert(
        label=imported.label,
        auth_kind=imported.auth_kind.value,
        region=imported.region,
        auth_region=imported.auth_region,
        credentials=imported.credentials.to_json(),
        profile_arn=imported.profile_arn,
    )
    return record, True


def shown(record: AccountRecord, now: float) -> dict[str, Any]:
    """An account as the control API shows it: no secrets, its status as of now."""
    out = record.redacted()
    status = current_status(record.status, record.status_until, now)
    if status != record.status:
        out.update(
            status=status,
            status_reason="cool-down over; the next request tests the account",
            status_until=None,
        )
    return out


async def list_accounts(request: web.Request) -> web.Response:
    records = await request.app[CONTROL].accounts.list()
    now = time.time()
    return web.json_response({"accounts": [shown(record, now) for record in records]})


async def get_account(request: web.Request) -> web.Response:
    record = await request.app[CONTROL].accounts.get(request.match_info["account_id"])
    if record is None:
        raise not_found("account")
    return web.json_response(shown(record, time.time()))


async def remove_account(request: web.Request) -> web.Response:
    removed = await request.app[CONTROL].operations.remove(request.match_info["account_id"])
    if not removed:
        raise not_found("account")
    log.event(logger, "account_removed", account=request.match_info["account_id"])
    return web.json_response({"removed": True})


async def import_accounts(request: web.Request) -> web.Response:
    """Body: {"content_b64", "companion_b64"?, "label"?} for a file, or {"api_key"}."""
    settings = request.app[CONTROL].settings
    if (request.content_length or 0) > max_body_bytes(settings):
        limit = settings.import_max_bytes
        raise ControlError(413, "too_large", f"the import exceeds import_max_bytes ({limit})")
    body = await json_body(request)
    try:
        if "api_key" in body:
            key = body["api_key"]
            if not isinstance(key, str):
                raise ControlError(400, "invalid_request", "api_key must be a string")
            imported = [parse_api_key(key)]
        else:
            content = _decode_b64(body, "content_b64")
            if content is None:
                raise ControlError(400, "invalid_request", "give content_b64 or api_key")
            limits = ImportLimits(settings.import_max_bytes, settings.import_timeout_s)
            imported = await parse_upload(content, _decode_b64(body, "companion_b64"), limits)
    except CredentialImportError as exc:
        raise ControlError(400, "invalid_import", str(exc)) from None
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        raise ControlError(400, "invalid_request", "label must be a string")
    control = request.app[CONTROL]
    results = []
    for item in imported:
        if label and len(imported) == 1:
            item = dataclasses.replace(item, label=label)
        record, created = await store_imported(control.accounts, item)
        control.operations.welcome(record.id)
        log.event(
            logger,
            "account_imported",
            account=record.id,
            source=item.source,
            auth_kind=item.auth_kind.value,
            created=created,
        )
        results.append({**record.redacted(), "created": created})
    return web.json_response({"accounts": results}, status=201)


Operation = Callable[[str], Awaitable[AccountRecord | None]]


async def _operate(request: web.Request, name: str, operation: Operation) -> web.Response:
    account_id = request.match_info["account_id"]
    try:
        record = await operation(account_id)
    except RefreshError as exc:
        raise ControlError(502, "refresh_failed", str(exc)) from None
    except UpstreamError as exc:
        raise ControlError(
            502, "upstream_failed", f"Kiro did not answer the {name}: {exc}"
        ) from None
    if record is None:
        raise not_found("account")
    log.event(logger, f"account_{name}", account=account_id)
    return web.json_response(record.redacted())


async def enable_account(request: web.Request) -> web.Response:
    return await _operate(request, "enabled", request.app[CONTROL].operations.enable)


async def disable_account(request: web.Request) -> web.Response:
    return await _operate(request, "disabled", request.app[CONTROL].operations.disable)


async def refresh_account(request: web.Request) -> web.Response:
    return await _operate(request, "refreshed", request.app[CONTROL].operations.refresh)


async def probe_account(request: web.Request) -> web.Response:
    return await _operate(request, "probed", request.app[CONTROL].operations.probe)


def _login_target(body: dict[str, Any]) -> tuple[str, str]:
    start_url = body.get("start_url") or BUILDER_ID_START_URL
    region = body.get("region") or DEFAULT_REGION
    if not isinstance(start_url, str) or not isinstance(region, str):
        raise ControlError(400, "invalid_request", "start_url and region must be strings")
    parts = urlsplit(start_url)
    if parts.scheme != "https" or not parts.hostname:
        raise ControlError(
            400, "invalid_request", "start_url must be an https URL such as https://d-…/start"
        )
    if not _REGION.fullmatch(region):
        raise ControlError(400, "invalid_request", "region must look like us-east-1")
    return start_url, region


async def start_login(request: web.Request) -> web.Response:
    """Body: {"start_url"?, "region"?}; Builder ID in us-east-1 by default."""
    start_url, region = _login_target(await json_body(request))
    try:
        login = await request.app[CONTROL].logins.start(start_url=start_url, region=region)
    except TooManyLogins:
        raise ControlError(429, "too_many_logins", "too many logins are waiting") from None
    except LoginError as exc:
        raise ControlError(502, "login_failed", str(exc)) from None
    return web.json_response(login.to_json(), status=201)


async def get_login(request: web.Request) -> web.Response:
    """`?wait=S` answers as soon as the login ends, or after S seconds (at most MAX_WAIT_S)."""
    logins = request.app[CONTROL].logins
    login_id = request.match_info["login_id"]
    try:
        wait_s = float(request.query.get("wait", "0"))
    except ValueError:
        raise ControlError(400, "invalid_request", "wait must be a number of seconds") from None
    if not 0 <= wait_s <= MAX_WAIT_S:
        raise ControlError(400, "invalid_request", f"wait must be from 0 to {MAX_WAIT_S:g}")
    login = await logins.wait(login_id, wait_s) if wait_s else logins.get(login_id)
    if login is None:
        raise not_found("login")
    return web.json_response(login.to_json())


async def cancel_login(request: web.Request) -> web.Response:
    login = request.app[CONTROL].logins.cancel(request.match_info["login_id"])
    if login is None:
        raise not_found("login")
    return web.json_response(login.to_json())
