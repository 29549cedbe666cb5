"""Pacing: how soon each account may start its next request.

Two optional limits, both off by default, space request starts on one account evenly:
`account_rpm` (at most that many a minute, no bursts: one every 60/rpm s) and
`account_min_interval_s`; the longer of the two spacings applies. A request that finds every
eligible account paced waits in the pool's queue (bounded by `queue_timeout_s`), it is not refused.

A shared back-off holds every account of one Kiro login when Kiro throttles any of them: entries
imported twice, or from several tools, share a profile ARN and so one rate limit upstream. The
throttled entry itself cools down through the breaker (`health.py`); its siblings are only held
here, in memory, until the back-off ends, so they are neither written nor shown as failed.

Pure apart from the injected clock: the pool asks `ready_at` when choosing and calls `started`
when it hands out a lease.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]

SHARED_BACKOFF_S = 10.0  # how long siblings are held when Kiro gave no Retry-After
MAX_SHARED_BACKOFF_S = 300.0


def login_key(account_id: str, profile_arn: str | None) -> str:
    """What makes entries one login upstream: the profile ARN when stored, else the entry."""
    return f"arn:{profile_arn}" if profile_arn else f"id:{account_id}"


class Pacer:
    def __init__(self, *, rpm: float = 0.0, min_interval_s: float = 0.0, clock: Clock) -> None:
        if rpm < 0 or min_interval_s < 0:
            raise ValueError("pacing limits must be >= 0")
        self.rpm = rpm
        self.min_interval_s = min_interval_s
        self.spacing_s = max(60.0 / rpm if rpm > 0 else 0.0, min_interval_s)
        self._clock = clock
        self._next: dict[str, float] = {}  # account id → earliest next start
        self._held: dict[str, float] = {}  # login key → end of its shared back-off

    @property
    def active(self) -> bool:
        """Whether anything may hold an account now (a limit, or a back-off not yet over)."""
        return self.spacing_s > 0 or bool(self._held)

    def ready_at(self, account_id: str, login: str) -> float:
        """When the account may start a request (now or earlier: it may now)."""
        return max(self._next.get(account_id, 0.0), self._held.get(login, 0.0))

    def hold(self, account_id: str, login: str, now: float) -> tuple[float, float | None] | None:
        """For an account that may not start a request now: when it may, and the end of its
        login's shared back-off when one holds it; None when it may start now."""
        held = self._held.get(login, 0.0)
        ready = max(self._next.get(account_id, 0.0), held)
        if ready <= now:
            return None
        return ready, held if held > now else None

    def ready(self, account_id: str, login: str, now: float) -> bool:
        return self.ready_at(account_id, login) <= now

    def started(self, account_id: str, now: float) -> None:
        """A request starts on the account now: the next may start one spacing later."""
        if self.spacing_s > 0:
            self._next[account_id] = max(now, self._next.get(account_id, 0.0)) + self.spacing_s

    def back_off(self, login: str, retry_after_s: float | None, now: float) -> float:
        """Hold every account of `login` (Kiro throttled one); returns when the hold ends."""
        wait = SHARED_BACKOFF_S if retry_after_s is None else max(0.0, retry_after_s)
        until = now + min(wait, MAX_SHARED_BACKOFF_S)
        self._held[login] = max(self._held.get(login, 0.0), until)
        return self._held[login]

    def soonest(self, now: float) -> float | None:
        """The first time after `now` at which a held or paced account becomes ready."""
        self._expire(now)
        later = [t for t in (*self._next.values(), *self._held.values()) if t > now]
        return min(later) if later else None

    def forget(self, account_id: str) -> None:
        self._next.pop(account_id, None)

    def _expire(self, now: float) -> None:
        for login in [k for k, until in self._held.items() if until <= now]:
            del self._held[login]
        for account_id in [k for k, t in self._next.items() if t <= now]:
            del self._next[account_id]
