"""What a key or an account may spend; None everywhere is no budget at all."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Credits a UTC day and a UTC calendar month, and (keys only) input plus output tokens
    in any 60 seconds; None: no limit on that."""

    credits_per_day: float | None = None
    credits_per_month: float | None = None
    tokens_per_minute: int | None = None

    @property
    def any(self) -> bool:
        return (
            self.credits_per_day is not None
            or self.credits_per_month is not None
            or self.tokens_per_minute is not None
        )

    @property
    def credits(self) -> bool:
        return self.credits_per_day is not None or self.credits_per_month is not None


NONE = Limits()
