"""Summaries of the operation log: `Stats` over a period (`GET /stats`, `kiroctl stats`) and
`Traffic` over a window in time buckets (`GET /traffic`, the console's charts)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True)
class StatsGroup:
    """The requests of one account, model, API key or UTC day."""

    key: str
    requests: int
    errors: int
    credits: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StatsGroup:
        return cls(
            key=str(data["key"]),
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            credits=float(data["credits"]),
        )


@dataclass(frozen=True)
class Stats:
    """A summary of the operation log from `since` (None: all it keeps) until now."""

    since: float | None
    requests: int
    succeeded: int
    input_tokens: int
    output_tokens: int
    credits: float  # Kiro credits spent, as metered by the upstream
    ttfb_ms: Percentiles | None  # time to first byte; None without timed requests
    accounts: tuple[StatsGroup, ...]  # most requests first
    models: tuple[StatsGroup, ...]  # by the name the client asked for
    errors: dict[str, int]  # by error code
    truncated: int = 0  # requests in which Kiro cut a tool call off
    recovered: int = 0  # of those, answered in the end after kirod continued the turn
    days: tuple[StatsGroup, ...] = ()  # keyed by UTC date (YYYY-MM-DD), oldest first
    keys: tuple[StatsGroup, ...] = ()  # by API key id, most requests first

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.requests if self.requests else None

    @property
    def truncation_rate(self) -> float | None:
        return self.truncated / self.requests if self.requests else None

    @property
    def recovery_rate(self) -> float | None:
        return self.recovered / self.truncated if self.truncated else None

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "success_rate": self.success_rate,
            "truncation_rate": self.truncation_rate,
            "recovery_rate": self.recovery_rate,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stats:
        ttfb = data.get("ttfb_ms")
        return cls(
            since=data.get("since"),
            requests=int(data["requests"]),
            succeeded=int(data["succeeded"]),
            input_tokens=int(data["input_tokens"]),
            output_tokens=int(data["output_tokens"]),
            credits=float(data["credits"]),
            ttfb_ms=Percentiles(float(ttfb["p50"]), float(ttfb["p95"]), float(ttfb["p99"]))
            if ttfb
            else None,
            accounts=tuple(StatsGroup.from_json(group) for group in data["accounts"]),
            models=tuple(StatsGroup.from_json(group) for group in data["models"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            truncated=int(data.get("truncated", 0)),
            recovered=int(data.get("recovered", 0)),
            days=tuple(StatsGroup.from_json(group) for group in data.get("days", ())),
            keys=tuple(StatsGroup.from_json(group) for group in data.get("keys", ())),
        )


# Traffic windows: name → (buckets, seconds per bucket). Buckets align to multiples of their
# length in UTC (a minute, an hour, a day), the last one holding now.
TRAFFIC_WINDOWS: dict[str, tuple[int, int]] = {
    "hour": (60, 60),
    "day": (24, 3600),
    "month": (30, 86400),
}


@dataclass(frozen=True)
class TrafficBucket:
    """The requests that reached the account layer in `[start, start + bucket_s)`."""

    start: float
    requests: int
    errors: int  # not succeeded: a status of 400 or more, or a stream that ended in an error
    ttfb_p50_ms: float | None  # nearest-rank; None without a timed request
    ttfb_p95_ms: float | None
    credits: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrafficBucket:
        p50, p95 = data.get("ttfb_p50_ms"), data.get("ttfb_p95_ms")
        return cls(
            start=float(data["start"]),
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            ttfb_p50_ms=None if p50 is None else float(p50),
            ttfb_p95_ms=None if p95 is None else float(p95),
            credits=float(data["credits"]),
        )


@dataclass(frozen=True)
class CreditsDay:
    """The Kiro credits one account used on one UTC day, and the requests it answered."""

    day: str  # YYYY-MM-DD
    account_id: str
    credits: float
    requests: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreditsDay:
        return cls(
            day=str(data["day"]),
            account_id=str(data["account_id"]),
            credits=float(data["credits"]),
            requests=int(data["requests"]),
        )


@dataclass(frozen=True)
class Traffic:
    """The operation log over one window (`GET /traffic`), in buckets of `bucket_s` seconds.

    Every bucket is present, oldest first, the first starting at `since`; `errors` counts the
    window's failed requests by error code (`http_<status>` without one), most first;
    `credits_by_day` is by UTC day, then account.
    """

    window: str  # a key of TRAFFIC_WINDOWS
    since: float
    bucket_s: int
    buckets: tuple[TrafficBucket, ...]
    errors: dict[str, int]
    credits_by_day: tuple[CreditsDay, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "since": self.since,
            "bucket_s": self.bucket_s,
            "buckets": [bucket.to_json() for bucket in self.buckets],
            "errors": dict(self.errors),
            "credits_by_day": [row.to_json() for row in self.credits_by_day],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Traffic:
        return cls(
            window=str(data["window"]),
            since=float(data["since"]),
            bucket_s=int(data["bucket_s"]),
            buckets=tuple(TrafficBucket.from_json(item) for item in data["buckets"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            credits_by_day=tuple(CreditsDay.from_json(item) for item in data["credits_by_day"]),
        )
