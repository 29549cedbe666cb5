"""The outcome of a test alert (`POST /alerts/test`, `kiroctl alerts test`): each webhook's
answer and the desktop notification's."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AlertDelivery:
    """One webhook's answer to a test alert; `webhook` shows no path, query or user part."""

    webhook: str
    delivered: bool
    status: int | None  # the HTTP status, if the webhook answered
    error: str | None  # why it was not delivered: a network error, a timeout, the status

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AlertDelivery:
        status = data.get("status")
        error = data.get("error")
        return cls(
            webhook=str(data["webhook"]),
            delivered=bool(data["delivered"]),
            status=None if status is None else int(status),
            error=None if error is None else str(error),
        )


@dataclass(frozen=True)
class AlertTest:
    """POST /alerts/test: one `test` alert sent to every webhook, each webhook's answer, and
    the desktop notification's outcome (None: desktop notifications are off)."""

    webhooks: tuple[AlertDelivery, ...]
    desktop: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"webhooks": [hook.to_json() for hook in self.webhooks], "desktop": self.desktop}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AlertTest:
        desktop = data.get("desktop")
        return cls(
            webhooks=tuple(AlertDelivery.from_json(item) for item in data["webhooks"]),
            desktop=None if desktop is None else str(desktop),
        )
