"""Control routes for API keys: list, create (the key is shown in that answer only), revoke.

Every change reloads the gate before answering, so a revoked key is refused from the next request.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from aiohttp import web

from kirod import log
from kirod.localapi.control import CONTROL, ControlError, json_body, not_found
from kirod.localapi.schema import ApiKey
from kirod.storage.keys import ApiKeyRecord, KeyScope, generate_key

logger = logging.getLogger("kirod.localapi")

MAX_NAME = 64
MAX_PATTERNS = 32
MAX_RPM = 100_000
_PATTERN = re.compile(r"[A-Za-z0-9._:*?\[\]-]{1,128}")


def key_view(record: ApiKeyRecord) -> ApiKey:
    return ApiKey(
        id=record.id,
        name=record.name,
        prefix=record.prefix,
        created_at=record.created_at,
        last_used_at=record.last_used_at,
        models=record.scope.models,
        rpm=record.scope.rpm,
    )


def _name(body: dict[str, Any]) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ControlError(400, "invalid_request", f"name must be 1 to {MAX_NAME} characters")
    if not name.isprintable():
        raise ControlError(400, "invalid_request", "name must be printable")
    return name.strip()


def _scope(body: dict[str, Any]) -> KeyScope:
    models = body.get("models") or []
    if not isinstance(models, list) or len(models) > MAX_PATTERNS:
        raise ControlError(
            400, "invalid_request", f"models must be a list of at most {MAX_PATTERNS} patterns"
        )
    for pattern in models:
        if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern):
            raise ControlError(
                400,
                "invalid_request",
                "a model pattern is a model id with optional * ? [] wildcards, "
                "e.g. claude-sonnet-* or claude-haiku-4-5",
            )
    rpm = body.get("rpm")
    if rpm is not None and (
        isinstance(rpm, bool) or not isinstance(rpm, int) or not 1 <= rpm <= MAX_RPM
    ):
        raise ControlError(400, "invalid_request", f"rpm must be an integer from 1 to {MAX_RPM}")
    return KeyScope(models=tuple(dict.fromkeys(models)), rpm=rpm)


async def list_keys(request: web.Request) -> web.Response:
    records = await request.app[CONTROL].keys.list()
    return web.json_response({"keys": [key_view(record).to_json() for record in records]})


async def create_key(request: web.Request) -> web.Response:
    """Body: {"name", "models"?: [pattern…], "rpm"?: int}. Answers {"key": ApiKey, "secret"}."""
    body = await json_body(request)
    name, scope = _name(body), _scope(body)
    control = request.app[CONTROL]
    if any(record.name == name for record in await control.keys.list()):
        raise ControlError(409, "name_taken", f"a key named {name!r} exists; revoke it first")
    secret = generate_key()
    record = await control.keys.insert(name, secret, scope)
    await control.reload_keys()
    log.event(logger, "api_key_created", key=record.id, scoped=bool(scope.models or scope.rpm))
    return web.json_response({"key": key_view(record).to_json(), "secret": secret}, status=201)


async def revoke_key(request: web.Request) -> web.Response:
    control = request.app[CONTROL]
    key_id = request.match_info["key_id"]
    if not await control.keys.revoke(key_id):
        raise not_found("API key")
    await control.reload_keys()
    log.event(logger, "api_key_revoked", key=key_id)
    return web.json_response({"revoked": True})
