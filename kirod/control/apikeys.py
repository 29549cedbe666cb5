"""The API keys as the control plane manages them: list, create (the secret is answered once),
revoke. Every change reloads the gate before answering, so a revoked key is refused from the
next request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kirod import log
from kirod.errors import ControlConflict, ControlNotFound
from kirod.report_types import ApiKey
from kirod.storage.keys import ApiKeyRecord, KeyScope, KeyStore, generate_key

logger = logging.getLogger(__name__)


def key_view(record: ApiKeyRecord) -> ApiKey:
    return ApiKey(
        id=record.id,
        name=record.name,
        prefix=record.prefix,
        created_at=record.created_at,
        last_used_at=record.last_used_at,
        models=record.scope.models,
        rpm=record.scope.rpm,
        cache=record.scope.cache,
    )


class ApiKeys:
    def __init__(self, store: KeyStore, reload: Callable[[], Awaitable[None]]) -> None:
        """`reload()` makes the gate see created and revoked keys."""
        self._store = store
        self._reload = reload

    async def list(self) -> list[ApiKey]:
        return [key_view(record) for record in await self._store.list()]

    async def create(
        self, name: str, models: tuple[str, ...], rpm: int | None, *, cache: bool = False
    ) -> tuple[ApiKey, str]:
        """The new key and its secret; names are unique."""
        if any(record.name == name for record in await self._store.list()):
            raise ControlConflict("name_taken", f"a key named {name!r} exists; revoke it first")
        # Refused on a full disk even where SQLite's log still has room for the row: a key
        # that may or may not be kept is worse than a clear "free space first".
        self._store.check_room()
        secret = generate_key()
        scope = KeyScope(models=models, rpm=rpm, cache=cache)
        record = await self._store.insert(name, secret, scope)
        await self._reload()
        log.event(
            logger,
            "api_key_created",
            key=record.id,
            scoped=bool(scope.models or scope.rpm),
            cache=cache,
        )
        return key_view(record), secret

    async def revoke(self, key_id: str) -> None:
        if not await self._store.revoke(key_id):
            raise ControlNotFound("API key")
        await self._reload()
        log.event(logger, "api_key_revoked", key=key_id)
