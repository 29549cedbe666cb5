"""The account pool: who may serve the next request, with how many requests in flight.

The pool mirrors the stored accounts (re-read before every choice, so accounts added, removed,
enabled or disabled through the control API count at once) and adds what only lives in memory:
each account's capacity slots (`account_inference_concurrency`), its half-open trial flag and the
credits spent since its last usage probe.

A slot is reserved synchronously when an account is chosen and handed out as a `Lease`, which the
dispatcher releases at the request's terminal cleanup. A request that finds every eligible account
full queues; queued requests are served first come, first served as slots free up, each for up to
`queue_timeout_s`, then answered 429. A freed slot costs O(1) however many wait, and one timer
per pool (not one per waiter) looks for cool-downs that ended. With no eligible account at all
the answer says why (`unavailable.py`), except in panic mode: when every account is out only for
transient failures (the breaker's `transient` cool-downs), the one whose cool-down ends first
takes one trial request at a time instead of the client hearing 429 (Envoy's panic threshold,
for a pool of any size).

A request may also name which accounts are eligible for it (`lease(eligible=…)`: dispatch
passes the accounts whose model catalog lists the request's model), and `pacing.py` may hold an
account for a moment (`account_rpm`, `account_min_interval_s`, a login's shared back-off after
Kiro throttled it): a held account counts as busy, so the request queues rather than fails, and a
timer wakes the queue when the first hold ends.

Every state change goes through `AccountStore.update_state`, deciding on the row as stored. The
pool's report rows are `pool_status.py`'s; choosing among the accounts that can serve is
`strategy.py`'s.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kirod import log
from kirod.accounts import health
from kirod.accounts.health import Eligibility, status_eligibility
from kirod.accounts.pacing import Pacer, login_key
from kirod.accounts.pool_status import pool_account
from kirod.accounts.strategy import Candidate, Selector, Strategy
from kirod.accounts.unavailable import unavailable
from kirod.errors import ApiError, ErrorKind
from kirod.report_types import PacedAccount, Pacing, Pool
from kirod.storage.accounts import AccountRecord, AccountState, AccountStore
from kirod.upstream.errors import Failure
from kirod.upstream.usage import UsageSnapshot

logger = logging.getLogger(__name__)

BUSY_RETRY_AFTER_S = 2
# Kiro's limits on the login (user) rather than the entry: its other entries share them.
_LOGIN_LIMITS = frozenset({Failure.THROTTLED, Failure.PENALTY, Failure.DAILY_LIMIT})
RECHECK_S = 1.0  # how often a queued request looks for cool-downs that ended

Clock = Callable[[], float]
Eligible = Callable[[AccountRecord], bool]
"""Which accounts may serve one request (beyond their state): e.g. those listing its model."""


@dataclass(eq=False)
class _Entry:
    record: AccountRecord
    order: int
    in_flight: int = 0
    trial: bool = False
    spent: float = 0.0  # credits metered since the usage snapshot in `record`

    @property
    def guarded(self) -> bool:
        """The overage guard watches it: overage is on in Kiro and kirod may not spend it."""
        usage = self.record.usage
        return (
            not self.record.allow_overage
            and usage is not None
            and usage.get("overage") == "enabled"
        )

    def overage_only(self) -> bool:
        """Only overage is left, and kirod may not spend it (by the last probe less what was
        metered since)."""
        if not self.guarded:
            return False
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    @property
    def login(self) -> str:
        return login_key(self.record.id, self.record.profile_arn)

    def remaining(self) -> float | None:
        usage = self.record.usage
        if not usage or not isinstance(usage.get("remaining"), int | float):
            return None
        return float(usage["remaining"]) - self.spent


@dataclass(eq=False)
class Lease:
    """One reserved slot on one account; `release` is idempotent."""

    account: AccountRecord
    trial: bool
    _entry: _Entry
    _pool: AccountPool
    released: bool = False

    @property
    def account_id(self) -> str:
        return self.account.id

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._pool._release(self)


@dataclass(eq=False)
class _Waiter:
    prefer: str | None
    exclude: frozenset[str]
    future: asyncio.Future[Lease]
    eligible: Eligible | None = None

    @property
    def selective(self) -> bool:
        """Some accounts are not for it: it may be told "none left" while others are full."""
        return bool(self.exclude) or self.eligible is not None


def _verdict(entry: _Entry, now: float) -> Eligibility:
    verdict = status_eligibility(entry.record.status, entry.record.status_until, now)
    if verdict is not Eligibility.NO and entry.guarded and entry.overage_only():
        return Eligibility.NO  # the overage guard, before the probe or the write says so
    return verdict


class AccountPool:
    def __init__(
        self,
        store: AccountStore,
        *,
        concurrency: int,
        strategy: Strategy,
        queue_timeout_s: float,
        breaker_threshold: int = health.DEFAULT_THRESHOLD,
        clock: Clock = time.time,
        rpm: float = 0.0,
        min_interval_s: float = 0.0,
    ) -> None:
        self._store = store
        self._concurrency = concurrency
        self._selector = Selector(strategy)
        self._queue_timeout_s = queue_timeout_s
        self._threshold = breaker_threshold
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._excluding = 0  # waiters with accounts to exclude: only they may be told "none left"
        self._recheck: asyncio.TimerHandle | None = None
        self._pacer = Pacer(rpm=rpm, min_interval_s=min_interval_s, clock=clock)
        self._pace_wake: asyncio.TimerHandle | None = None
        self._pace_wake_at = 0.0  # when `_pace_wake` fires, on `clock`'s scale
        self._synced_revision: int | None = None

    @property
    def store(self) -> AccountStore:
        return self._store

    def records(self) -> list[AccountRecord]:
        """The accounts as last read, oldest first."""
        return [entry.record for entry in self._sorted()]

    def record(self, account_id: str) -> AccountRecord | None:
        """The account as last read, if there is one."""
        entry = self._entries.get(account_id)
        return entry.record if entry is not None else None

    def plan_left(self, account_id: str) -> float | None:
        """The plan credits the overage guard lets kirod spend on the account (by the last
        probe less what was metered since); None where the guard does not watch it."""
        entry = self._entries.get(account_id)
        if entry is None or not entry.guarded:
            return None
        return entry.remaining()

    async def current(self) -> list[AccountRecord]:
        """The accounts, re-read first if any was written since the last read."""
        if self._store.revision != self._synced_revision:
            await self.sync()
        return self.records()

    async def sync(self) -> None:
        """Re-read the accounts; writes seen meanwhile are not rolled back by the older read."""
        revision = self._store.revision  # taken first: a write during the read re-syncs later
        records = await self._store.list()
        self._synced_revision = revision
        current = {record.id for record in records}
        for gone in set(self._entries) - current:
            del self._entries[gone]
            self._pacer.forget(gone)
        for order, record in enumerate(records):
            entry = self._entries.get(record.id)
            if entry is None:
                self._entries[record.id] = _Entry(record, order)
                continue
            entry.order = order
            if record.updated_at >= entry.record.updated_at:
                self._replace(entry, record)
        self._grant()

    # -- leasing -------------------------------------------------------------------------------

    async def lease(
        self,
        *,
        prefer: str | None = None,
        exclude: Collection[str] = (),
        eligible: Eligible | None = None,
    ) -> Lease:
        """A slot on the best eligible account, waiting up to `queue_timeout_s` for one.

        `prefer` is an affinity binding's account, `exclude` the accounts this request already
        tried, `eligible` (if given) says which accounts may serve it at all: the others are
        never leased for it. Raises `ApiError` (429 or 503) when no account can serve.
        """
        if self._store.revision != self._synced_revision:
            await self.sync()  # every account write goes through the one store: skip if none
        loop = asyncio.get_running_loop()
        waiter = _Waiter(prefer, frozenset(exclude), loop.create_future(), eligible)
        self._waiters.append(waiter)
        self._excluding += waiter.selective
        self._grant()
        try:
            if not waiter.future.done():
                self._arm_recheck(loop)
                await asyncio.wait({waiter.future}, timeout=self._queue_timeout_s)
        except BaseException:
            self._abandon(waiter)
            raise
        if not waiter.future.done():
            self._abandon(waiter)
            paced = " or paced" if self._pacer.active else ""
            raise ApiError(
                ErrorKind.RATE_LIMIT,
                f"every available Kiro account is busy{paced} ({self._concurrency} requests "
                f"each) and none freed up within {self._queue_timeout_s:g} s; retry shortly",
                code="accounts_busy",
                headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
            )
        return waiter.future.result()

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter gave up (timeout, cancellation): return a slot granted in the meantime."""
        if waiter in self._waiters:
            self._remove(waiter)
        future = waiter.future
        if future.done() and not future.cancelled() and future.exception() is None:
            future.result().release()
        future.cancel()

    def _remove(self, waiter: _Waiter) -> None:
        self._waiters.remove(waiter)
        self._excluding -= waiter.selective

    def _arm_recheck(self, loop: asyncio.AbstractEventLoop) -> None:
        """One timer for the whole queue: a cool-down that ends frees no slot by itself."""
        if self._recheck is None:
            self._recheck = loop.call_later(RECHECK_S, self._rechecked, loop)

    def _rechecked(self, loop: asyncio.AbstractEventLoop) -> None:
        self._recheck = None
        self._grant()
        if self._waiters:
            self._arm_recheck(loop)

    def _arm_pace_wake(self, now: float) -> None:
        """Wake the queue when the first pacing hold ends (sooner than the once-a-second look)."""
        if not self._waiters or not self._pacer.active:
            return
        soonest = self._pacer.soonest(now)
        if soonest is None:
            return
        if self._pace_wake is not None:
            if self._pace_wake_at <= soonest:
                return
            self._pace_wake.cancel()  # a hold that ends sooner appeared
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pace_wake_at = soonest
        self._pace_wake = loop.call_later(max(0.0, soonest - now), self._pace_woken)

    def _pace_woken(self) -> None:
        self._pace_wake = None
        self._grant()

    def _grant(self) -> None:
        """Serve queued requests in order with the slots free now.

        When every eligible account is full, only waiters that exclude accounts can be answered
        (with an error): with none of those, nothing is looked at, so a freed slot costs O(1).
        """
        if not self._waiters:
            return
        now = self._clock()
        try:
            self._serve_queue(now)
        finally:
            self._arm_pace_wake(now)

    def _serve_queue(self, now: float) -> None:
        # Both stop at the first account that says yes: with many accounts, usually the first.
        any_eligible = any(_verdict(e, now) is not Eligibility.NO for e in self._entries.values())
        free = self._has_free_slot(now)
        if not free and any_eligible and not self._excluding:
            return
        for waiter in list(self._waiters):
            if waiter.future.done():
                self._remove(waiter)
                continue
            if not free and any_eligible:
                if not self._excluding:
                    return
                if not waiter.selective:
                    continue  # everyone is full: only a waiter that excludes may get an error
            outcome = self._pick(waiter.prefer, waiter.exclude, now, waiter.eligible)
            if outcome is None:
                continue
            self._remove(waiter)
            if isinstance(outcome, Lease):
                waiter.future.set_result(outcome)
                free = self._has_free_slot(now)
            else:
                waiter.future.set_exception(outcome)

    def _has_free_slot(self, now: float) -> bool:
        return any(
            entry.in_flight < self._concurrency
            and _verdict(entry, now) is not Eligibility.NO
            and self._paced_ready(entry, now)
            for entry in self._entries.values()
        )

    def _paced_ready(self, entry: _Entry, now: float) -> bool:
        return not self._pacer.active or self._pacer.ready(entry.record.id, entry.login, now)

    def _pick(
        self,
        prefer: str | None,
        exclude: frozenset[str],
        now: float,
        allowed: Eligible | None = None,
    ) -> Lease | ApiError | None:
        """A lease, the error to answer when no account is eligible, or None: all are full."""
        # The selector's answer whenever they can serve, found without listing every account.
        for wanted in (prefer, self._selector.keeps()):
            entry = self._entries.get(wanted) if wanted is not None else None
            if (
                entry is not None
                and wanted not in exclude
                and (allowed is None or allowed(entry.record))
                and self._can_take(entry, now)
            ):
                return self._lease(entry, now)
        if allowed is not None:
            exclude = exclude | {
                account_id
                for account_id, entry in self._entries.items()
                if not allowed(entry.record)
            }
        candidates: list[Candidate] = []
        eligible = False
        by_usage = self._selector.strategy is Strategy.LOWEST_USAGE
        for account_id, entry in self._entries.items():
            if account_id in exclude:
                continue
            if _verdict(entry, now) is Eligibility.NO:
                continue
            eligible = True
            if not self._can_take(entry, now):
                continue
            remaining = entry.remaining() if by_usage else None  # only lowest-usage reads it
            candidates.append(Candidate(account_id, entry.order, entry.in_flight, remaining))
        if not candidates:
            if eligible:
                return None
            soonest = self._panic_account(exclude, now)
            if soonest is None:
                return unavailable([e.record for e in self._entries.values()], exclude, now)
            return self._panic_trial(soonest, now)
        return self._lease(self._entries[self._selector.choose(candidates, prefer).account_id], now)

    def _panic_account(self, exclude: frozenset[str], now: float) -> _Entry | None:
        """Panic mode's account: the soonest back, when all are out only for transient failures."""
        out = [e for account_id, e in self._entries.items() if account_id not in exclude]
        if not out or not all(
            e.record.status == "cooling_down" and e.record.status_transient for e in out
        ):
            return None
        return min(out, key=lambda e: e.record.status_until or now)

    def _panic_trial(self, soonest: _Entry, now: float) -> Lease | None:
        """One trial at a time on it; None (wait for that trial) while one is out."""
        if soonest.trial or soonest.in_flight >= self._concurrency:
            return None
        if not self._paced_ready(soonest, now):
            return None
        log.event(
            logger,
            "panic_trial",
            level=logging.WARNING,
            account=soonest.record.id,
            until=soonest.record.status_until,
        )
        return self._lease(soonest, now, trial=True)

    def _can_take(self, entry: _Entry, now: float) -> bool:
        """Eligible, with a free slot, and not a second trial while one is out."""
        ready = _verdict(entry, now)
        if ready is Eligibility.NO or entry.in_flight >= self._concurrency:
            return False
        if not self._paced_ready(entry, now):
            return False
        return not (ready is Eligibility.TRIAL and entry.trial)

    def _lease(self, entry: _Entry, now: float, *, trial: bool | None = None) -> Lease:
        if trial is None:
            trial = _verdict(entry, now) is Eligibility.TRIAL
        entry.in_flight += 1
        entry.trial = entry.trial or trial
        self._pacer.started(entry.record.id, now)
        return Lease(entry.record, trial, entry, self)

    def _release(self, lease: Lease) -> None:
        entry = lease._entry
        entry.in_flight -= 1
        if lease.trial:
            entry.trial = False
        self._grant()

    # -- outcomes ------------------------------------------------------------------------------

    async def succeeded(self, lease: Lease) -> None:
        """The account accepted a request: close its breaker."""
        entry = self._entries.get(lease.account_id)
        now = self._clock()
        if entry is not None and health.after_success(entry.record.state, now) is None:
            return  # the usual case, a healthy account: nothing to write, no store round trip
        await self._update(lease.account_id, lambda record: health.after_success(record.state, now))

    async def failed(
        self,
        account_id: str,
        failure: Failure,
        *,
        detail: str,
        retry_after_s: float | None = None,
        rejected_token: str | None = None,
    ) -> AccountRecord | None:
        """An attempt failed, before any output or as its answer broke off after it; the account
        as it is after. A credential rejection counts only while the rejected token is still the
        stored one (a new login since does not inherit it)."""
        now = self._clock()

        def decide(record: AccountRecord) -> AccountState | None:
            if rejected_token is not None and record.credentials.get("access_token") != (
                rejected_token
            ):
                return None
            return health.after_failure(
                record.state,
                failure,
                detail=detail,
                retry_after_s=retry_after_s,
                now=now,
                threshold=self._threshold,
            )

        record = await self._update(account_id, decide)
        if failure in _LOGIN_LIMITS:
            rest = retry_after_s
            if failure is not Failure.THROTTLED and record is not None and record.status_until:
                rest = record.status_until - now  # the penalty's or the day's rest, not the hint
            self._share_backoff(account_id, rest, now)
        return record

    def _share_backoff(self, account_id: str, retry_after_s: float | None, now: float) -> None:
        """Kiro throttled one entry of a login: hold the other entries of that login too."""
        entry = self._entries.get(account_id)
        if entry is None:
            return
        login = entry.login
        siblings = [
            e.record.id for e in self._entries.values() if e is not entry and e.login == login
        ]
        if not siblings:
            return
        until = self._pacer.back_off(login, retry_after_s, now)
        log.event(
            logger,
            "shared_backoff",
            level=logging.WARNING,
            account=account_id,
            held=",".join(siblings),
            until=until,
        )
        self._grant()

    async def usage_probed(self, account_id: str, usage: UsageSnapshot) -> AccountRecord | None:
        """Store a usage snapshot; it decides whether the account is exhausted."""
        stored = await self._store.set_usage(account_id, usage.to_json())
        if stored is not None:
            self._apply(stored)
        return await self._update(
            account_id,
            lambda record: health.after_usage(
                record.state,
                remaining=usage.remaining,
                resets_at=usage.resets_at,
                overage_on=usage.overage == "enabled",
                overage_allowed=record.allow_overage,
            ),
        )

    async def spent(self, account_id: str, credits: float) -> None:
        """Credits a request used, until the next usage probe replaces the estimate. Where they
        used up the plan's credits and only overage kirod may not spend is left, the account
        rests as exhausted until the plan resets (the overage guard)."""
        entry = self._entries.get(account_id)
        if entry is None:
            return
        entry.spent += credits
        await self._guard_overage(entry)

    async def _guard_overage(self, entry: _Entry) -> None:
        if entry.record.status == "active" and entry.overage_only():
            resets_at = (entry.record.usage or {}).get("resets_at")
            until = float(resets_at) if isinstance(resets_at, int | float) else None
            await self._update(
                entry.record.id, lambda record: health.overage_guarded(record.state, until)
            )

    async def rest_for_budget(
        self, account_id: str, period: str, limit: float, until: float
    ) -> AccountRecord | None:
        """The account's credit budget for `period` is spent: it rests until `until`."""
        return await self._update(
            account_id, lambda record: health.budget_rested(record.state, period, limit, until)
        )

    async def budget_changed(self, account_id: str) -> AccountRecord | None:
        """The account's budget or overage permission changed: a rest for them ends, and the
        overage guard rests it again if it still applies (a spent budget is the caller's)."""
        await self.sync()
        record = await self._update(account_id, lambda record: health.budget_lifted(record.state))
        entry = self._entries.get(account_id)
        if entry is not None:
            await self._guard_overage(entry)
            record = entry.record
        return record

    async def enable(self, account_id: str) -> AccountRecord | None:
        """Put the account back in service, whatever its state; None if there is no such one."""
        return await self._update(account_id, lambda record: health.enabled(record.state))

    async def disable(self, account_id: str, reason: str | None = None) -> AccountRecord | None:
        return await self._update(account_id, lambda record: health.disabled(record.state, reason))

    async def _update(
        self, account_id: str, decide: Callable[[AccountRecord], AccountState | None]
    ) -> AccountRecord | None:
        record = await self._store.update_state(account_id, decide)
        if record is not None:
            self._apply(record)
        return record

    def _apply(self, record: AccountRecord) -> None:
        entry = self._entries.get(record.id)
        if entry is None or record.updated_at < entry.record.updated_at:
            return
        self._replace(entry, record)
        self._grant()

    def _replace(self, entry: _Entry, record: AccountRecord) -> None:
        before = entry.record
        if record.usage_at != before.usage_at:
            entry.spent = 0.0
        entry.record = record
        if (record.status, record.status_reason) != (before.status, before.status_reason):
            log.event(
                logger,
                "account_state",
                level=logging.INFO if record.status == "active" else logging.WARNING,
                account=record.id,
                status=record.status,
                reason=record.status_reason,
                until=record.status_until,
            )

    # -- status --------------------------------------------------------------------------------

    async def status(self) -> Pool:
        await self.sync()
        now = self._clock()
        return Pool(
            strategy=self._selector.strategy.value,
            capacity_per_account=self._concurrency,
            queued=len(self._waiters),
            accounts=tuple(
                pool_account(
                    entry.record,
                    in_flight=entry.in_flight,
                    capacity=self._concurrency,
                    remaining=entry.remaining(),
                    now=now,
                )
                for entry in self._sorted()
            ),
        )

    def pacing(self) -> Pacing:
        """The pacing limits, and the accounts held or paced now, in the dispatcher's order."""
        now = self._clock()
        paced = []
        for entry in self._sorted():
            hold = self._pacer.hold(entry.record.id, entry.login, now)
            if hold is not None:
                paced.append(PacedAccount(entry.record.id, *hold))
        return Pacing(
            spacing_s=self._pacer.spacing_s,
            account_rpm=self._pacer.rpm,
            account_min_interval_s=self._pacer.min_interval_s,
            accounts=tuple(paced),
        )

    def _sorted(self) -> list[_Entry]:
        return sorted(self._entries.values(), key=lambda entry: entry.order)
