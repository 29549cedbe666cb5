"""The control API application (Unix socket only; file permissions are the authorization).

One route table under `/localapi/v1`; every answer is JSON, every error
`{"error": {"code", "message"}}`. Requests carrying `Origin` or `Referer` come from a browser
and are refused.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from kirod import __version__, log
from kirod.control.database import DatabaseService
from kirod.dispatch.cache import ResponseCache
from kirod.errors import (
    ControlError,
    ControlNotFound,
    ControlStorageFull,
    InvalidControlRequest,
    StoreFull,
)
from kirod.localapi import accounts, keys, models
from kirod.localapi.control import CONTROL, Control, json_body
from kirod.localapi.wire import API_HEADER, API_REVISION, PREFIX, VERSION_HEADER, error_body
from kirod.report_types import AlertTest, ExtensionList
from kirod.report_types.drift import SUMMARY_DAYS

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(error_body(code, message), status=status, headers=headers)


@web.middleware
async def versioned(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer, errors too, states this kirod's version and its control API's revision, so
    that a kiroctl of another release can tell which of the two is older (docs/RELEASING.md §4)."""
    response = await handler(request)
    if not response.prepared:
        response.headers[VERSION_HEADER] = __version__
        response.headers[API_HEADER] = str(API_REVISION)
    return response


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
    except StoreFull as full:  # the change asked for could not be written
        refused = ControlStorageFull(full)
        return _error(refused.status, refused.code, refused.message)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        return _error(405, "method_not_allowed", f"allowed: {allowed}", {"Allow": allowed})
    except web.HTTPNotFound:
        return _error(404, "not_found", f"no such control route: {request.path}")
    except web.HTTPRequestEntityTooLarge:
        return _error(413, "too_large", "the request body is too large")
    except web.HTTPException as exc:
        return _error(exc.status, "bad_request", exc.reason)
    except Exception as exc:
        log.event(logger, "localapi_error", level=logging.ERROR, error=type(exc).__name__)
        return _error(500, "internal_error", "internal error")


async def status(request: web.Request) -> web.Response:
    return web.json_response((await request.app[CONTROL].status()).to_json())


async def config(request: web.Request) -> web.Response:
    """The effective settings, secrets replaced by a marker."""
    settings = request.app[CONTROL].settings
    path = str(settings.config_path) if settings.config_path else None
    return web.json_response({"config_path": path, "settings": settings.redacted()})


def _since(request: web.Request) -> float | None:
    """`?since=EPOCH`, a past time; None when not given."""
    if "since" not in request.query:
        return None
    try:
        since = float(request.query["since"])
    except ValueError:
        since = math.nan
    if not 0 <= since <= time.time():
        raise InvalidControlRequest("since must be a past epoch time")
    return since


async def stats(request: web.Request) -> web.Response:
    """`?since=EPOCH`: the operation log's summary from then (default: all it keeps)."""
    return web.json_response((await request.app[CONTROL].reports.stats(_since(request))).to_json())


async def drift(request: web.Request) -> web.Response:
    """`?since=EPOCH` (default: a week ago): what Kiro answered that kirod does not know."""
    reports = request.app[CONTROL].drift
    if reports is None:
        raise ControlError(404, "not_found", "this kirod records no drift")
    since = _since(request)
    if since is None:
        since = time.time() - SUMMARY_DAYS * 86_400
    return web.json_response((await reports.since(since)).to_json())


async def doctor(request: web.Request) -> web.Response:
    """`kiroctl doctor`'s checks: versions, settings, each Kiro endpoint in use (a few seconds)."""
    reports = request.app[CONTROL].doctor
    if reports is None:
        raise ControlError(404, "not_found", "this kirod runs no doctor checks")
    return web.json_response((await reports.run()).to_json())


def _optional_text(body: dict[str, object], name: str) -> str | None:
    value = body.get(name)
    if value is None or (isinstance(value, str) and 0 < len(value) <= 200):
        return value
    raise InvalidControlRequest(f"{name} must be null or 1 to 200 characters")


