"""The drift reports of the control API (`GET /drift`, the status line, `kiroctl doctor`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kirod.drift import Record
from kirod.report_types import Drift, DriftRecord, DriftSummary
from kirod.report_types.drift import SUMMARY_DAYS
from kirod.storage.drift import DriftBook


def _report(record: Record) -> DriftRecord:
    return DriftRecord(
        day=record.day,
        kind=record.kind.value,
        where=record.where,
        facts=record.shape,
        count=record.count,
        first_seen=record.first_seen,
        last_seen=record.last_seen,
        region=record.region,
        version=record.version,
    )


class DriftReports:
    def __init__(self, book: DriftBook, clock: Callable[[], float] = time.time) -> None:
        self._book = book
        self._clock = clock

    async def since(self, since: float) -> Drift:
        """The records last seen at or after `since`, newest first."""
        return Drift(since, tuple(_report(record) for record in await self._book.since(since)))

    async def summary(self) -> DriftSummary | None:
        """The status line's figures over the last `SUMMARY_DAYS` days; None when nothing."""
        recent = await self.since(self._clock() - SUMMARY_DAYS * 86_400)
        return DriftSummary.of(recent.records)
