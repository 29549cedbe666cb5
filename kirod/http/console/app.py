"""The console's route table: pages, its static files, the sign-in exchange, live updates, and
the actions — each action is the control API's own handler, behind the console's guard, so the
console can do nothing the control API cannot."""

from __future__ import annotations

import asyncio
import importlib.resources
import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from kirod.config import Settings
from kirod.config.hosts import is_loopback, loopback_hosts, url_host
from kirod.errors import InvalidControlRequest
from kirod.http.console import live, pages
from kirod.http.console.budgets import SPEND_DAYS
from kirod.http.console.guard import SESSION, Guard, add_security_headers, error
from kirod.http.console.overview import Snapshots, TrafficCache, read_overview
from kirod.http.console.sessions import LINK_TTL_S, ConsoleSessions, Session
from kirod.localapi import accounts, keys, models
from kirod.localapi.control import CONTROL, Control
from kirod.report_types import Account, ApiKey, ConsoleLink, Models, Spend

PREFIX = "/console"
GUARD = web.AppKey("console_guard", Guard)
TRAFFIC = web.AppKey("console_traffic", TrafficCache)
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}
MAX_TOKEN_BODY = 1024
RECENT_ROWS = 50

Page = Callable[[web.Request, Session], Awaitable[str]]


def served_hosts(settings: Settings, port: int) -> frozenset[str] | None:
    """The `Host` values the console answers to on this listener; None: it serves no console
    (turned off, or a remote bind that `console_remote` does not extend it to)."""
    if not settings.console:
        return None
    hosts = loopback_hosts(port)
    if is_loopback(settings.host):
        return hosts
    if not settings.console_remote:
        return None
    return hosts | {f"{url_host(settings.host)}:{port}".lower()}


def link(sessions: ConsoleSessions, settings: Settings, port: int) -> Callable[[], ConsoleLink]:
    """What `kiroctl console` asks for: a URL on an address of the listener, with a new token."""
    wildcard = settings.host in ("0.0.0.0", "::", "")  # noqa: S104 - names, not a bind
    host = "127.0.0.1" if wildcard else url_host(settings.host)

    def mint() -> ConsoleLink:
        url = f"http://{host}:{port}{PREFIX}/#t={sessions.mint()}"
        return ConsoleLink(url=url, expires_in_s=LINK_TTL_S)

    return mint


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _page(render: Page) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        session = request.app[GUARD].session_of(request)
        if session is None:
            return _html(pages.signin_page("Signing in…"), status=401)
        return _html(await render(request, session))

    return handler


async def _overview(request: web.Request, session: Session) -> str:
    # Read afresh: a page loaded just after an action must show its effect.
    return pages.overview_page(await read_overview(request.app[CONTROL]), session.csrf)


async def _models(request: web.Request, session: Session) -> str:
    control = request.app[CONTROL]
    document = await models.document(control.models)
    names = pages.account_names(await control.accounts.all())
    return pages.models_page(Models.from_json(document), names, session.csrf)


async def _spend(control: Control, scope: str) -> dict[str, Spend]:
    """Every key's or account's spend per day for the charts (none where nothing keeps it)."""
    if control.spending is None:
        return {}
    return await control.spending.every_series(scope, days=SPEND_DAYS)


async def _keys(request: web.Request, session: Session) -> str:
    control = request.app[CONTROL]
    listed: list[ApiKey] = await control.keys.list()
    return pages.keys_page(listed, await _spend(control, "key"), session.csrf)


async def _accounts(request: web.Request, session: Session) -> str:
    control = request.app[CONTROL]
    listed = [Account.from_json(doc) for doc in await control.accounts.all()]
    return pages.accounts_page(listed, await _spend(control, "account"), session.csrf)


async def _add(request: web.Request, session: Session) -> str:
    return pages.add_page(session.csrf)


async def _request(request: web.Request, session: Session) -> str:
    request_id = request.match_info["request_id"]
    if not 0 < len(request_id) <= 200:
        raise InvalidControlRequest("request_id must be 1 to 200 characters")
    trace = await request.app[CONTROL].reports.trace(request_id=request_id)
    return pages.request_page(request_id, trace, session.csrf)


async def _traffic(request: web.Request, session: Session) -> str:
    window = request.query.get("window", "hour")
    reports = request.app[CONTROL].reports
    traffic = await request.app[TRAFFIC].get(window)
    recent = await reports.trace(last=RECENT_ROWS)
    labels = pages.account_names(await request.app[CONTROL].accounts.all())
    return pages.traffic_page(traffic, recent, labels, session.csrf)


