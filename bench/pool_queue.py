"""What waiting costs: CPU of the account pool while N requests queue for a full account.

    python -m bench.pool_queue [--waiters 100 400 1000] [--seconds 3]

One account with one slot, held for the whole run; N requests wait for it (queue timeout longer
than the run). The figure is the process's CPU time over the run as a share of one core: what
the queue burns doing nothing. In-process, with the real pool and a real SQLite store.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from kirod.accounts.pool import AccountPool
from kirod.accounts.strategy import Strategy
from kirod.storage.accounts import AccountStore
from kirod.storage.db import Database


async def _measure(waiters: int, seconds: float, root: Path) -> float:
    async with Database(root / f"pool-{waiters}.db") as db:
        store = AccountStore(db)
        await store.insert(
            label="only",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials={"access_token": "token"},
        )
        pool = AccountPool(
            store, concurrency=1, strategy=Strategy.STICKY, queue_timeout_s=seconds + 60
        )
        held = await pool.lease()
        queued = [asyncio.ensure_future(pool.lease()) for _ in range(waiters)]
        await asyncio.sleep(0.2)  # every waiter is in the queue
        started_cpu, started = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        share = (time.process_time() - started_cpu) / (time.perf_counter() - started)
        for waiter in queued:
            waiter.cancel()
        await asyncio.gather(*queued, return_exceptions=True)
        held.release()
        return share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, nargs="+", default=[100, 400, 1000])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for count in args.waiters:
            share = asyncio.run(_measure(count, args.seconds, Path(root)))
            print(f"{count:>6} waiters: {share * 100:5.2f} % of a core")


if __name__ == "__main__":
    main()
