"""The account maintenance loop's report: token refreshes, usage probes and catalog reads, by
account, and when the loop last ran and runs next (part of `GET /status`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class MaintenanceResult:
    """What the last maintenance pass did for one account; `error` is None when it all worked."""

    account_id: str
    at: float
    actions: tuple[str, ...]  # "refresh", "usage", "catalog"
    error: str | None


@dataclass(frozen=True)
class Maintenance:
    """The account pool's background loop: token refreshes, usage probes, pruning."""

    interval_s: float
    running: bool
    last_pass_started: float | None
    last_pass_finished: float | None
    last_pass_error: str | None  # why the last pass fell short (its deadline, the store)
    next_pass_at: float | None
    results: tuple[MaintenanceResult, ...]  # each account's last result, by account id

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Maintenance:
        return cls(  # every field optional: an older kirod's status has no loop to report
            interval_s=float(data.get("interval_s", 0.0)),
            running=bool(data.get("running", False)),
            last_pass_started=data.get("last_pass_started"),
            last_pass_finished=data.get("last_pass_finished"),
            last_pass_error=data.get("last_pass_error"),
            next_pass_at=data.get("next_pass_at"),
            results=tuple(
                MaintenanceResult(
                    account_id=str(item["account_id"]),
                    at=float(item["at"]),
                    actions=tuple(item["actions"]),
                    error=item.get("error"),
                )
                for item in data.get("results", ())
            ),
        )