async def sign_in(request: web.Request) -> web.Response:
    """Body {"token"}: spend a one-time link's token for a session cookie."""
    raw = await request.content.read(MAX_TOKEN_BODY + 1)
    try:
        token = json.loads(raw)["token"] if len(raw) <= MAX_TOKEN_BODY else None
    except (ValueError, TypeError, KeyError):
        token = None
    if not isinstance(token, str):
        raise InvalidControlRequest('give {"token": …} from a `kiroctl console` link')
    guard = request.app[GUARD]
    session = guard.sessions.redeem(token)
    if session is None:
        return error(
            401,
            "link_used_or_expired",
            "this link was used or has expired: run `kiroctl console` again",
        )
    response = web.json_response({"signed_in": True})
    response.set_cookie(guard.cookie, session.id, httponly=True, samesite="Strict", path=PREFIX)
    return response


async def sign_out(request: web.Request) -> web.Response:
    guard = request.app[GUARD]
    guard.sessions.end(request[SESSION].id)
    response = web.json_response({"signed_out": True})
    response.del_cookie(guard.cookie, path=PREFIX)
    return response


def _static() -> dict[str, bytes]:
    folder = importlib.resources.files("kirod.http.console") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC}


def _static_handler(files: dict[str, bytes]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in files:
            raise web.HTTPNotFound()
        return web.Response(body=files[name], content_type=STATIC[name], charset="utf-8")

    return static


async def _stop_streams(app: web.Application) -> None:
    app[live.STOPPING].set()


def build_console_app(
    control: Control, sessions: ConsoleSessions, *, hosts: frozenset[str], port: int
) -> web.Application:
    guard = Guard(sessions, hosts, cookie=f"kirod_console_{port}")
    app = web.Application(middlewares=[guard.middleware])
    app[CONTROL] = control
    app[GUARD] = guard
    app[live.STOPPING] = asyncio.Event()
    app[live.SNAPSHOTS] = Snapshots(control)
    app[TRAFFIC] = TrafficCache(control)
    app.on_response_prepare.append(add_security_headers)
    app.on_shutdown.append(_stop_streams)
    signed = guard.signed_in
    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
        ("GET", "/", _page(_overview)),
        ("GET", "/accounts", _page(_accounts)),
        ("GET", "/traffic", _page(_traffic)),
        ("GET", "/requests/{request_id}", _page(_request)),
        ("GET", "/models", _page(_models)),
        ("GET", "/keys", _page(_keys)),
        ("GET", "/add", _page(_add)),
        ("GET", "/static/{name}", _static_handler(_static())),
        ("POST", "/session", sign_in),
        ("POST", "/signout", signed(sign_out)),
        ("GET", "/events", signed(live.stream)),
        ("POST", "/api/accounts/import", signed(accounts.import_accounts)),
        ("DELETE", "/api/accounts/{account_id}", signed(accounts.remove_account)),
        ("POST", "/api/accounts/{account_id}/enable", signed(accounts.enable_account)),
        ("POST", "/api/accounts/{account_id}/disable", signed(accounts.disable_account)),
        ("POST", "/api/accounts/{account_id}/refresh", signed(accounts.refresh_account)),
        ("POST", "/api/accounts/{account_id}/probe", signed(accounts.probe_account)),
        ("PUT", "/api/accounts/{account_id}/budget", signed(accounts.set_account_budget)),
        ("POST", "/api/logins", signed(accounts.start_login)),
        ("GET", "/api/logins/{login_id}", signed(accounts.get_login)),
        ("DELETE", "/api/logins/{login_id}", signed(accounts.cancel_login)),
        ("POST", "/api/keys", signed(keys.create_key)),
        ("DELETE", "/api/keys/{key_id}", signed(keys.revoke_key)),
        ("PUT", "/api/keys/{key_id}/budget", signed(keys.set_key_budget)),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app


async def _to_console(request: web.Request) -> web.Response:
    # Returned, not raised: the public app's ingress renders a raised HTTPException as an error.
    query = request.rel_url.raw_query_string
    location = f"{PREFIX}/?{query}" if query else f"{PREFIX}/"
    return web.Response(status=308, headers={"Location": location})


def mount(public: web.Application, console: web.Application) -> None:
    """Serve `console` under /console/ of the public app, and redirect /console to it.

    The redirect's route comes first: the sub-app's prefix matches `/console` too, and would
    answer it with its own 404.
    """
    public.router.add_get(PREFIX, _to_console)
    public.add_subapp(PREFIX, console)
