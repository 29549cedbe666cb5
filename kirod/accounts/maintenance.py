"""The maintenance loop: keep every account ready before a request needs it.

Each pass (at start, then every `interval_s`):

- refreshes access tokens that expire within the refresh window;
- probes usage when the last snapshot is older than `usage_refresh_interval_s`;
- reads each account's model catalog once (at start; later it is refreshed on use);
- probes exhausted accounts once their window is due (reset time passed, or unknown);
- looks for the profile of an account that has none, or that Kiro said needs one (`profiles`);
- prunes lapsed affinity bindings and old operation-log rows.

Accounts are served concurrently, at most `concurrency` at a time, and the whole pass has a
deadline; refreshes and probes run as shared, owned tasks, so a pass cut short never loses a
rotated token. The last pass, the next one and each account's last result are in `status()`.

An account just imported or logged in is served at once (`welcome`), not at the next pass:
until its usage is known, `lowest-usage` would send everything to another account.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.affinity import AffinityMap
from kirod.accounts.model_directory import ModelDirectory
from kirod.accounts.pool import AccountPool
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.tokens import TokenKeeper
from kirod.credentials import refresh as auth
from kirod.errors import KirodError
from kirod.report_types import Maintenance as MaintenanceReport
from kirod.report_types import MaintenanceResult
from kirod.storage.accounts import AccountRecord
from kirod.storage.drift import DriftBook
from kirod.storage.oplog import OpLog
from kirod.tasks import TaskOwner
from kirod.upstream.errors import RefreshError

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 4
DEFAULT_PASS_DEADLINE_S = 60.0
IDLE_STATUSES = frozenset({"disabled", "suspended", "needs_login", "needs_profile"})


@dataclass(frozen=True)
class RetentionPolicy:
    oplog_retention_s: float
    oplog_max_rows: int


class Maintenance:
    def __init__(
        self,
        pool: AccountPool,
        keeper: TokenKeeper,
        probes: UsageProbes,
        affinity: AffinityMap,
        oplog: OpLog,
        models: ModelDirectory,
        finder: ProfileFinder,
        tasks: TaskOwner,
        *,
        interval_s: float,
        usage_refresh_interval_s: float,
        refresh_window_s: float,
        retention: RetentionPolicy,
        drift: DriftBook | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        pass_deadline_s: float = DEFAULT_PASS_DEADLINE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._pool = pool
        self._keeper = keeper
        self._probes = probes
        self._affinity = affinity
        self._oplog = oplog
        self._models = models
        self._finder = finder
        self._tasks = tasks
        self._catalog_read: set[str] = set()
        self._interval_s = interval_s
        self._usage_every_s = usage_refresh_interval_s
        self._refresh_window_s = refresh_window_s
        self._retention = retention
        self._drift = drift
        self._slots = asyncio.Semaphore(concurrency)
        self._deadline_s = pass_deadline_s
        self._clock = clock
        self._running = False
        self._started: float | None = None
        self._finished: float | None = None
        self._error: str | None = None
        self._next: float | None = None
        self._results: dict[str, MaintenanceResult] = {}

    async def run(self) -> None:
        """Pass after pass until cancelled (the daemon's shutdown)."""
        while True:
            await self.run_pass()
            self._next = self._clock() + self._interval_s
            await asyncio.sleep(self._interval_s)

    async def run_pass(self) -> None:
        self._running, self._started, self._error = True, self._clock(), None
        try:
            await self._pool.sync()
            records = self._pool.records()
            async with asyncio.timeout(self._deadline_s), asyncio.TaskGroup() as group:
                for record in records:
                    actions = self._due(record)
                    if actions:
                        group.create_task(
                            self._service(record, actions), name=f"maintain:{record.id}"
                        )
            await self._prune()
        except TimeoutError:
            self._error = f"the pass did not finish within {self._deadline_s:g} s"
            log.event(logger, "maintenance_pass_deadline", level=logging.WARNING)
        except KirodError as exc:
            self._error = str(exc)
            log.event(
                logger, "maintenance_pass_failed", level=logging.WARNING, error=type(exc).__name__
            )
        finally:
            self._running, self._finished = False, self._clock()
            known = {record.id for record in self._pool.records()}
            self._results = {k: v for k, v in self._results.items() if k in known}
            self._finder.forget_others(known)

    def _due(self, record: AccountRecord) -> tuple[str, ...]:
        profile = ("profile",) if self._finder.due(record) else ()
        if record.status in IDLE_STATUSES:
            return profile if record.status == "needs_profile" else ()
        now = self._clock()
        actions: list[str] = []
        if auth.needs_refresh(to_upstream(record).credentials, self._refresh_window_s, now):
            actions.append("refresh")
        actions.extend(profile)
        if record.status == "exhausted":
            if record.status_until is None or record.status_until <= now:
                actions.append("usage")
        elif record.usage_at is None or now - record.usage_at >= self._usage_every_s:
            actions.append("usage")
        if record.id not in self._catalog_read:
            actions.append("catalog")
        return tuple(actions)

    def welcome(self, account_id: str) -> None:
        """Serve a new account now, in the background: its usage and its model catalog."""
        self._tasks.spawn(self._welcome(account_id), name=f"welcome:{account_id}")

    async def _welcome(self, account_id: str) -> None:
        try:
            async with asyncio.timeout(self._deadline_s):
                await self._pool.sync()
                record = await self._pool.store.get(account_id)
                if record is not None and record.status not in IDLE_STATUSES:
                    profile = ("profile",) if self._finder.due(record) else ()
                    await self._service(record, (*profile, "usage", "catalog"))
        except (TimeoutError, KirodError) as exc:
            log.event(
                logger,
                "welcome_failed",
                level=logging.WARNING,
                account=account_id,
                error=type(exc).__name__,
            )

    async def _service(self, record: AccountRecord, actions: tuple[str, ...]) -> None:
        async with self._slots:
            error: str | None = None
            try:
                if "refresh" in actions:
                    await self._keeper.fresh(to_upstream(record))
                if "profile" in actions:
                    record = await self._finder.find(record)
                if "usage" in actions:
                    await self._probes.probe(record.id)
                if "catalog" in actions:
                    self._catalog_read.add(record.id)
                    await self._models.catalog_for(await self._keeper.fresh(to_upstream(record)))
            except Exception as exc:  # one account's trouble must not end the loop
                error = str(exc) if isinstance(exc, KirodError) else type(exc).__name__
                log.event(
                    logger,
                    "maintenance_account_failed",
                    level=logging.WARNING if isinstance(exc, KirodError) else logging.ERROR,
                    account=record.id,
                    error=type(exc).__name__,
                )
            self._results[record.id] = MaintenanceResult(record.id, self._clock(), actions, error)

    async def _prune(self) -> None:
        await self._affinity.prune()
        await self._oplog.prune(
            before=self._clock() - self._retention.oplog_retention_s,
            max_rows=self._retention.oplog_max_rows,
        )
        if self._drift is not None:
            await self._drift.flush()
            await self._drift.prune()

    # -- the control API's operations --------------------------------------------------------

    def status(self) -> MaintenanceReport:
        return MaintenanceReport(
            interval_s=self._interval_s,
            running=self._running,
            last_pass_started=self._started,
            last_pass_finished=self._finished,
            last_pass_error=self._error,
            next_pass_at=self._next,
            results=tuple(self._results[key] for key in sorted(self._results)),
        )

    async def probe_usage(self, account_id: str) -> AccountRecord | None:
        """Probe one account's usage now; None if there is no such account.

        Raises the `UpstreamError` or `RefreshError` that made it fail.
        """
        return await self._probes.probe(account_id)

    async def set_overage(self, account_id: str, enabled: bool) -> AccountRecord | None:
        """Turn the account's overage on or off at Kiro and probe its usage; None if there is
        no such account. Raises the `UpstreamError` or `RefreshError` of the switch."""
        return await self._probes.set_overage(account_id, enabled)

    async def refresh_now(self, account_id: str) -> AccountRecord | None:
        """Refresh one account's access token now, due or not; None if there is no such account.

        Raises the `RefreshError` that made it fail (an API key has nothing to refresh).
        """
        record = await self._pool.store.get(account_id)
        if record is None:
            return None
        account = to_upstream(record)
        if not account.credentials.refresh_token:
            raise RefreshError("this account has no token to refresh", permanent=False)
        await self._keeper.fresh(account, rejected_token=account.credentials.access_token)
        return await self._pool.store.get(account_id)
