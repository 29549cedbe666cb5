"""The response cache's report (`GET /cache`, `kiroctl cache stats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CacheStats:
    """GET /cache: what the response cache holds, and how it answered since the daemon started."""

    entries: int
    bytes: int
    max_bytes: int
    ttl_s: float
    oldest_at: float | None  # when the oldest live entry was stored
    hits: int
    misses: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CacheStats:
        return cls(
            entries=int(data["entries"]),
            bytes=int(data["bytes"]),
            max_bytes=int(data["max_bytes"]),
            ttl_s=float(data["ttl_s"]),
            oldest_at=data.get("oldest_at"),
            hits=int(data["hits"]),
            misses=int(data["misses"]),
        )
