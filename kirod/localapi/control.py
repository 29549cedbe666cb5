"""What every control route shares: the services it calls and its body reader."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kirod.accounts.model_directory import ModelDirectory
from kirod.config import Settings
from kirod.control.alerts import Alerts
from kirod.control.apikeys import ApiKeys
from kirod.control.database import DatabaseService
from kirod.control.doctor import DoctorReports
from kirod.control.drift import DriftReports
from kirod.control.live_check import LiveCheck
from kirod.control.logins import Logins
from kirod.control.registry import AccountRegistry
from kirod.control.reports import LayerReports
from kirod.control.spending import Spending
from kirod.dispatch.cache import ResponseCache
from kirod.dispatch.extensions import NONE, Extensions
from kirod.errors import InvalidControlRequest
from kirod.report_types import ConsoleLink, DaemonInfo, LogLines, Status
from kirod.report_types.status import Outage


@dataclass(frozen=True)
class Control:
    """Built once by the composition root."""

    info: Callable[[], DaemonInfo]  # read at request time
    settings: Settings
    accounts: AccountRegistry
    keys: ApiKeys
    models: ModelDirectory
    logins: Logins
    reports: LayerReports
    shutdown: Callable[[], None]
    # (after, lines, max_bytes) → the daemon log's lines after number `after` (None: the newest
    # `lines`); None where nothing keeps them (an embedding without the daemon's tail).
    logs: Callable[[int | None, int, int], LogLines] | None = None
    # A new one-time console link; None where no console is served.
    console_link: Callable[[], ConsoleLink] | None = None
    # Webhooks and desktop notifications; None where nothing sends them (an embedding).
    alerts: Alerts | None = None
    extensions: Extensions = NONE
    # The response cache; None where nothing keeps one (an embedding).
    cache: ResponseCache | None = None
    # What Kiro answered that kirod does not know; None where nothing records it (an embedding).
    drift: DriftReports | None = None
    # `kiroctl doctor`'s checks: settings, Kiro reachability; None where nothing runs them.
    doctor: DoctorReports | None = None
    # `kiroctl doctor --live`'s checks on an account; None where nothing runs them (an embedding).
    live: LiveCheck | None = None
    # The Kiro hosts this machine cannot reach now; None where nothing tracks them (an embedding).
    unreachable: Callable[[], tuple[Outage, ...]] | None = None
    # The store, for `kiroctl db check` and `db backup`; None where the embedding keeps none.
    db: DatabaseService | None = None
    # Spend per key and account per day (`kiroctl spend`, the console's charts); None where
    # nothing keeps it (an embedding).
    spending: Spending | None = None

    async def status(self) -> Status:
        """The daemon, its accounts' health, the maintenance loop, pacing, drift and outages."""
        counts = await self.accounts.counts()
        drift = None if self.drift is None else await self.drift.summary()
        return Status.of(
            self.info(),
            counts,
            self.reports.maintenance(),
            self.reports.pacing(),
            drift,
            () if self.unreachable is None else self.unreachable(),
        )


CONTROL = web.AppKey("control", Control)


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
        raise InvalidControlRequest("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidControlRequest("the body must be a JSON object")
    return body
