"""Control routes for accounts: list, get, import, remove. Secrets never leave the daemon."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from typing import Any

from aiohttp import web

from kirod import log
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.upstream.credentials import Credentials
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.importers import ImportedAccount, detect_and_parse, parse_api_key

logger = logging.getLogger("kirod.localapi")

ACCOUNTS = web.AppKey("accounts", AccountStore)
MAX_IMPORT_BYTES = 32 * 1024 * 1024


class ControlError(Exception):
    """A control request failed; rendered as {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


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


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        raise ControlError(400, "invalid_request", "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ControlError(400, "invalid_request", "the body must be a JSON object")
    return body


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


async def list_accounts(request: web.Request) -> web.Response:
    records = await request.app[ACCOUNTS].list()
    return web.json_response({"accounts": [record.redacted() for record in records]})


async def get_account(request: web.Request) -> web.Response:
    record = await request.app[ACCOUNTS].get(request.match_info["account_id"])
    if record is None:
        raise ControlError(404, "not_found", "no such account")
    return web.json_response(record.redacted())


async def remove_account(request: web.Request) -> web.Response:
    removed = await request.app[ACCOUNTS].remove(request.match_info["account_id"])
    if not removed:
        raise ControlError(404, "not_found", "no such account")
    log.event(logger, "account_removed", account=request.match_info["account_id"])
    return web.json_response({"removed": True})


async def import_accounts(request: web.Request) -> web.Response:
    """Body: {"content_b64", "companion_b64"?, "label"?} for a file, or {"api_key"}."""
    if (request.content_length or 0) > MAX_IMPORT_BYTES:
        raise ControlError(413, "too_large", "the import is too large")
    body = await _json_body(request)
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
            imported = detect_and_parse(content, _decode_b64(body, "companion_b64"))
    except CredentialImportError as exc:
        raise ControlError(400, "invalid_import", str(exc)) from None
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        raise ControlError(400, "invalid_request", "label must be a string")
    store = request.app[ACCOUNTS]
    results = []
    for item in imported:
        if label and len(imported) == 1:
            item = dataclasses.replace(item, label=label)
        record, created = await store_imported(store, item)
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
