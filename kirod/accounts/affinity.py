"""Conversation affinity: one conversation stays on one account and one Kiro conversation id.

Affinity is explicit: only requests whose protocol adapter found an affinity key (Claude Code's
session id, Codex's, `prompt_cache_key`, …) are bound. The key is hashed with HMAC-SHA256 under a
per-install secret, over the API key's id and the affinity key, so bindings of two API keys never
meet and the stored hash reveals neither. Bindings survive restarts and lapse after `ttl_s` idle.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Callable

from kirod.storage.affinity import AffinityStore, Binding


class AffinityMap:
    def __init__(
        self,
        store: AffinityStore,
        secret: bytes,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._secret = secret
        self.ttl_s = ttl_s
        self._clock = clock

    def key(self, tenant: str, affinity_key: str) -> str:
        # A session header that was not UTF-8 arrives with surrogates: hash them as they are.
        message = b"\0".join((tenant.encode(), affinity_key.encode("utf-8", "surrogatepass")))
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    async def lookup(self, key_hash: str) -> Binding | None:
        return await self._store.get(key_hash, used_since=self._clock() - self.ttl_s)

    @staticmethod
    def conversation_id(binding: Binding | None, account_id: str) -> str:
        """The Kiro conversation id for a turn on `account_id`: the bound one while the account
        stays the same, a new one when the conversation moves (the two rotate together)."""
        if binding is not None and binding.account_id == account_id:
            return binding.conversation_id
        return str(uuid.uuid4())

    async def bind(self, key_hash: str, account_id: str, conversation_id: str) -> None:
        await self._store.put(key_hash, account_id, conversation_id, self._clock())

    async def prune(self) -> int:
        return await self._store.prune(used_before=self._clock() - self.ttl_s)
