"""The daemon's in-memory log tail behind `kiroctl logs`: numbered lines, bounded in bytes."""

from __future__ import annotations

import logging

from kirod.daemon.logging import MAX_LINE_BYTES, LogTail, TextFormatter


def tail_with(count: int, *, max_bytes: int = 1 << 20) -> LogTail:
    tail = LogTail(TextFormatter(), max_bytes=max_bytes)
    logger = logging.getLogger("kirod.test.tail")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(tail)
    try:
        for n in range(count):
            logger.info("event_%d", n)
    finally:
        logger.removeHandler(tail)
    return tail


def test_the_newest_lines_then_the_lines_after_a_number() -> None:
    tail = tail_with(5)
    newest = tail.read(after=None, lines=2, max_bytes=65536)
    assert [line.split()[-1] for line in newest.lines] == ["event_3", "event_4"]
    assert newest.next == 5
    assert tail.read(after=5, lines=0, max_bytes=65536).lines == ()
    assert tail.read(after=5, lines=0, max_bytes=65536).next == 5
    after = tail.read(after=2, lines=0, max_bytes=65536)
    assert [line.split()[-1] for line in after.lines] == ["event_2", "event_3", "event_4"]
    assert after.next == 5
    assert not after.missed
    assert not after.more
    nothing = tail.read(after=None, lines=0, max_bytes=65536)
    assert nothing.lines == ()
    assert nothing.next == 5


def test_the_byte_bound_pages_and_the_tail_forgets_the_oldest() -> None:
    tail = tail_with(100, max_bytes=2000)
    page = tail.read(after=0, lines=0, max_bytes=300)
    assert page.missed > 0  # the first lines left the tail
    assert page.more
    assert 0 < len(page.lines) < 10
    assert sum(len(line) + 1 for line in page.lines) <= 300
    rest = tail.read(after=page.next, lines=0, max_bytes=65536)
    assert rest.missed == 0
    assert not rest.more
    assert rest.next == 100


def test_a_long_line_is_cut() -> None:
    tail = LogTail(TextFormatter())
    record = logging.LogRecord("kirod", logging.INFO, __file__, 1, "x" * 50000, None, None)
    tail.handle(record)
    [line] = tail.read(after=0, lines=0, max_bytes=10).lines  # one line, whatever the bound
    assert len(line) <= MAX_LINE_BYTES + 1
