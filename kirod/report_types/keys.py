"""API keys as the control API lists and creates them (`kiroctl keys`): never a key's hash,
and its secret only in the answer that created it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kirod.report_types.budgets import Budget


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed: never the key itself nor its hash."""

    id: str
    name: str
    prefix: str
    created_at: float
    last_used_at: float | None
    models: tuple[str, ...]  # glob patterns; empty: any model
    rpm: int | None  # requests per minute; None: unlimited
    cache: bool = False  # may ask for cached answers (`x-kirod-cache: use`)
    budget: Budget = field(default_factory=Budget)  # its budgets and spend (kirod.budgets)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ApiKey:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            prefix=str(data["prefix"]),
            created_at=float(data["created_at"]),
            last_used_at=data.get("last_used_at"),
            models=tuple(data.get("models") or ()),
            rpm=data.get("rpm"),
            cache=bool(data.get("cache", False)),
            budget=Budget.from_json(data.get("budget")),
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new API key and its secret, which kirod shows in this answer only."""

    key: ApiKey
    secret: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.to_json(), "secret": self.secret}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreatedKey:
        return cls(key=ApiKey.from_json(data["key"]), secret=str(data["secret"]))
