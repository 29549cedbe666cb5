"""The drift recorder (`kirod.drift`): shapes only, bounded, summed, logged once an interval."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kirod import drift
from kirod.drift import Drift, Kind, shape_value


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("newFancyEvent", "newFancyEvent"),
        ("DAILY_REQUEST_COUNT", "DAILY_REQUEST_COUNT"),
        ("claude-sonnet-4.5", "claude-sonnet-4.5"),  # a model's version is no id
        (272_000, "272000"),
        (True, "true"),
        (None, "NoneType"),
        # An account number, an ARN, a UUID, a date: masked, whatever else is kept.
        ("account123456789012", "account<id>"),
        ("arn:aws:codewhisperer:us-east-1:699475941385:profile/EHGA3GRVQMUK", "arn:*"),
        ("req-3f2a9c1e-1b2c-4d5e-8f90-123456789abc", "req-<id>"),
        ("2026-10-01", "<10 chars>"),
        ("v20261001", "v#"),
        # Free text, a token, content: only their length.
        ("Hello, my password is hunter2", "<29 chars>"),
        ("aoaAAAAAGh" + "x" * 80, "<90 chars>"),
    ],
)
def test_a_fact_keeps_codes_and_masks_what_could_identify(value: object, kept: str) -> None:
    assert shape_value(value) == kept


def test_key_names_are_kept_as_one_fact() -> None:
    names = drift.key_names({"toolUseId": 1, "newField": 2, "x" * 80: 3})
    assert names == "?,newField,toolUseId"  # a key that is no code is named by nothing
    assert shape_value(names) == names


def test_observations_are_summed_by_day_kind_place_and_shape() -> None:
    now = [1_790_000_000.0]
    recorder = Drift(clock=lambda: now[0])
    for _ in range(3):
        recorder.observe(Kind.EVENT_TYPE, "generateAssistantResponse", event_type="toolResultEvent")
        now[0] += 1
    recorder.observe(Kind.EVENT_TYPE, "generateAssistantResponse", event_type="otherEvent")
    records = sorted(recorder.take(), key=lambda r: r.count)
    assert [(r.count, dict(r.shape)["event_type"]) for r in records] == [
        (1, "otherEvent"),
        (3, "toolResultEvent"),
    ]
    assert (records[1].first_seen, records[1].last_seen) == (1_790_000_000.0, 1_790_000_002.0)
    assert recorder.take() == []  # taken once


def test_shapes_of_a_kind_are_bounded_a_day() -> None:
    recorder = Drift(clock=lambda: 1_790_000_000.0)
    for number in range(drift.MAX_SHAPES_PER_DAY + 40):
        recorder.observe(
            Kind.CATALOG_FIELD,
            "ListAvailableModels",
            field=f"field_{chr(97 + number % 26)}{number // 26}",
        )
    records = recorder.take()
    assert len(records) == drift.MAX_SHAPES_PER_DAY + 1
    other = [r for r in records if r.where == drift.OTHER]
    assert [(r.count, r.shape) for r in other] == [(40, ())]
    assert sum(r.count for r in records) == drift.MAX_SHAPES_PER_DAY + 40


def test_a_kind_reaches_the_log_once_an_interval(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Drift(log_interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="kirod.drift"):
        for _ in range(5):
            recorder.observe(Kind.ERROR_REASON, "generateAssistantResponse", reason="NEW_REASON")
        recorder.observe(Kind.HTTP_STATUS, "getUsageLimits", status=418)
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["kiro_drift", "kiro_drift"]  # one per kind, the repeats held back
    assert sum(r.count for r in recorder.take()) == 6  # every one counted all the same


def test_records_the_store_refused_are_written_next_time() -> None:
    recorder = Drift(clock=lambda: 1_790_000_000.0)
    recorder.observe(Kind.TAIL_MISSING, "generateAssistantResponse", blocks=1)
    taken = recorder.take()
    recorder.observe(Kind.TAIL_MISSING, "generateAssistantResponse", blocks=1)
    recorder.give_back(taken)
    (record,) = recorder.take()
    assert record.count == 2


def test_key_names_are_one_fact_that_survives_shaping() -> None:
    """A payload's key names stay readable as one fact; past a fact's length, the rest counted."""
    assert shape_value(drift.key_names({"n": 1, "secretText": "x"})) == "n,secretText"
    many = drift.key_names({f"keyName{chr(65 + i)}": i for i in range(20)})
    assert shape_value(many) == many
    assert many.endswith(",+8")  # twelve names at most
    assert len(many) <= drift.MAX_VALUE_CHARS
    assert shape_value("a, b") == "<4 chars>"  # words in a list are text, not names


async def test_a_watching_block_sees_its_own_tasks_observations_only() -> None:
    recorder = Drift(clock=lambda: 1_790_000_000.0)
    owner_started = asyncio.Event()
    done = asyncio.Event()

    async def elsewhere() -> None:  # another request, meeting drift at the same time
        await owner_started.wait()
        recorder.observe(Kind.EVENT_TYPE, "generateAssistantResponse", event_type="otherEvent")
        done.set()

    async def inside() -> None:  # a task the watched one starts sees with it
        recorder.observe(Kind.USAGE_FIELD, "getUsageLimits", field="newLimit")

    other = asyncio.create_task(elsewhere())
    with drift.watching() as seen:
        owner_started.set()
        await asyncio.create_task(inside())
        await done.wait()
    await other
    recorder.observe(Kind.USAGE_FIELD, "getUsageLimits", field="after")  # after the block
    assert seen == [drift.Seen(Kind.USAGE_FIELD, "getUsageLimits", (("field", "newLimit"),))]
    assert sum(r.count for r in recorder.take()) == 3  # every one summed all the same
