"""What the control API needs from the account layer, as interfaces the composition root binds.

`AccountOperations` acts on one account; each operation returns the account as it is afterwards,
or None when there is no such account. `PoolReports` reads the maintenance loop, the pool's
in-memory capacity and the operation log; `LayerReports` is it for the account layer as built by
`kirod.accounts.layer`.
"""

from __future__ import annotations

from typing import Any, Protocol

from kirod.accounts.maintenance import Maintenance as MaintenanceLoop
from kirod.accounts.pool import AccountPool
from kirod.localapi.schema import Maintenance, Stats
from kirod.storage.accounts import AccountRecord
from kirod.storage.oplog import OpLog


class AccountOperations(Protocol):
    async def enable(self, account_id: str) -> AccountRecord | None:
        """Back in service, whatever its state."""
        ...

    async def disable(self, account_id: str) -> AccountRecord | None:
        """No new requests; those in flight finish."""
        ...

    async def refresh(self, account_id: str) -> AccountRecord | None:
        """Refresh the access token now. Raises `RefreshError` when that fails."""
        ...

    async def probe(self, account_id: str) -> AccountRecord | None:
        """Read the usage limits now and store them. Raises `UpstreamError` when that fails."""
        ...

    def welcome(self, account_id: str) -> None:
        """A new account: read its usage and model catalog now, in the background."""
        ...

    async def remove(self, account_id: str) -> bool:
        """Remove the account and let go of its upstream connections; False if there is none."""
        ...


class PoolReports(Protocol):
    def maintenance(self) -> Maintenance:
        """The state of the background loop that refreshes tokens and probes usage."""
        ...

    async def pool(self) -> dict[str, Any]:
        """Each account's state with its requests in flight and capacity, and the queue."""
        ...

    async def stats(self, since: float | None) -> Stats:
        """Summarize the operation log from `since` (None: everything kept) until now."""
        ...


class LayerReports:
    """`PoolReports` from the maintenance loop and the operation log, in the control shapes."""

    def __init__(self, loop: MaintenanceLoop, oplog: OpLog, pool: AccountPool) -> None:
        self._loop = loop
        self._oplog = oplog
        self._pool = pool

    def maintenance(self) -> Maintenance:
        return Maintenance.from_json(self._loop.status().to_json())

    async def pool(self) -> dict[str, Any]:
        return (await self._pool.status()).to_json()

    async def stats(self, since: float | None) -> Stats:
        return Stats.from_json((await self._oplog.stats(since=since)).to_json())
