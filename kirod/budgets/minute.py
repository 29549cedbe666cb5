"""Tokens a key used in the last 60 seconds, with what requests in flight reserved."""

from __future__ import annotations

import collections
from dataclasses import dataclass

WINDOW_S = 60.0


@dataclass(eq=False, slots=True)
class Use:
    """One request's tokens in the window: reserved at admission, settled to Kiro's count."""

    at: float
    tokens: int


class MinuteWindow:
    """A key's uses in the last `WINDOW_S` of a monotonic clock; memory is bounded by its
    admissions a minute."""

    def __init__(self) -> None:
        self._uses: collections.deque[Use] = collections.deque()
        self._total = 0

    def _expire(self, now: float) -> None:
        while self._uses and self._uses[0].at <= now - WINDOW_S:
            self._total -= self._uses.popleft().tokens

    def used(self, now: float) -> int:
        self._expire(now)
        return self._total

    def wait_s(self, tokens: int, limit: int, now: float) -> float:
        """Seconds until `tokens` more fit under `limit`, as the window stands."""
        self._expire(now)
        room = limit - self._total
        for use in self._uses:
            if room >= tokens:
                break
            room += use.tokens
            if room >= tokens:
                return max(0.0, use.at + WINDOW_S - now)
        return 0.0 if room >= tokens else WINDOW_S

    def add(self, tokens: int, now: float) -> Use:
        use = Use(now, tokens)
        self._uses.append(use)
        self._total += tokens
        return use

    def settle(self, use: Use, tokens: int, now: float) -> None:
        """The request's tokens are now known (or 0: released)."""
        self._expire(now)
        if use.at > now - WINDOW_S:  # still in the window: the uses leave it in time order
            self._total += tokens - use.tokens
        use.tokens = tokens
