"""Per-key request rates: a sliding one-minute window of admission times."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

WINDOW_S = 60.0


class RateWindows:
    """Admits at most `rpm` requests per key in any 60 s; memory is bounded by `rpm` per key."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, collections.deque[float]] = {}

    def admit(self, key_id: str, rpm: int) -> float | None:
        """Record a request and return None, or return the seconds until one would be admitted."""
        now = self._clock()
        seen = self._seen.setdefault(key_id, collections.deque())
        while seen and seen[0] <= now - WINDOW_S:
            seen.popleft()
        if len(seen) >= rpm:
            return max(seen[0] + WINDOW_S - now, 0.0)
        seen.append(now)
        return None

    def refund(self, key_id: str) -> None:
        """Take back the latest admission: a request refused for its model does not count."""
        seen = self._seen.get(key_id)
        if seen:
            seen.pop()

    def keep_only(self, key_ids: set[str]) -> None:
        """Forget keys that no longer exist (revoked)."""
        for key_id in self._seen.keys() - key_ids:
            del self._seen[key_id]


def retry_after_header(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))
