"""What Kiro answered that kirod does not know (`GET /drift`, `kiroctl doctor`), by shape.

A record is one shape of one kind on one UTC day: where it was met, its facts (key names, type
names, codes and counts; never content, tokens or ids), how often and when. `DriftSummary` is the
one line `kiroctl status` and the console show when there are any.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

# How far back the status line looks.
SUMMARY_DAYS = 7


@dataclass(frozen=True)
class DriftRecord:
    day: str  # YYYY-MM-DD, UTC
    kind: str  # kirod.drift.Kind
    where: str  # the Kiro operation
    facts: tuple[tuple[str, str], ...]
    count: int
    first_seen: float
    last_seen: float
    region: str | None
    version: str  # the kirod that saw it last

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DriftRecord:
        return cls(
            day=str(data["day"]),
            kind=str(data["kind"]),
            where=str(data["where"]),
            facts=tuple((str(name), str(value)) for name, value in data["facts"]),
            count=int(data["count"]),
            first_seen=float(data["first_seen"]),
            last_seen=float(data["last_seen"]),
            region=None if data.get("region") is None else str(data["region"]),
            version=str(data["version"]),
        )


@dataclass(frozen=True)
class DriftSummary:
    """`ways` distinct shapes seen `observations` times, the first at `since`."""

    ways: int
    observations: int
    since: float

    @classmethod
    def of(cls, records: tuple[DriftRecord, ...]) -> DriftSummary | None:
        if not records:
            return None
        return cls(
            ways=len({(r.kind, r.where, r.facts) for r in records}),
            observations=sum(r.count for r in records),
            since=min(r.first_seen for r in records),
        )

    def sentence(self) -> str:
        """The one line `kiroctl status` and the console show."""
        day = time.strftime("%Y-%m-%d", time.gmtime(self.since))
        ways = "1 way" if self.ways == 1 else f"{self.ways} ways"
        return f"Kiro answered in {ways} kirod does not know since {day}: kiroctl doctor"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DriftSummary:
        return cls(int(data["ways"]), int(data["observations"]), float(data["since"]))


@dataclass(frozen=True)
class Drift:
    since: float  # what was asked: records last seen at or after it
    records: tuple[DriftRecord, ...]  # newest first

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Drift:
        return cls(
            since=float(data["since"]),
            records=tuple(DriftRecord.from_json(item) for item in data["records"]),
        )
