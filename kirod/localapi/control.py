"""What every control route shares: the services it acts on, its error, and its body reader."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kirod.accounts.models import ModelDirectory
from kirod.config import Settings
from kirod.localapi.logins import Logins
from kirod.localapi.pool import AccountOperations, PoolReports
from kirod.localapi.schema import DaemonInfo
from kirod.storage.accounts import AccountStore
from kirod.storage.keys import KeyStore


@dataclass(frozen=True)
class Control:
    """Built once by the composition root."""

    info: Callable[[], DaemonInfo]  # read at request time
    settings: Settings
    accounts: AccountStore
    keys: KeyStore
    reload_keys: Callable[[], Awaitable[None]]  # make the gate see created and revoked keys
    models: ModelDirectory
    logins: Logins
    operations: AccountOperations
    reports: PoolReports
    shutdown: Callable[[], None]


CONTROL = web.AppKey("control", Control)


class ControlError(Exception):
    """A control request failed; rendered as {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def not_found(what: str) -> ControlError:
    return ControlError(404, "not_found", f"no such {what}")


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; an empty body is an empty object."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
        # A lone surrogate escape ("\ud800") parses, but is no text: nothing could store it.
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        raise ControlError(400, "invalid_request", "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ControlError(400, "invalid_request", "the body must be a JSON object")
    return body
