"""Keeps access tokens fresh: proactive, single-flight refresh persisted with compare-and-swap.

Concurrent requests for one account share one refresh. A caller that goes away does not cancel
the shared refresh (it is shielded and owned here), so a rotated refresh token is always stored.
A rotation that loses the compare-and-swap (another writer stored newer credentials first) adopts
the stored ones instead of overwriting them. A refresh token found dead marks the account
`needs_login`, but only if its credentials are still the ones that failed.
"""

from __future__ import annotations

import logging
import time

from kirod import log
from kirod.accounts import health
from kirod.accounts.account import to_upstream
from kirod.credentials import refresh as auth
from kirod.errors import GenerationConflict
from kirod.storage.accounts import AccountStore
from kirod.tasks import SingleFlight, TaskOwner
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import RefreshError

logger = logging.getLogger(__name__)

DEFAULT_REFRESH_WINDOW_S = 600.0


class TokenKeeper:
    def __init__(
        self,
        store: AccountStore,
        client: KiroClient,
        tasks: TaskOwner,
        refresh_window_s: float = DEFAULT_REFRESH_WINDOW_S,
    ) -> None:
        self._store = store
        self._client = client
        self._window = refresh_window_s
        self._refreshes: SingleFlight[str, UpstreamAccount] = SingleFlight(tasks, "refresh")
        self.refresh_count = 0

    async def fresh(
        self, account: UpstreamAccount, *, rejected_token: str | None = None
    ) -> UpstreamAccount:
        """The account with a usable access token.

        `rejected_token` forces a refresh because Kiro refused that token; it is skipped when
        the stored token has already moved on (another request refreshed meanwhile).
        """
        if rejected_token is None and not auth.needs_refresh(account.credentials, self._window):
            return account
        return await self._refreshes.do(
            account.id, lambda: self._refresh(account.id, rejected_token)
        )

    async def _refresh(self, account_id: str, rejected_token: str | None) -> UpstreamAccount:
        record = await self._store.get(account_id)
        if record is None:
            raise RefreshError("the account was removed", permanent=True)
        current = to_upstream(record)
        stale = current.credentials.access_token == rejected_token
        if not stale and not auth.needs_refresh(current.credentials, self._window):
            return current
        try:
            refreshed = await auth.refresh(self._client, current)
        except RefreshError as exc:
            log.event(
                logger,
                "token_refresh_failed",
                level=logging.WARNING,
                account=account_id,
                permanent=exc.permanent,
            )
            generation, now = record.generation, time.time()
            permanent, detail = exc.permanent, str(exc)
            await self._store.update_state(
                account_id,
                # Only the credentials that failed: a login stored meanwhile is not dead.
                lambda latest: (
                    health.after_refresh_failure(
                        latest.state, permanent=permanent, detail=detail, now=now
                    )
                    if latest.generation == generation
                    else None
                ),
            )
            raise
        self.refresh_count += 1
        try:
            record = await self._store.update_credentials(
                account_id, refreshed.credentials.to_json(), expected_generation=record.generation
            )
        except GenerationConflict:
            latest = await self._store.get(account_id)
            if latest is None:
                raise RefreshError("the account was removed", permanent=True) from None
            log.event(logger, "token_refresh_superseded", account=account_id)
            return to_upstream(latest)
        log.event(logger, "token_refreshed", account=account_id, generation=record.generation)
        return to_upstream(record)