async def doctor_live(request: web.Request) -> web.Response:
    """`{"account": id|null, "confirm": bool, "model", "effort_model", "effort": bool}`:
    without `confirm` the plan of `kiroctl doctor --live` (nothing that costs credits is sent);
    with it the checks' results, `model` and `effort_model` being the plan's as shown."""
    live = request.app[CONTROL].live
    if live is None:
        raise ControlError(404, "not_found", "this kirod runs no live checks")
    body = await json_body(request)
    account = _optional_text(body, "account")
    for flag in ("confirm", "effort"):
        if not isinstance(body.get(flag, False), bool):
            raise InvalidControlRequest(f"{flag} must be true or false")
    if not body.get("confirm", False):
        plan = await live.plan(account)
        return web.json_response({"plan": plan.to_json(), "ran": False})
    report = await live.run(
        account,
        model=_optional_text(body, "model"),
        effort_model=_optional_text(body, "effort_model"),
        effort=bool(body.get("effort", True)),
    )
    return web.json_response(report.to_json())


async def traffic(request: web.Request) -> web.Response:
    """`?window=hour|day|month` (default hour): the operation log in buckets over that window."""
    window = request.query.get("window", "hour")
    return web.json_response((await request.app[CONTROL].reports.traffic(window)).to_json())


MAX_TRACE_LAST = 200  # rows `GET /trace?last=` answers at most
MAX_LOG_BYTES = 65536  # bytes of log lines one `GET /logs` answers at most (one line always)
MAX_LOG_LINES = 1000


