"""Spend per key and account per UTC day, as `GET /spend` and the console's charts read it: from
the `spend` table the operation log's rows keep, over a real store."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from kirod.accounts.pool import AccountPool
from kirod.control.spending import Spending
from kirod.errors import InvalidControlRequest
from kirod.storage.db import Database
from kirod.storage.oplog import OpEntry, OpLog
from kirod.storage.spend import SpendStore

DAY = 86400.0
NOW = 1_765_065_600.0 + 15 * 3600  # 2025-12-07 15:00 UTC
ROW = OpEntry(
    at=NOW - 60,
    request_id="req_1",
    key_id="key-1",
    protocol="anthropic_messages",
    model="claude-sonnet-4-6",
    stream=False,
    account_id="acc-a",
    attempts=(),
    stop_reason="end_turn",
    input_tokens=100,
    output_tokens=20,
    credits=0.25,
    ttfb_ms=100.0,
    total_ms=300.0,
    status=200,
    error=None,
    dropped=(),
)


@pytest.fixture
async def spending(tmp_path: Path) -> AsyncIterator[Spending]:
    async with Database(tmp_path / "kirod.db") as db:
        oplog = OpLog(db)
        rows = [
            ROW,
            dataclasses.replace(ROW, request_id="req_2", credits=0.5),
            dataclasses.replace(ROW, request_id="req_3", at=NOW - 3 * DAY, credits=1.0),
            dataclasses.replace(ROW, request_id="req_4", at=NOW - 9 * DAY, credits=8.0),
            dataclasses.replace(ROW, request_id="req_5", key_id="key-2", account_id="acc-b"),
        ]
        for row in rows:
            oplog.append(row)  # left queued: the read must flush them first
        # The series read neither the pool nor the budgets.
        yield Spending(oplog, cast(AccountPool, None), SpendStore(db))


async def test_every_series_reads_each_key_that_spent_in_one_pass(spending: Spending) -> None:
    found = await spending.every_series("key", days=5, now=NOW)
    assert set(found) == {"key-1", "key-2"}
    one = found["key-1"]
    assert [day.day for day in one.days] == [
        "2025-12-03",
        "2025-12-04",
        "2025-12-05",
        "2025-12-06",
        "2025-12-07",
    ]
    assert [day.credits for day in one.days] == [0.0, 1.0, 0.0, 0.0, 0.75]
    assert [day.requests for day in one.days] == [0, 1, 0, 0, 2]
    assert one.days[-1].input_tokens == 200
    assert [day.credits for day in found["key-2"].days][-1] == 0.25
    longer = await spending.every_series("key", days=10, now=NOW)
    assert [day.credits for day in longer["key-1"].days] == [8.0] + [0.0] * 5 + [1.0] + [
        0.0
    ] * 2 + [0.75]
    accounts = await spending.every_series("account", days=5, now=NOW)
    assert {id_: sum(d.credits for d in s.days) for id_, s in accounts.items()} == {
        "acc-a": 1.75,
        "acc-b": 0.25,
    }


async def test_one_series_agrees_and_one_that_never_spent_is_all_zeros(
    spending: Spending,
) -> None:
    every = await spending.every_series("key", days=5, now=NOW)
    assert await spending.series("key", "key-1", days=5, now=NOW) == every["key-1"]
    none = await spending.series("key", "key-9", days=3, now=NOW)
    assert (none.scope, none.id) == ("key", "key-9")
    assert [(day.day, day.credits, day.requests) for day in none.days] == [
        ("2025-12-05", 0.0, 0),
        ("2025-12-06", 0.0, 0),
        ("2025-12-07", 0.0, 0),
    ]


@pytest.mark.parametrize(("scope", "days"), [("model", 5), ("key", 0), ("key", 401)])
async def test_a_wrong_scope_or_span_is_the_callers_error(
    spending: Spending, scope: str, days: int
) -> None:
    with pytest.raises(InvalidControlRequest):
        await spending.every_series(scope, days=days, now=NOW)
