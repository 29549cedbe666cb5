"""Conversation affinity: one conversation stays on one account and one Kiro conversation id.

Affinity is explicit: only requests whose protocol adapter found an affinity key (Claude Code's
session id, Codex's, `prompt_cache_key`, …) are bound. The key is hashed with HMAC-SHA256 under a
per-install secret, over the API key's id and the affinity key, so bindings of two API keys never
meet and the stored hash reveals neither. Bindings survive restarts and lapse after `ttl_s` idle.

The live bindings are held in memory, read from the store once (at the first lookup after a
start) and written behind: a conversation's every turn would otherwise pay a read and a write
transaction before its first byte. At most `max_live` are held, the least recently used dropped
first (a dropped conversation only loses its account preference; the store keeps it until `ttl_s`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable

from kirod.storage.affinity import AffinityStore, Binding

MAX_LIVE = 100_000  # ~25 MB of bindings; far more conversations than one user runs at once


class AffinityMap:
    def __init__(
        self,
        store: AffinityStore,
        secret: bytes,
        *,
        ttl_s: float,
        max_live: int = MAX_LIVE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._secret = secret
        self.ttl_s = ttl_s
        self._max_live = max_live
        self._clock = clock
        self._live: dict[str, Binding] | None = None
        self._loading = asyncio.Lock()

    def key(self, tenant: str, affinity_key: str) -> str:
        # A session header that was not UTF-8 arrives with surrogates: hash them as they are.
        message = b"\0".join((tenant.encode(), affinity_key.encode("utf-8", "surrogatepass")))
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    async def lookup(self, key_hash: str) -> Binding | None:
        live = self._live if self._live is not None else await self._load()
        binding = live.get(key_hash)
        if binding is None or binding.last_used_at < self._clock() - self.ttl_s:
            return None
        return binding

    async def _load(self) -> dict[str, Binding]:
        async with self._loading:
            if self._live is None:
                since = self._clock() - self.ttl_s
                self._live = {b.key_hash: b for b in await self._store.live(used_since=since)}
            return self._live

    @staticmethod
    def conversation_id(binding: Binding | None, account_id: str) -> str:
        """The Kiro conversation id for a turn on `account_id`: the bound one while the account
        stays the same, a new one when the conversation moves (the two rotate together)."""
        if binding is not None and binding.account_id == account_id:
            return binding.conversation_id
        return str(uuid.uuid4())

    def bind(self, key_hash: str, account_id: str, conversation_id: str) -> None:
        binding = Binding(key_hash, account_id, conversation_id, self._clock())
        live = self._live
        if live is not None:
            live.pop(key_hash, None)  # re-inserted last: the dict is kept in order of use
            live[key_hash] = binding
            if len(live) > self._max_live:
                del live[next(iter(live))]
        self._store.put(key_hash, account_id, conversation_id, binding.last_used_at)

    async def prune(self) -> int:
        used_before = self._clock() - self.ttl_s
        if self._live is not None:
            for key_hash in [k for k, b in self._live.items() if b.last_used_at < used_before]:
                del self._live[key_hash]
        return await self._store.prune(used_before=used_before)

    async def flush(self) -> None:
        """Write the bindings made so far to the store now."""
        await self._store.flush()

    async def close(self) -> None:
        await self._store.close()