def _count(request: web.Request, name: str, default: int, top: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 <= int(raw) <= top:
        raise InvalidControlRequest(f"{name} must be a whole number from 0 to {top}")
    return int(raw)


async def trace(request: web.Request) -> web.Response:
    """`?request_id=ID`, `?after=CURSOR` or `?last=N`: operation-log rows with their attempts."""
    query = request.query
    request_id = query.get("request_id")
    if request_id is not None and not 0 < len(request_id) <= 200:
        raise InvalidControlRequest("request_id must be 1 to 200 characters")
    after = _count(request, "after", 0, 2**62) if "after" in query else None
    last = _count(request, "last", 10, MAX_TRACE_LAST)
    reports = request.app[CONTROL].reports
    answer = await reports.trace(request_id=request_id, last=last, after=after)
    return web.json_response(answer.to_json())


async def logs(request: web.Request) -> web.Response:
    """`?after=N`: the daemon log's lines after line N; else `?lines=N` of the newest (100)."""
    source = request.app[CONTROL].logs
    if source is None:
        raise ControlError(404, "not_found", "this kirod keeps no log tail")
    after = _count(request, "after", 0, 2**62) if "after" in request.query else None
    lines = _count(request, "lines", 100, MAX_LOG_LINES)
    max_bytes = _count(request, "max_bytes", MAX_LOG_BYTES, MAX_LOG_BYTES)
    return web.json_response(source(after, lines, max_bytes).to_json())


async def pool(request: web.Request) -> web.Response:
    """The account pool as the dispatcher sees it: requests in flight per account, the queue."""
    return web.json_response(await request.app[CONTROL].reports.pool())


async def console(request: web.Request) -> web.Response:
    """A one-time link into the web console (`kiroctl console`)."""
    mint = request.app[CONTROL].console_link
    if mint is None:
        raise ControlError(
            404,
            "console_off",
            "this kirod serves no console: console = false, or a remote host without "
            "console_remote = true",
        )
    return web.json_response(mint().to_json(), status=201)


async def alerts_test(request: web.Request) -> web.Response:
    """Send one `test` alert to every webhook now; how each answered (`kiroctl alerts test`)."""
    alerts = request.app[CONTROL].alerts
    answer = AlertTest(webhooks=()) if alerts is None else await alerts.test()
    return web.json_response(answer.to_json())


async def shutdown(request: web.Request) -> web.Response:
    """Stop the daemon as SIGTERM would: drain, then exit 0."""
    log.event(logger, "shutdown_requested", source="localapi")
    request.app[CONTROL].shutdown()
    return web.json_response({"stopping": True}, status=202)


async def extensions(request: web.Request) -> web.Response:
    """The loaded extensions in hook order, secret options redacted (`kiroctl extensions`)."""
    answer = ExtensionList(request.app[CONTROL].extensions.report())
    return web.json_response(answer.to_json())


def _cache(request: web.Request) -> ResponseCache:
    cache = request.app[CONTROL].cache
    if cache is None:
        raise ControlNotFound("response cache")
    return cache


async def cache_stats(request: web.Request) -> web.Response:
    """What the response cache holds and how it answered (`kiroctl cache stats`)."""
    return web.json_response((await _cache(request).stats()).to_json())


async def cache_clear(request: web.Request) -> web.Response:
    """Drop every cached answer (`kiroctl cache clear`)."""
    cleared = await _cache(request).clear()
    log.event(logger, "response_cache_cleared", entries=cleared)
    return web.json_response({"cleared": cleared})


def _database(request: web.Request) -> DatabaseService:
    db = request.app[CONTROL].db
    if db is None:
        raise ControlNotFound("database")
    return db


async def db_check(request: web.Request) -> web.Response:
    """SQLite's full integrity check of the daemon's file (`kiroctl db check`)."""
    return web.json_response((await _database(request).check()).to_json())


async def db_backup(request: web.Request) -> web.Response:
    """A copy of the daemon's file by SQLite's online backup API (`kiroctl db backup FILE`)."""
    body = await json_body(request)
    path = body.get("path")
    if not isinstance(path, str) or not path:
        raise InvalidControlRequest("'path' must be the backup's absolute path")
    return web.json_response((await _database(request).backup(path)).to_json())


ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/status", status),
    ("GET", "/config", config),
    ("GET", "/stats", stats),
    ("GET", "/traffic", traffic),
    ("GET", "/drift", drift),
    ("GET", "/doctor", doctor),
    ("POST", "/doctor/live", doctor_live),
    ("GET", "/pool", pool),
    ("GET", "/trace", trace),
    ("GET", "/logs", logs),
    ("GET", "/models", models.list_models),
    ("POST", "/shutdown", shutdown),
    ("POST", "/console", console),
    ("POST", "/alerts/test", alerts_test),
    ("GET", "/extensions", extensions),
    ("GET", "/cache", cache_stats),
    ("DELETE", "/cache", cache_clear),
    ("GET", "/db/check", db_check),
    ("POST", "/db/backup", db_backup),
    ("GET", "/accounts", accounts.list_accounts),
    ("POST", "/accounts/import", accounts.import_accounts),
    ("GET", "/accounts/{account_id}", accounts.get_account),
    ("DELETE", "/accounts/{account_id}", accounts.remove_account),
    ("POST", "/accounts/{account_id}/enable", accounts.enable_account),
    ("POST", "/accounts/{account_id}/disable", accounts.disable_account),
    ("POST", "/accounts/{account_id}/proxy", accounts.set_account_proxy),
    ("POST", "/accounts/{account_id}/profile", accounts.set_account_profile),
    ("POST", "/accounts/{account_id}/refresh", accounts.refresh_account),
    ("POST", "/accounts/{account_id}/probe", accounts.probe_account),
    ("POST", "/accounts/{account_id}/overage", accounts.set_account_overage),
    ("PUT", "/accounts/{account_id}/budget", accounts.set_account_budget),
    ("POST", "/logins", accounts.start_login),
    ("GET", "/logins/{login_id}", accounts.get_login),
    ("DELETE", "/logins/{login_id}", accounts.cancel_login),
    ("GET", "/keys", keys.list_keys),
    ("POST", "/keys", keys.create_key),
    ("DELETE", "/keys/{key_id}", keys.revoke_key),
    ("PUT", "/keys/{key_id}/budget", keys.set_key_budget),
    ("GET", "/spend", keys.spend),
)


def build_control_app(control: Control) -> web.Application:
    app = web.Application(
        middlewares=[versioned, guard], client_max_size=accounts.max_body_bytes(control.settings)
    )
    app[CONTROL] = control
    for method, path, handler in ROUTES:
        app.router.add_route(method, PREFIX + path, handler)
    return app
