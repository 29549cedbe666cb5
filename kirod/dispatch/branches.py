"""The branch queue: turns of one conversation run one at a time, in arrival order.

A branch is an API key's conversation (the affinity hash already covers both). Two turns of it at
once would race on the bound account and Kiro conversation id, so the second waits for the first
to reach terminal cleanup. Each branch has its own FIFO lock, so waiting on one never holds up
another conversation or any account. Idle branches are forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kirod.errors import ApiError, ErrorKind


@dataclass(eq=False)
class _Branch:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holders and waiters


class BranchQueue:
    def __init__(self) -> None:
        self._branches: dict[str, _Branch] = {}

    def __len__(self) -> int:
        return len(self._branches)

    @contextlib.asynccontextmanager
    async def turn(self, key: str, *, timeout_s: float) -> AsyncIterator[None]:
        """Hold the branch `key` for the block, after the turns that arrived before."""
        branch = self._branches.setdefault(key, _Branch())
        branch.users += 1
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    await branch.lock.acquire()
            except TimeoutError:
                raise ApiError(
                    ErrorKind.RATE_LIMIT,
                    "the previous turn of this conversation is still running; retry when it ends",
                    code="conversation_busy",
                    headers={"Retry-After": "1"},
                ) from None
            try:
                yield
            finally:
                branch.lock.release()
        finally:
            branch.users -= 1
            if branch.users == 0:
                del self._branches[key]
