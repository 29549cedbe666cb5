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
from kirod.storage.accounts import AccountRecord
from kirod.tasks import TaskOwner
from kirod.upstream.client import KiroClient
from kirod.upstream.errors import Failure, UpstreamError
from kirod.upstream.usage import parse_usage_limits

logger = logging.getLogger("kirod.accounts")


class UsageProbes:
    def __init__(
        self, pool: AccountPool, client: KiroClient, keeper: TokenKeeper, tasks: TaskOwner
    ) -> None:
        self._pool = pool
        self._client = client
        self._keeper = keeper
        self._tasks = tasks
        self._inflight: dict[str, asyncio.Task[AccountRecord | None]] = {}

    async def probe(self, account_id: str) -> AccountRecord | None:
        """Probe now (or join the probe under way); None if the account does not exist.

        Raises the `UpstreamError` (or `RefreshError`) that made the probe fail.
        """
        task = self._inflight.get(account_id)
        if task is None:
            task = self._tasks.spawn(self._probe(account_id), name=f"usage:{account_id}")
            self._inflight[account_id] = task
            task.add_done_callback(lambda _: self._inflight.pop(account_id, None))
        return await asyncio.shield(task)

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
