"""Control routes for API keys: list, create (the key is shown in that answer only), set budgets,
revoke.

Each validates its request and calls `kirod.control.apikeys.ApiKeys` once.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from kirod.budgets.limits import Limits
from kirod.errors import InvalidControlRequest
from kirod.localapi.control import CONTROL, json_body

MAX_NAME = 64
MAX_PATTERNS = 32
MAX_RPM = 100_000
MAX_CREDITS = 1e9
MAX_TOKENS_PER_MINUTE = 1_000_000_000
_PATTERN = re.compile(r"[A-Za-z0-9._:*?\[\]-]{1,128}")


def _name(body: dict[str, Any]) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise InvalidControlRequest(f"name must be 1 to {MAX_NAME} characters")
    if not name.isprintable():
        raise InvalidControlRequest("name must be printable")
    return name.strip()


def _scope(body: dict[str, Any]) -> tuple[tuple[str, ...], int | None]:
    """The model patterns (deduplicated) and requests per minute the key is limited to."""
    models = body.get("models") or []
    if not isinstance(models, list) or len(models) > MAX_PATTERNS:
        raise InvalidControlRequest(f"models must be a list of at most {MAX_PATTERNS} patterns")
    for pattern in models:
        if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern):
            raise InvalidControlRequest(
                "a model pattern is a model id with optional * ? [] wildcards, "
                "e.g. claude-sonnet-* or claude-haiku-4-5",
            )
    rpm = body.get("rpm")
    if rpm is not None and (
        isinstance(rpm, bool) or not isinstance(rpm, int) or not 1 <= rpm <= MAX_RPM
    ):
        raise InvalidControlRequest(f"rpm must be an integer from 1 to {MAX_RPM}")
    return tuple(dict.fromkeys(models)), rpm


def credits_limit(body: dict[str, Any], name: str) -> float | None:
    """A credit budget from the body: null (or absent) for none, else a positive number."""
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_CREDITS
    ):
        raise InvalidControlRequest(f"{name} must be a number of credits above 0, or null")
    return float(value)


def _limits(body: dict[str, Any]) -> Limits:
    tokens = body.get("tokens_per_minute")
    if tokens is not None and (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or not 1 <= tokens <= MAX_TOKENS_PER_MINUTE
    ):
        raise InvalidControlRequest(
            f"tokens_per_minute must be an integer from 1 to {MAX_TOKENS_PER_MINUTE}, or null"
        )
    return Limits(
        credits_limit(body, "credits_per_day"), credits_limit(body, "credits_per_month"), tokens
    )


async def list_keys(request: web.Request) -> web.Response:
    keys = await request.app[CONTROL].keys.list()
    return web.json_response({"keys": [key.to_json() for key in keys]})


async def create_key(request: web.Request) -> web.Response:
    """Body: {"name", "models"?: [pattern…], "rpm"?: int, "cache"?: bool, "credits_per_day"?,
    "credits_per_month"?, "tokens_per_minute"?}.

    Answers {"key": ApiKey, "secret"}."""
    body = await json_body(request)
    name, (models, rpm), limits = _name(body), _scope(body), _limits(body)
    cache = body.get("cache", False)
    if not isinstance(cache, bool):
        raise InvalidControlRequest("cache must be true or false")
    key, secret = await request.app[CONTROL].keys.create(
        name, models, rpm, cache=cache, limits=limits
    )
    return web.json_response({"key": key.to_json(), "secret": secret}, status=201)


async def set_key_budget(request: web.Request) -> web.Response:
    """Body: {"credits_per_day", "credits_per_month", "tokens_per_minute"}, each null for none
    (the whole set is replaced). Answers the key."""
    limits = _limits(await json_body(request))
    key = await request.app[CONTROL].keys.set_budget(request.match_info["key_id"], limits)
    return web.json_response(key.to_json())


async def revoke_key(request: web.Request) -> web.Response:
    await request.app[CONTROL].keys.revoke(request.match_info["key_id"])
    return web.json_response({"revoked": True})


async def spend(request: web.Request) -> web.Response:
    """Query: scope=key|account, id=ID, days=N (default 30): spend per UTC day."""
    spending = request.app[CONTROL].spending
    if spending is None:
        raise InvalidControlRequest("this kirod keeps no spend")
    query = request.query
    days = query.get("days", "30")
    if not days.isdigit():
        raise InvalidControlRequest("days must be a whole number")
    series = await spending.series(query.get("scope", ""), query.get("id", ""), days=int(days))
    return web.json_response(series.to_json())
