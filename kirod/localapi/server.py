"""The control API application (Unix socket only; file permissions are the authorization)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from kirod import log
from kirod.localapi import accounts
from kirod.localapi.accounts import ACCOUNTS, ControlError
from kirod.localapi.schema import PREFIX, Status, error_body
from kirod.storage.accounts import AccountStore

logger = logging.getLogger("kirod.localapi")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Control:
    """The daemon state the control API reports; `status` is read at request time."""

    status: Callable[[], Status]


CONTROL = web.AppKey("control", Control)


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(error_body(code, message), status=status, headers=headers)


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse browser-originated requests; render every error in the control API's shape."""
    if "Origin" in request.headers or "Referer" in request.headers:
        log.event(logger, "localapi_refused", reason="browser_origin", path=request.path)
        return _error(403, "forbidden", "requests from a browser context are refused")
    try:
        return await handler(request)
    except ControlError as exc:
        return _error(exc.status, exc.code, exc.message)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        return _error(405, "method_not_allowed", f"allowed: {allowed}", {"Allow": allowed})
    except web.HTTPNotFound:
        return _error(404, "not_found", f"no such control route: {request.path}")
    except web.HTTPException as exc:
        return _error(exc.status, "bad_request", exc.reason)
    except Exception as exc:
        log.event(logger, "localapi_error", level=logging.ERROR, error=type(exc).__name__)
        return _error(500, "internal_error", "internal error")


async def status(request: web.Request) -> web.Response:
    return web.json_response(request.app[CONTROL].status().to_json())


def build_control_app(control: Control, account_store: AccountStore) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=accounts.MAX_IMPORT_BYTES * 2)
    app[CONTROL] = control
    app[ACCOUNTS] = account_store
    app.router.add_get(PREFIX + "/status", status)
    app.router.add_get(PREFIX + "/accounts", accounts.list_accounts)
    app.router.add_post(PREFIX + "/accounts/import", accounts.import_accounts)
    app.router.add_get(PREFIX + "/accounts/{account_id}", accounts.get_account)
    app.router.add_delete(PREFIX + "/accounts/{account_id}", accounts.remove_account)
    return app
