"""Usage probes: getUsageLimits for one account, at most one in flight per account.

A probe stores the usage snapshot and lets it decide the account's state: no credits left means
exhausted until the window resets, credits again means back in service. The maintenance loop, the
dispatcher (after a 402) and the control API all probe through here, so concurrent asks for one
account share one call, which a caller going away does not cancel. The overage switch is set
here too, and probed at once, so the stored snapshot says what Kiro now says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.pool import AccountPool
from kirod.accounts.side_drift import observe_usage
from kirod.accounts.tokens import TokenKeeper
from kirod.errors import KirodError
from kirod.storage.accounts import AccountRecord
from kirod.tasks import SingleFlight, TaskOwner
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import Failure, UpstreamError
from kirod.upstream.usage import parse_usage_limits

logger = logging.getLogger(__name__)

T = TypeVar("T")

QUOTA_PROBE_TIMEOUT_S = 10.0


class UsageProbes:
    def __init__(
        self, pool: AccountPool, client: KiroClient, keeper: TokenKeeper, tasks: TaskOwner
    ) -> None:
        self._pool = pool
        self._client = client
        self._keeper = keeper
        self._probes: SingleFlight[str, AccountRecord | None] = SingleFlight(tasks, "usage")

    async def probe(self, account_id: str) -> AccountRecord | None:
        """Probe now (or join the probe under way); None if the account does not exist.

        Raises the `UpstreamError` (or `RefreshError`) that made the probe fail.
        """
        return await self._probes.do(account_id, lambda: self._probe(account_id))

    async def confirm_quota(self, account_id: str) -> None:
        """A 402 is checked against getUsageLimits at once: the probe tells for how long the
        account is out (until its window resets), or that it still has credits after all."""
        try:
            async with asyncio.timeout(QUOTA_PROBE_TIMEOUT_S):
                await self.probe(account_id)
        except (TimeoutError, KirodError) as exc:
            log.event(
                logger,
                "quota_probe_failed",
                level=logging.WARNING,
                account=account_id,
                error=type(exc).__name__,
            )

    async def set_overage(self, account_id: str, enabled: bool) -> AccountRecord | None:
        """Turn the account's overage on or off at Kiro, then probe; None if there is no such
        account. Raises the `UpstreamError` (or `RefreshError`) of the switch; a probe failing
        after it leaves the snapshot as it was, for the next probe to correct."""
        record = await self._pool.store.get(account_id)
        if record is None:
            return None
        await self._with_token(record, lambda account: self._client.set_overage(account, enabled))
        log.event(logger, "overage_set", account=account_id, enabled=enabled)
        try:
            return await self._probes.do_fresh(account_id, lambda: self._probe(account_id))
        except KirodError as exc:
            log.event(
                logger,
                "overage_probe_failed",
                level=logging.WARNING,
                account=account_id,
                error=type(exc).__name__,
            )
            return await self._pool.store.get(account_id)

    async def _with_token(
        self, record: AccountRecord, call: Callable[[UpstreamAccount], Awaitable[T]]
    ) -> T:
        """`call` with a fresh token; once more with a new one if Kiro rejects it."""
        account = await self._keeper.fresh(to_upstream(record))
        try:
            return await call(account)
        except UpstreamError as exc:
            if exc.failure is not Failure.BEARER:
                raise
            account = await self._keeper.fresh(
                account, rejected_token=account.credentials.access_token
            )
            return await call(account)

    async def _probe(self, account_id: str) -> AccountRecord | None:
        record = await self._pool.store.get(account_id)
        if record is None:
            return None
        doc = await self._with_token(record, self._client.usage_limits)
        usage = parse_usage_limits(doc)
        observe_usage(self._client.drift, record.region, doc)
        log.event(
            logger,
            "usage_probed",
            account=account_id,
            remaining=usage.remaining,
            resets_at=usage.resets_at,
        )
        return await self._pool.usage_probed(account_id, usage)
