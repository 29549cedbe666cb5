"""`kirod.log.Throttle`: one line per interval, the next one counting those held back."""

from __future__ import annotations

import logging
import time

import pytest

from kirod import log
from kirod.log import FIELDS_ATTR

INTERVAL_S = 0.2


def test_one_line_per_interval_with_the_count_held_back(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("kirod.test.throttle")
    throttle = log.Throttle(logger, interval_s=INTERVAL_S)
    with caplog.at_level(logging.INFO, logger=logger.name):
        for _ in range(50):
            throttle.event("noisy", kind="a")
        time.sleep(INTERVAL_S * 1.5)
        throttle.event("noisy", kind="b")
        throttle.event("noisy", kind="c")
    records = [record for record in caplog.records if record.name == logger.name]
    assert [record.levelno for record in records] == [logging.WARNING] * 2
    first, second = (getattr(record, FIELDS_ATTR) for record in records)
    assert first == {"kind": "a", "suppressed": None}
    assert second == {"kind": "b", "suppressed": 49}
