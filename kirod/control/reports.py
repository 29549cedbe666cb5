"""What the control plane reports about the account layer: the maintenance loop, the pool's
in-memory capacity, queue and pacing, and the operation log's summary."""

from __future__ import annotations

from typing import Any

from kirod.accounts.maintenance import Maintenance as MaintenanceLoop
from kirod.accounts.pool import AccountPool
from kirod.errors import InvalidControlRequest
from kirod.report_types import TRAFFIC_WINDOWS, Maintenance, Pacing, Stats, Trace, Traffic
from kirod.storage.oplog import OpLog


class LayerReports:
    def __init__(self, loop: MaintenanceLoop, oplog: OpLog, pool: AccountPool) -> None:
        self._loop = loop
        self._oplog = oplog
        self._pool = pool

    def maintenance(self) -> Maintenance:
        """The state of the background loop that refreshes tokens and probes usage."""
        return self._loop.status()

    def pacing(self) -> Pacing:
        """The pacing limits, and which accounts a shared back-off or their spacing holds now."""
        return self._pool.pacing()

    async def pool(self) -> dict[str, Any]:
        """Each account's state with its requests in flight and capacity, and the queue."""
        return (await self._pool.status()).to_json()

    async def stats(self, since: float | None) -> Stats:
        """Summarize the operation log from `since` (None: everything kept) until now."""
        return await self._oplog.stats(since=since)

    async def traffic(self, window: str) -> Traffic:
        """The operation log over the last hour, day or month in buckets, ending now.

        Raises `InvalidControlRequest` for another window, for both front ends (the control API
        and the console) to answer 400.
        """
        if window not in TRAFFIC_WINDOWS:
            raise InvalidControlRequest(f"window must be one of: {', '.join(TRAFFIC_WINDOWS)}")
        return await self._oplog.traffic(window)

    async def trace(
        self, *, request_id: str | None = None, last: int = 10, after: int | None = None
    ) -> Trace:
        """The operation log's rows of one request, the `last` ones, or those after a cursor."""
        return await self._oplog.trace(request_id=request_id, last=last, after=after)
