"""Usage probes: getUsageLimits for one account, at most one in flight per account.

A probe stores the usage snapshot and lets it decide the account's state: no credits left means
exhausted until the window resets, credits again means back in service. The maintenance loop, the
dispatcher (after a 402) and the control API all probe through here, so concurrent asks for one
account share one call, which a caller going away does not cancel.
"""

from __future__ import annotations

import asyncio
import logging

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.pool import AccountPool
from kirod.accounts.tokens import TokenKeeper
from kirod.errors import KirodError
from kirod.storage.accounts import AccountRecord
from kirod.tasks import SingleFlight, TaskOwner
from kirod.upstream.client import KiroClient
from kirod.upstream.errors import Failure, UpstreamError
from kirod.upstream.usage import parse_usage_limits

logger = logging.getLogger("kirod.accounts")

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

    async def _probe(self, account_id: str) -> AccountRecord | None:
        record = await self._pool.store.get(account_id)
        if record is None:
            return None
        account = await self._keeper.fresh(to_upstream(record))
        try:
            doc = await self._client.usage_limits(account)
        except UpstreamError as exc:
            if exc.failure is not Failure.BEARER:
                raise
            account = await self._keeper.fresh(
                account, rejected_token=account.credentials.access_token
            )
            doc = await self._client.usage_limits(account)
        usage = parse_usage_limits(doc)
        log.event(
            logger,
            "usage_probed",
            account=account_id,
            remaining=usage.remaining,
            resets_at=usage.resets_at,
        )
        return await self._pool.usage_probed(account_id, usage)
