"""The API keys as the control plane manages them: list, create (the secret is answered once),
set budgets, revoke. Every change reloads the gate before answering, so a revoked key is refused,
and a new budget holds, from the next request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kirod import log
from kirod.budgets.budgets import Budgets
from kirod.budgets.limits import NONE, Limits
from kirod.errors import ControlConflict, ControlNotFound
from kirod.report_types import ApiKey, Budget
from kirod.storage.keys import ApiKeyRecord, KeyScope, KeyStore, generate_key

logger = logging.getLogger(__name__)


def key_limits(scope: KeyScope) -> Limits:
    return Limits(scope.credits_per_day, scope.credits_per_month, scope.tokens_per_minute)


def key_view(record: ApiKeyRecord, budget: Budget | None = None) -> ApiKey:
    return ApiKey(
        id=record.id,
        name=record.name,
        prefix=record.prefix,
        created_at=record.created_at,
        last_used_at=record.last_used_at,
        models=record.scope.models,
        rpm=record.scope.rpm,
        cache=record.scope.cache,
        budget=budget or Budget(),
    )


class ApiKeys:
    def __init__(
        self,
        store: KeyStore,
        reload: Callable[[], Awaitable[None]],
        budgets: Budgets | None = None,
    ) -> None:
        """`reload()` makes the gate see created and revoked keys and changed budgets."""
        self._store = store
        self._reload = reload
        self._budgets = budgets

    def _view(self, record: ApiKeyRecord) -> ApiKey:
        if self._budgets is None:
            return key_view(record)
        return key_view(record, self._budgets.report("key", record.id, key_limits(record.scope)))

    async def list(self) -> list[ApiKey]:
        return [self._view(record) for record in await self._store.list()]

    async def create(
        self,
        name: str,
        models: tuple[str, ...],
        rpm: int | None,
        *,
        cache: bool = False,
        limits: Limits = NONE,
    ) -> tuple[ApiKey, str]:
        """The new key and its secret; names are unique."""
        if any(record.name == name for record in await self._store.list()):
            raise ControlConflict("name_taken", f"a key named {name!r} exists; revoke it first")
        # Refused on a full disk even where SQLite's log still has room for the row: a key
        # that may or may not be kept is worse than a clear "free space first".
        self._store.check_room()
        secret = generate_key()
        scope = KeyScope(
            models=models,
            rpm=rpm,
            cache=cache,
            credits_per_day=limits.credits_per_day,
            credits_per_month=limits.credits_per_month,
            tokens_per_minute=limits.tokens_per_minute,
        )
        record = await self._store.insert(name, secret, scope)
        await self._reload()
        log.event(
            logger,
            "api_key_created",
            key=record.id,
            scoped=bool(scope.models or scope.rpm),
            cache=cache,
            budgeted=limits.any,
        )
        return self._view(record), secret

    async def set_budget(self, key_id: str, limits: Limits) -> ApiKey:
        """Replace the key's budgets; they hold from its next request."""
        record = await self._store.set_budget(
            key_id,
            credits_per_day=limits.credits_per_day,
            credits_per_month=limits.credits_per_month,
            tokens_per_minute=limits.tokens_per_minute,
        )
        if record is None:
            raise ControlNotFound("API key")
        await self._reload()
        log.event(
            logger,
            "api_key_budget_set",
            key=key_id,
            per_day=limits.credits_per_day,
            per_month=limits.credits_per_month,
            tokens_per_minute=limits.tokens_per_minute,
        )
        return self._view(record)

    async def revoke(self, key_id: str) -> None:
        if not await self._store.revoke(key_id):
            raise ControlNotFound("API key")
        await self._reload()
        if self._budgets is not None:
            self._budgets.forget("key", key_id)
        log.event(logger, "api_key_revoked", key=key_id)
