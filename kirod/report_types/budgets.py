"""Budgets and spend as the control API reports them (`kiroctl keys list`, `accounts list`,
`kiroctl spend`, the console): limits, what is spent and held, what is left, and the spend per
day for the charts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kirod.report_types.reading import number_or_none


@dataclass(frozen=True)
class Budget:
    """A key's or an account's budgets (None: no limit) and its spend in the current UTC day
    and month. `held` is what requests in flight reserved; `left_*` is None without a limit."""

    credits_per_day: float | None = None
    credits_per_month: float | None = None
    tokens_per_minute: int | None = None  # keys only
    spent_today: float = 0.0
    spent_month: float = 0.0
    held: float = 0.0
    left_today: float | None = None
    left_month: float | None = None

    @property
    def limited(self) -> bool:
        return (
            self.credits_per_day is not None
            or self.credits_per_month is not None
            or self.tokens_per_minute is not None
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Budget:
        """Lenient: a daemon older than budgets sends none (all None and 0)."""
        if not isinstance(data, dict):
            return cls()
        tokens = data.get("tokens_per_minute")
        return cls(
            credits_per_day=number_or_none(data.get("credits_per_day")),
            credits_per_month=number_or_none(data.get("credits_per_month")),
            tokens_per_minute=tokens if isinstance(tokens, int) else None,
            spent_today=number_or_none(data.get("spent_today")) or 0.0,
            spent_month=number_or_none(data.get("spent_month")) or 0.0,
            held=number_or_none(data.get("held")) or 0.0,
            left_today=number_or_none(data.get("left_today")),
            left_month=number_or_none(data.get("left_month")),
        )


@dataclass(frozen=True)
class SpendDay:
    day: str  # YYYY-MM-DD, UTC
    requests: int
    input_tokens: int
    output_tokens: int
    credits: float


@dataclass(frozen=True)
class Spend:
    """One key's or account's spend per UTC day, oldest first, for the last `days` days."""

    scope: str  # "key" or "account"
    id: str
    days: tuple[SpendDay, ...]

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "id": self.id, "days": [asdict(d) for d in self.days]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Spend:
        return cls(
            scope=str(data["scope"]),
            id=str(data["id"]),
            days=tuple(
                SpendDay(
                    day=str(d["day"]),
                    requests=int(d["requests"]),
                    input_tokens=int(d["input_tokens"]),
                    output_tokens=int(d["output_tokens"]),
                    credits=float(d["credits"]),
                )
                for d in data.get("days", ())
            ),
        )
