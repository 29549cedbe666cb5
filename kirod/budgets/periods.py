"""The periods budgets count in: UTC days and calendar months, and the sliding minute."""

from __future__ import annotations

from datetime import UTC, datetime

DAY_S = 86400


def day_of(at: float) -> int:
    """The UTC day `at` falls in, as days since the epoch (the `spend` table's `day`)."""
    return int(at) // DAY_S


def month_of(at: float) -> int:
    """The UTC calendar month `at` falls in, as months since year 0."""
    moment = datetime.fromtimestamp(int(at), UTC)
    return moment.year * 12 + moment.month - 1


def month_of_day(day: int) -> int:
    return month_of(day * DAY_S)


def first_day_of_month(at: float) -> int:
    """The day number of the first day of `at`'s UTC month."""
    moment = datetime.fromtimestamp(int(at), UTC)
    return day_of(moment.replace(day=1, hour=0, minute=0, second=0).timestamp())


def next_day(at: float) -> float:
    """The next 00:00 UTC after `at`."""
    return float((day_of(at) + 1) * DAY_S)


def next_month(at: float) -> float:
    """The first instant of the UTC month after `at`'s."""
    moment = datetime.fromtimestamp(int(at), UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return datetime(year, month, 1, tzinfo=UTC).timestamp()
